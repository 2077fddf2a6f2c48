#include "pool/memory_probe.h"

#include "sys/memory_probe.h"

namespace llmux {

uint64_t SystemMemoryProbe::ProcessBytes() {
  const auto m = sys::ReadProcessMemory();
  return m ? m->rss_anon + m->rss_file : 0;
}

uint64_t SystemMemoryProbe::MachineAvailableBytes() {
  const auto m = sys::ReadMachineMemory();
  return m ? m->available : 0;
}

void SystemMemoryProbe::ReturnFreedMemory() { sys::ReleaseFreeHeap(); }

}  // namespace llmux
