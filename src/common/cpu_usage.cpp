#include "common/cpu_usage.h"

#include <sys/resource.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace elastrain {

CpuSnapshot TakeCpuSnapshot() {
  CpuSnapshot s;
  s.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  rusage ru{};
  if (::getrusage(RUSAGE_SELF, &ru) == 0)
    s.process_seconds = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                        static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  // "cpuN user nice system idle iowait irq softirq steal ...": idle and iowait are not busy.
  std::ifstream in("/proc/stat");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu", 0) != 0 || line.size() < 4 || line[3] < '0' || line[3] > '9') continue;
    std::istringstream fields(line.substr(line.find(' ')));
    uint64_t v[8] = {};
    for (uint64_t& x : v) fields >> x;
    CpuSnapshot::Core c;
    for (int i = 0; i < 8; ++i) c.total += v[i];
    c.busy = c.total - v[3] - v[4];
    s.cores.push_back(c);
  }
  return s;
}

CpuUsage CpuUsageBetween(const CpuSnapshot& a, const CpuSnapshot& b) {
  CpuUsage u;
  u.wall_seconds = b.wall_seconds - a.wall_seconds;
  if (u.wall_seconds > 0) u.process_cores = (b.process_seconds - a.process_seconds) / u.wall_seconds;
  if (a.cores.size() == b.cores.size())
    for (size_t i = 0; i < a.cores.size(); ++i) {
      const uint64_t total = b.cores[i].total - a.cores[i].total;
      u.core_busy.push_back(total ? static_cast<double>(b.cores[i].busy - a.cores[i].busy) / total : 0.0);
    }
  return u;
}

std::string CpuUsage::ToString() const {
  std::string s = fmt::format("{:.2f} cores busy with this process over {:.1f} s", process_cores, wall_seconds);
  if (!core_busy.empty()) {
    s += "; per core (all processes, /proc/stat):";
    for (size_t i = 0; i < core_busy.size(); ++i) s += fmt::format(" cpu{} {:.0f}%", i, 100 * core_busy[i]);
  }
  return s;
}

}  // namespace elastrain
