#include "sys/memory_probe.h"

#include <malloc.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace llmux::sys {
namespace {

// Parses "Key:   1234 kB" lines; returns bytes for kB values, raw for counts.
bool ParseLine(const char* line, const char* key, uint64_t* out, bool kib) {
  const size_t n = std::strlen(key);
  if (std::strncmp(line, key, n) != 0 || line[n] != ':') return false;
  unsigned long long v = 0;
  if (std::sscanf(line + n + 1, "%llu", &v) != 1) return false;
  *out = kib ? static_cast<uint64_t>(v) * 1024 : static_cast<uint64_t>(v);
  return true;
}

std::optional<ProcessMemory> ReadStatus(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "re");
  if (f == nullptr) return std::nullopt;
  ProcessMemory m;
  uint64_t threads = 0;
  char line[256];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    ParseLine(line, "RssAnon", &m.rss_anon, true) || ParseLine(line, "RssFile", &m.rss_file, true) ||
        ParseLine(line, "RssShmem", &m.rss_shmem, true) || ParseLine(line, "VmRSS", &m.vm_rss, true) ||
        ParseLine(line, "VmHWM", &m.vm_hwm, true) || ParseLine(line, "Threads", &threads, false);
  }
  std::fclose(f);
  m.threads = static_cast<int>(threads);
  return m;
}

}  // namespace

std::optional<ProcessMemory> ReadProcessMemory() { return ReadStatus("/proc/self/status"); }

std::optional<ProcessMemory> ReadProcessMemory(pid_t pid) {
  return ReadStatus("/proc/" + std::to_string(pid) + "/status");
}

std::optional<MachineMemory> ReadMachineMemory() {
  FILE* f = std::fopen("/proc/meminfo", "re");
  if (f == nullptr) return std::nullopt;
  MachineMemory m;
  char line[256];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    ParseLine(line, "MemTotal", &m.total, true) || ParseLine(line, "MemAvailable", &m.available, true);
  }
  std::fclose(f);
  return m;
}

void ReleaseFreeHeap() { malloc_trim(0); }

}  // namespace llmux::sys
