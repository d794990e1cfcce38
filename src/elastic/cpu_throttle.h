// CPU throttling of a worker's processes: how an agent carries out `elastrain chaos slow`
// (issue 32), to rehearse a gray failure (a host at a fraction of its speed).
//
// Two mechanisms, tried in this order:
//  1. cgroup v1's cpu controller (mounted at /sys/fs/cgroup/cpu here and in CI): a child
//     cgroup `elastrain-throttle-<pid>` of the cgroup the worker is in, with
//       cpu.cfs_quota_us = cpu.cfs_period_us * cpus / factor
//     where `cpus` is the CPU the worker had: its compute threads (threads_per_worker, or
//     the host's cores shared among the agent's slots). Every process of the worker's
//     process group is moved in (writing a pid to cgroup.procs moves its whole thread
//     group in v1); processes it starts later inherit the cgroup. On an oversubscribed
//     host (more runnable threads than cores) a worker never had `cpus` whole cores, so
//     the slowdown it sees is smaller than `factor`: measure it from its step times.
//  2. where no cgroup can be made (no controller, no permission), a stop/continue duty
//     cycle: a thread sends SIGCONT, lets the group run period / factor, sends SIGSTOP,
//     waits the rest of the period (kDutyPeriodSeconds), and ends with SIGCONT. (It
//     continues a worker that `chaos hang` stopped: do not combine the two.)
// Stop() undoes either: the processes are moved back to the parent cgroup, then the
// child cgroup is removed (rmdir); or the cycle ends with the group running.
//
// Thread-safety: a CpuThrottle and a WorkerThrottles are used from one thread (the
// agent's loop); the duty cycle's own thread touches only its atomics.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "wire/protocol.h"  // kMaxSlowFactor, kMaxSlowSeconds

namespace elastrain {

inline constexpr char kCpuCgroupRoot[] = "/sys/fs/cgroup/cpu";
// The stop/continue cycle's period: short against a training step, long against the
// cost of two signals.
inline constexpr double kDutyPeriodSeconds = 0.1;
// The smallest quota cgroup v1 accepts.
inline constexpr int64_t kMinCfsQuotaUs = 1000;
// Names of the child cgroups: this prefix and the worker's pid.
inline constexpr char kThrottleCgroupPrefix[] = "elastrain-throttle-";

struct ThrottleOptions {
  std::string cpu_root = kCpuCgroupRoot;  // the cpu controller's mount; "" : never a cgroup
  double duty_period_seconds = kDutyPeriodSeconds;
};

enum class ThrottleMechanism { kCgroup, kStopContinue };
const char* Name(ThrottleMechanism m);

// quota = period * cpus / factor, at least kMinCfsQuotaUs.
int64_t CfsQuotaUs(int64_t period_us, int cpus, double factor);

// The cpu controller's cgroup of `pid` ("/", "/a/b"), from /proc/<pid>/cgroup; NotFound
// when it has no v1 cpu line.
Result<std::string> CpuCgroupOf(pid_t pid);
// The processes whose process group is `pgid`, from /proc (running or not).
std::vector<pid_t> ProcessGroupMembers(pid_t pgid);

class CpuThrottle {
 public:
  // Slows `pid` (and the rest of its process group, when it leads one) to cpus / factor
  // CPUs. `factor` in (1, kMaxSlowFactor], `cpus` >= 1 (InvalidArgument otherwise);
  // NotFound when the process is gone. A cgroup that cannot be made is not an error:
  // the stop/continue cycle runs instead (`why_not_cgroup()` says why).
  static Result<std::unique_ptr<CpuThrottle>> Start(pid_t pid, double factor, int cpus,
                                                    const ThrottleOptions& opt = {});
  ~CpuThrottle();  // Stop(), its error logged
  CpuThrottle(const CpuThrottle&) = delete;
  CpuThrottle& operator=(const CpuThrottle&) = delete;

  // Undoes the throttle (above). Idempotent; an error names the cgroup and what failed
  // (the cgroup may then be left behind: SweepStaleThrottleCgroups removes it later).
  Status Stop();

  ThrottleMechanism mechanism() const { return mechanism_; }
  pid_t pid() const { return pid_; }
  double factor() const { return factor_; }
  const std::string& cgroup_dir() const { return cgroup_dir_; }  // "" : stop/continue
  int64_t quota_us() const { return quota_us_; }                  // 0 : stop/continue
  const std::string& why_not_cgroup() const { return why_not_cgroup_; }
  std::string Describe() const;  // "cgroup /sys/fs/cgroup/cpu/elastrain-throttle-12 (quota 50000/100000 us)"

 private:
  CpuThrottle(pid_t pid, double factor) : pid_(pid), factor_(factor) {}
  Status StartCgroup(int cpus, const ThrottleOptions& opt);
  Status StopCgroup();
  void StartDutyCycle(double period_seconds);
  void StopDutyCycle();
  void DutyCycle(double run_seconds, double stop_seconds);

  pid_t pid_ = 0;
  double factor_ = 1;
  ThrottleMechanism mechanism_ = ThrottleMechanism::kStopContinue;
  bool stopped_ = false;
  std::string cgroup_dir_, parent_dir_;
  int64_t period_us_ = 0, quota_us_ = 0;
  std::string why_not_cgroup_;
  std::thread duty_;
  std::mutex duty_mu_;
  std::condition_variable duty_cv_;
  bool duty_stop_ = false;  // GUARDED_BY(duty_mu_)
};

// Removes child cgroups `elastrain-throttle-<pid>` directly under `parent_dir` that hold
// no process and whose <pid> is gone (left by an agent that was killed): how many.
int SweepStaleThrottleCgroups(const std::string& parent_dir);

// The throttles of an agent's workers, by worker id, with their expiry.
class WorkerThrottles {
 public:
  explicit WorkerThrottles(ThrottleOptions opt = {}) : opt_(std::move(opt)) {}
  ~WorkerThrottles() { StopAll(); }

  // Throttles `worker` (replacing a throttle it had). seconds > 0: ExpireDue unslows it
  // once `now` passes now + seconds.
  Status Slow(const std::string& worker, pid_t pid, double factor, int cpus, double seconds, double now);
  // Unslows `worker`; OK when it was not slowed.
  Status Unslow(const std::string& worker);
  // Unslows the workers whose time ran out; their ids.
  std::vector<std::string> ExpireDue(double now);
  void StopAll();
  const CpuThrottle* Of(const std::string& worker) const;
  size_t size() const { return throttles_.size(); }

 private:
  struct Entry {
    std::unique_ptr<CpuThrottle> throttle;
    double until = 0;  // 0: until unslowed
  };
  ThrottleOptions opt_;
  std::map<std::string, Entry> throttles_;
};

}  // namespace elastrain
