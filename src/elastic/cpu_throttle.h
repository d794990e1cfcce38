// CPU throttling of a worker's processes: how an agent carries out `elastrain chaos slow`
// (issue 32), to rehearse a gray failure (a host at a fraction of its speed).
//
// Two mechanisms, tried in this order:
//  1. cgroup v1's cpu controller (mounted at /sys/fs/cgroup/cpu here and in CI): a child
//     cgroup `elastrain-throttle-<pid>` of the cgroup the worker is in, with
//       cpu.cfs_quota_us = cpu.cfs_period_us * cpus / factor
//     where `cpus` is the CPU the worker had. Every process of the worker's process group
//     is moved in (writing a pid to cgroup.procs moves its whole thread group in v1);
//     processes it starts later inherit the cgroup.
//     The CPU it had (WorkerThrottles, below): its compute threads (threads_per_worker,
//     or the host's cores shared among the agent's slots) times the share of the CPU its
//     threads got while they were runnable, from /proc/<pid>/task/*/schedstat (time on a
//     CPU / (that + time waiting on a run queue); time asleep, e.g. blocked waiting for
//     peers, counts in neither): over the worker's life so far, so that the throttle
//     starts at once (ThrottleOptions::calibration_seconds > 0 measures over that window
//     first instead, delaying the throttle by it: 0.5 s is ~15 steps of `tiny`).
//     On an idle host the share is 1 and cpus = threads; on a host with twice as many
//     runnable threads as cores it is about 1/2, and a quota of threads / factor would
//     not bind at all. Measured on this 2-core machine, 2 workers of `small` (1 thread
//     each), rank 1 slowed 2x, the job's step time over 20 s before, during and after:
//     quota = threads / 2 at load 16: 0.92x (no slowdown); with the share measured over
//     0.5 s (0.45) at load 9-11: 1.86x; with the share over the worker's life (0.42, the
//     default) at load 7-8: 2.28x. Without schedstat the share is taken as 1.
//     The quota is fixed when the throttle starts: when the host's load changes later,
//     the slowdown the worker sees changes with it. Measure it from its step times.
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
#include <optional>
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
// A window WorkerThrottles may measure a worker's CPU share over before throttling it
// (ThrottleOptions::calibration_seconds; the default, 0, takes its life so far).
inline constexpr double kCalibrationSeconds = 0.5;
// Names of the child cgroups: this prefix and the worker's pid.
inline constexpr char kThrottleCgroupPrefix[] = "elastrain-throttle-";

struct ThrottleOptions {
  std::string cpu_root = kCpuCgroupRoot;  // the cpu controller's mount; "" : never a cgroup
  double duty_period_seconds = kDutyPeriodSeconds;
  double calibration_seconds = 0;  // 0: the share over the worker's life, at once; > 0: over this window first
};

enum class ThrottleMechanism { kCgroup, kStopContinue };
const char* Name(ThrottleMechanism m);

// quota = period * cpus / factor, at least kMinCfsQuotaUs.
int64_t CfsQuotaUs(int64_t period_us, double cpus, double factor);

// Scheduler time of a process group's threads (/proc/<pid>/task/*/schedstat), summed.
struct SchedSample {
  double on_cpu_seconds = 0;    // running
  double runnable_seconds = 0;  // waiting on a run queue for a CPU
};
// NotFound when the process is gone or the kernel keeps no schedstat.
Result<SchedSample> GroupSchedSample(pid_t pid);
// The share of a CPU the threads got while runnable between two samples, in (0, 1]; 1
// when they ran too little to tell.
double RunnableShare(const SchedSample& before, const SchedSample& after);

// The cpu controller's cgroup of `pid` ("/", "/a/b"), from /proc/<pid>/cgroup; NotFound
// when it has no v1 cpu line.
Result<std::string> CpuCgroupOf(pid_t pid);
// The processes whose process group is `pgid`, from /proc (running or not).
std::vector<pid_t> ProcessGroupMembers(pid_t pgid);

class CpuThrottle {
 public:
  // Slows `pid` (and the rest of its process group, when it leads one) to cpus / factor
  // CPUs. `factor` in (1, kMaxSlowFactor], `cpus` > 0 (InvalidArgument otherwise);
  // NotFound when the process is gone. A cgroup that cannot be made is not an error:
  // the stop/continue cycle runs instead (`why_not_cgroup()` says why).
  static Result<std::unique_ptr<CpuThrottle>> Start(pid_t pid, double factor, double cpus,
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
  double cpus() const { return cpus_; }
  const std::string& cgroup_dir() const { return cgroup_dir_; }  // "" : stop/continue
  int64_t quota_us() const { return quota_us_; }                  // 0 : stop/continue
  const std::string& why_not_cgroup() const { return why_not_cgroup_; }
  std::string Describe() const;  // "cgroup /sys/fs/cgroup/cpu/elastrain-throttle-12 (quota 50000/100000 us)"

 private:
  CpuThrottle(pid_t pid, double factor) : pid_(pid), factor_(factor) {}
  Status StartCgroup(const ThrottleOptions& opt);
  Status StopCgroup();
  void StartDutyCycle(double period_seconds);
  void StopDutyCycle();
  void DutyCycle(double run_seconds, double stop_seconds);

  pid_t pid_ = 0;
  double factor_ = 1;
  double cpus_ = 1;
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

// The throttles of an agent's workers, by worker id, with their expiry. With
// calibration_seconds > 0 a slow first measures the worker's CPU share over that window
// (see the top), then throttles: Tick does both, so the agent's loop never blocks on it.
class WorkerThrottles {
 public:
  explicit WorkerThrottles(ThrottleOptions opt = {}) : opt_(std::move(opt)) {}
  ~WorkerThrottles() { StopAll(); }

  // Slows `worker` to 1/factor of the CPU it has, at most `threads` cores (replacing a
  // slow it had): at once when calibration_seconds is 0 or no cgroup can be used (the
  // duty cycle slows whatever share it gets), else at the first Tick
  // calibration_seconds after `now`. seconds > 0: unslowed `seconds` after it starts.
  // InvalidArgument for a factor or seconds out of range, NotFound when it is gone.
  Status Slow(const std::string& worker, pid_t pid, double factor, int threads, double seconds, double now);
  // Unslows `worker` (or drops its pending slow); OK when it was not slowed.
  Status Unslow(const std::string& worker);
  struct TickResult {
    std::vector<std::string> started;             // throttled now (Of() describes them)
    std::vector<std::pair<std::string, std::string>> failed;  // worker, why
    std::vector<std::string> expired;             // unslowed: their seconds ran out
  };
  TickResult Tick(double now);
  void StopAll();
  const CpuThrottle* Of(const std::string& worker) const;  // null while pending
  bool Pending(const std::string& worker) const { return pending_.count(worker) > 0; }
  size_t size() const { return throttles_.size() + pending_.size(); }

 private:
  struct Entry {
    std::unique_ptr<CpuThrottle> throttle;
    double until = 0;  // 0: until unslowed
  };
  struct PendingSlow {
    pid_t pid = 0;
    double factor = 0, seconds = 0;
    int threads = 1;
    double since = 0;
    std::optional<SchedSample> sample;  // none: no schedstat, the share is taken as 1
  };
  Status Start(const std::string& worker, const PendingSlow& p, double share, double now);
  ThrottleOptions opt_;
  std::map<std::string, Entry> throttles_;
  std::map<std::string, PendingSlow> pending_;
};

}  // namespace elastrain
