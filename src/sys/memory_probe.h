// Process and machine memory probes read from /proc.
//
// These are measurements, not accounting: they answer "how much memory does
// this process / this machine hold right now". They are cheap (one small file
// read each) and safe to call from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <sys/types.h>

namespace llmux::sys {

// Resident memory of one process, from /proc/<pid>/status. All values in bytes.
struct ProcessMemory {
  uint64_t rss_anon = 0;   // RssAnon: heap, KV cache, compute buffers, hot tier
  uint64_t rss_file = 0;   // RssFile: mmapped model weights (reclaimable, shareable)
  uint64_t rss_shmem = 0;  // RssShmem
  uint64_t vm_rss = 0;     // VmRSS = anon + file + shmem
  uint64_t vm_hwm = 0;     // VmHWM: peak VmRSS
  int threads = 0;         // Threads
};

// Memory of the machine, from /proc/meminfo. Bytes.
struct MachineMemory {
  uint64_t total = 0;      // MemTotal
  uint64_t available = 0;  // MemAvailable
};

// Reads /proc/self/status. Returns nullopt only if /proc is unreadable.
std::optional<ProcessMemory> ReadProcessMemory();
// Reads /proc/<pid>/status. nullopt if the process does not exist.
std::optional<ProcessMemory> ReadProcessMemory(pid_t pid);
std::optional<MachineMemory> ReadMachineMemory();

// Returns free heap pages to the OS (glibc malloc_trim(0)). Walks every arena,
// so call it at quiet points (after a request finishes, after an unload), not
// per token.
void ReleaseFreeHeap();

}  // namespace llmux::sys
