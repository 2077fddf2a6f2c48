// MemoryProbe: what the pool measures about memory (process resident bytes,
// machine availability) and how it returns freed memory. The real one reads
// /proc; unit tests substitute scripted fakes.
#pragma once

#include <cstdint>

namespace llmux {

// Thread-safety: all methods may be called from any thread.
class MemoryProbe {
 public:
  virtual ~MemoryProbe() = default;
  // Resident memory of this process: RssAnon + RssFile (KV, buffers, mapped weights).
  virtual uint64_t ProcessBytes() = 0;
  // MemAvailable of the machine.
  virtual uint64_t MachineAvailableBytes() = 0;
  // Gives freed heap pages back to the OS (malloc_trim).
  virtual void ReturnFreedMemory() = 0;
};

class SystemMemoryProbe final : public MemoryProbe {
 public:
  uint64_t ProcessBytes() override;
  uint64_t MachineAvailableBytes() override;
  void ReturnFreedMemory() override;
};

}  // namespace llmux
