// How busy the CPUs were over an interval: this process's CPU time (getrusage) and each
// core's busy share, machine-wide (/proc/stat: every process's work, not only ours).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace elastrain {

struct CpuSnapshot {
  double wall_seconds = 0;     // steady clock
  double process_seconds = 0;  // user + system time of every thread of this process
  struct Core {
    uint64_t busy = 0, total = 0;  // jiffies since boot
  };
  std::vector<Core> cores;  // empty where /proc/stat cannot be read
};
CpuSnapshot TakeCpuSnapshot();

struct CpuUsage {
  double wall_seconds = 0;
  double process_cores = 0;        // process CPU seconds / wall seconds: cores kept busy on average
  std::vector<double> core_busy;   // per core, in [0, 1]; empty when not measured
  // "1.92 cores busy with this process over 12.3 s; per core (all processes): cpu0 97%, cpu1 95%"
  std::string ToString() const;
};
CpuUsage CpuUsageBetween(const CpuSnapshot& start, const CpuSnapshot& end);

}  // namespace elastrain
