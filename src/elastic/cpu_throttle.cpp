#include "elastic/cpu_throttle.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <sstream>

#include <fmt/format.h>

#include "common/log.h"

namespace elastrain {

namespace {

std::string Errno() { return std::strerror(errno); }

// cgroup and /proc files are read and written whole, without the atomic rename of
// common/files.h (a kernel interface, not a file).
Result<std::string> ReadText(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ESRCH ? Status::NotFound(path + ": " + Errno())
                                                         : Status::IOError(path + ": cannot open (" + Errno() + ")");
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string why = Errno();
      ::close(fd);
      return Status::IOError(path + ": read failed (" + why + ")");
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

Status WriteText(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Status::IOError(fmt::format("{}: cannot open for writing ({})", path, Errno()));
  ssize_t n;
  do n = ::write(fd, text.data(), text.size());
  while (n < 0 && errno == EINTR);
  const std::string why = n < 0 ? Errno() : "";
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size()))
    return Status::IOError(fmt::format("{}: writing '{}' failed ({})", path, text, n < 0 ? why : "short write"));
  return Status::OK();
}

std::vector<pid_t> PidsIn(const std::string& procs_file) {
  std::vector<pid_t> pids;
  auto text = ReadText(procs_file);
  if (!text.ok()) return pids;
  std::istringstream in(text.value());
  for (long p; in >> p;)
    if (p > 0) pids.push_back(static_cast<pid_t>(p));
  return pids;
}

// Moves every process of `from` into `to`'s cgroup.procs (ESRCH: it just exited).
Status MoveAll(const std::string& from, const std::string& to) {
  for (pid_t p : PidsIn(from + "/cgroup.procs")) {
    Status st = WriteText(to + "/cgroup.procs", std::to_string(p));
    if (!st.ok() && ::kill(p, 0) == 0) return st;
  }
  return Status::OK();
}

// Signals the group when `pid` leads one (a worker does: SpawnSelf), else the process.
int SignalTarget(pid_t pid) { return ::getpgid(pid) == pid ? -pid : pid; }

}  // namespace

const char* Name(ThrottleMechanism m) { return m == ThrottleMechanism::kCgroup ? "cgroup" : "stop/continue"; }

int64_t CfsQuotaUs(int64_t period_us, double cpus, double factor) {
  const double q = static_cast<double>(period_us) * std::max(0.0, cpus) / std::max(1.0, factor);
  return std::max<int64_t>(kMinCfsQuotaUs, static_cast<int64_t>(std::llround(q)));
}

Result<SchedSample> GroupSchedSample(pid_t pid) {
  std::vector<pid_t> members = ::getpgid(pid) == pid ? ProcessGroupMembers(pid) : std::vector<pid_t>{};
  if (std::find(members.begin(), members.end(), pid) == members.end()) members.push_back(pid);
  SchedSample s;
  bool any = false;
  for (pid_t p : members) {
    const std::string tasks = fmt::format("/proc/{}/task", p);
    DIR* d = ::opendir(tasks.c_str());
    if (d == nullptr) continue;
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      auto text = ReadText(tasks + "/" + e->d_name + "/schedstat");
      if (!text.ok()) continue;
      std::istringstream in(text.value());
      double on_ns = 0, wait_ns = 0;
      if (!(in >> on_ns >> wait_ns)) continue;
      s.on_cpu_seconds += on_ns * 1e-9;
      s.runnable_seconds += wait_ns * 1e-9;
      any = true;
    }
    ::closedir(d);
  }
  if (!any) return Status::NotFound(fmt::format("/proc/{}/task/*/schedstat: none readable (gone, or no schedstat)", pid));
  return s;
}

double RunnableShare(const SchedSample& before, const SchedSample& after) {
  const double on = after.on_cpu_seconds - before.on_cpu_seconds;
  const double queued = after.runnable_seconds - before.runnable_seconds;
  if (!(on > 1e-3) || !(queued >= 0)) return 1;  // too little to tell (or a thread exited)
  return std::clamp(on / (on + queued), 0.01, 1.0);
}

Result<std::string> CpuCgroupOf(pid_t pid) {
  const std::string file = fmt::format("/proc/{}/cgroup", pid);
  ELASTRAIN_ASSIGN_OR_RETURN(std::string text, ReadText(file));
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    // "4:cpu,cpuacct:/a/b": the controllers are the second field, the path the rest.
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::istringstream controllers(line.substr(a + 1, b - a - 1));
    for (std::string c; std::getline(controllers, c, ',');)
      if (c == "cpu") return line.substr(b + 1);
  }
  return Status::NotFound(file + ": no cgroup v1 'cpu' controller line");
}

std::vector<pid_t> ProcessGroupMembers(pid_t pgid) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    auto stat = ReadText(fmt::format("/proc/{}/stat", pid));
    if (!stat.ok()) continue;
    // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
    const size_t close = stat->rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat->substr(close + 1));
    std::string state;
    long ppid = 0, pgrp = 0;
    if (rest >> state >> ppid >> pgrp && pgrp == pgid) out.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

Result<std::unique_ptr<CpuThrottle>> CpuThrottle::Start(pid_t pid, double factor, double cpus,
                                                        const ThrottleOptions& opt) {
  if (!(factor > 1 && factor <= kMaxSlowFactor))
    return Status::InvalidArgument(fmt::format("slow factor {}: expected a number in (1, {}]", factor, kMaxSlowFactor));
  if (!(cpus > 0)) return Status::InvalidArgument(fmt::format("slow: cpus {}: expected a positive number", cpus));
  if (pid <= 0 || ::kill(pid, 0) != 0)
    return Status::NotFound(fmt::format("slow: process {} does not run", pid));
  std::unique_ptr<CpuThrottle> t(new CpuThrottle(pid, factor));
  t->cpus_ = cpus;
  Status cg = opt.cpu_root.empty() ? Status::FailedPrecondition("no cgroup root given") : t->StartCgroup(opt);
  if (cg.ok()) {
    t->mechanism_ = ThrottleMechanism::kCgroup;
    return t;
  }
  t->why_not_cgroup_ = cg.message();
  t->mechanism_ = ThrottleMechanism::kStopContinue;
  t->StartDutyCycle(opt.duty_period_seconds > 0 ? opt.duty_period_seconds : kDutyPeriodSeconds);
  return t;
}

CpuThrottle::~CpuThrottle() {
  Status st = Stop();
  if (!st.ok()) LOG_WARN("unslowing process {}: {}", pid_, st.message());
}

Status CpuThrottle::StartCgroup(const ThrottleOptions& opt) {
  if (::access((opt.cpu_root + "/cgroup.procs").c_str(), W_OK) != 0)
    return Status::FailedPrecondition(
        fmt::format("{}/cgroup.procs: not writable ({}): no cgroup v1 cpu controller to use", opt.cpu_root, Errno()));
  ELASTRAIN_ASSIGN_OR_RETURN(std::string path, CpuCgroupOf(pid_));
  parent_dir_ = opt.cpu_root + (path == "/" ? "" : path);
  cgroup_dir_ = fmt::format("{}/{}{}", parent_dir_, kThrottleCgroupPrefix, pid_);
  if (::mkdir(cgroup_dir_.c_str(), 0755) != 0 && errno != EEXIST) {
    const std::string why = fmt::format("{}: cannot make the cgroup ({})", cgroup_dir_, Errno());
    cgroup_dir_.clear();
    return Status::FailedPrecondition(why);
  }
  // From here on a failure undoes what was done before it returns.
  Status st = [&]() -> Status {
    ELASTRAIN_ASSIGN_OR_RETURN(std::string period, ReadText(cgroup_dir_ + "/cpu.cfs_period_us"));
    period_us_ = std::strtoll(period.c_str(), nullptr, 10);
    if (period_us_ <= 0)
      return Status::Corruption(fmt::format("{}/cpu.cfs_period_us: '{}': expected a positive number", cgroup_dir_,
                                            period.substr(0, 20)));
    quota_us_ = CfsQuotaUs(period_us_, cpus_, factor_);
    ELASTRAIN_RETURN_IF_ERROR(WriteText(cgroup_dir_ + "/cpu.cfs_quota_us", std::to_string(quota_us_)));
    std::vector<pid_t> members = ::getpgid(pid_) == pid_ ? ProcessGroupMembers(pid_) : std::vector<pid_t>{};
    if (std::find(members.begin(), members.end(), pid_) == members.end()) members.push_back(pid_);
    for (pid_t p : members) {
      Status moved = WriteText(cgroup_dir_ + "/cgroup.procs", std::to_string(p));
      if (!moved.ok() && (p == pid_ || ::kill(p, 0) == 0)) return moved;  // another member may have just exited
    }
    return Status::OK();
  }();
  if (!st.ok()) {
    Status undone = StopCgroup();
    if (!undone.ok()) LOG_WARN("slow: undoing a half-made throttle: {}", undone.message());
    cgroup_dir_.clear();
    quota_us_ = 0;
  }
  return st;
}

Status CpuThrottle::StopCgroup() {
  if (cgroup_dir_.empty()) return Status::OK();
  // A process forked while the move runs may land in the cgroup after it: a few passes.
  Status st;
  for (int pass = 0; pass < 3; ++pass) {
    st = MoveAll(cgroup_dir_, parent_dir_);
    if (!st.ok()) continue;
    if (::rmdir(cgroup_dir_.c_str()) == 0 || errno == ENOENT) return Status::OK();
    st = Status::IOError(fmt::format("{}: cannot remove the cgroup ({})", cgroup_dir_, Errno()));
  }
  return st;
}

void CpuThrottle::StartDutyCycle(double period_seconds) {
  const double run = period_seconds / factor_;
  duty_ = std::thread([this, run, rest = period_seconds - run] { DutyCycle(run, rest); });
}

void CpuThrottle::DutyCycle(double run_seconds, double stop_seconds) {
  const auto run = std::chrono::duration<double>(run_seconds), rest = std::chrono::duration<double>(stop_seconds);
  const int target = SignalTarget(pid_);
  std::unique_lock<std::mutex> lock(duty_mu_);
  while (!duty_stop_) {
    if (::kill(target, SIGCONT) != 0) break;  // gone
    if (duty_cv_.wait_for(lock, run, [&] { return duty_stop_; })) break;
    if (::kill(target, SIGSTOP) != 0) break;
    duty_cv_.wait_for(lock, rest, [&] { return duty_stop_; });
  }
  ::kill(target, SIGCONT);  // it ends running, whichever way the loop ended
}

void CpuThrottle::StopDutyCycle() {
  if (!duty_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(duty_mu_);
    duty_stop_ = true;
  }
  duty_cv_.notify_all();
  duty_.join();
}

Status CpuThrottle::Stop() {
  if (stopped_) return Status::OK();
  stopped_ = true;
  StopDutyCycle();
  return StopCgroup();
}

std::string CpuThrottle::Describe() const {
  if (mechanism_ == ThrottleMechanism::kCgroup)
    return fmt::format("cgroup {} (cpu.cfs_quota_us {} of period {}: {:.2f} CPU / {})", cgroup_dir_, quota_us_,
                       period_us_, cpus_, factor_);
  return fmt::format("stop/continue duty cycle 1/{:.3g} (no cgroup: {})", factor_, why_not_cgroup_);
}

int SweepStaleThrottleCgroups(const std::string& parent_dir) {
  DIR* d = ::opendir(parent_dir.c_str());
  if (d == nullptr) return 0;
  std::vector<std::string> stale;
  const std::string prefix = kThrottleCgroupPrefix;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind(prefix, 0) != 0) continue;
    // Another agent's, just made (its worker not moved in yet), is not stale.
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) == 0) continue;
    const std::string dir = parent_dir + "/" + name;
    if (PidsIn(dir + "/cgroup.procs").empty()) stale.push_back(dir);
  }
  ::closedir(d);
  int removed = 0;
  for (const std::string& dir : stale) removed += ::rmdir(dir.c_str()) == 0 ? 1 : 0;
  return removed;
}

// ---------------------------------------------------------------- WorkerThrottles
Status WorkerThrottles::Slow(const std::string& worker, pid_t pid, double factor, int threads, double seconds,
                             double now) {
  if (!(factor > 1 && factor <= kMaxSlowFactor))
    return Status::InvalidArgument(fmt::format("slow factor {}: expected a number in (1, {}]", factor, kMaxSlowFactor));
  if (!(seconds >= 0 && seconds <= kMaxSlowSeconds))
    return Status::InvalidArgument(fmt::format("slow seconds {}: expected 0 (until unslowed) to {}", seconds,
                                               kMaxSlowSeconds));
  if (pid <= 0 || ::kill(pid, 0) != 0) return Status::NotFound(fmt::format("slow: process {} does not run", pid));
  ELASTRAIN_RETURN_IF_ERROR(Unslow(worker));  // a second slow replaces the first
  PendingSlow p{pid, factor, seconds, std::max(1, threads), now, std::nullopt};
  // The duty cycle slows whatever share it gets: only a quota needs the share measured.
  if (opt_.cpu_root.empty() || ::access((opt_.cpu_root + "/cgroup.procs").c_str(), W_OK) != 0)
    return Start(worker, p, 1, now);
  auto sample = GroupSchedSample(pid);
  if (opt_.calibration_seconds <= 0)  // the share over the worker's life so far, at once
    return Start(worker, p, sample.ok() ? RunnableShare(SchedSample{}, sample.value()) : 1, now);
  if (sample.ok()) p.sample = sample.value();
  pending_[worker] = p;
  return Status::OK();
}

Status WorkerThrottles::Start(const std::string& worker, const PendingSlow& p, double share, double now) {
  ELASTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<CpuThrottle> t,
                             CpuThrottle::Start(p.pid, p.factor, p.threads * share, opt_));
  throttles_[worker] = Entry{std::move(t), p.seconds > 0 ? now + p.seconds : 0};
  return Status::OK();
}

Status WorkerThrottles::Unslow(const std::string& worker) {
  pending_.erase(worker);
  auto it = throttles_.find(worker);
  if (it == throttles_.end()) return Status::OK();
  Status st = it->second.throttle->Stop();
  throttles_.erase(it);
  return st;
}

WorkerThrottles::TickResult WorkerThrottles::Tick(double now) {
  TickResult r;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (now - it->second.since < opt_.calibration_seconds) {
      ++it;
      continue;
    }
    const PendingSlow p = it->second;
    const std::string worker = it->first;
    it = pending_.erase(it);
    double share = 1;
    if (p.sample)
      if (auto after = GroupSchedSample(p.pid); after.ok()) share = RunnableShare(*p.sample, after.value());
    if (Status st = Start(worker, p, share, now); st.ok()) r.started.push_back(worker);
    else r.failed.push_back({worker, st.message()});
  }
  for (const auto& [id, e] : throttles_)
    if (e.until > 0 && now >= e.until) r.expired.push_back(id);
  for (const std::string& id : r.expired) {
    Status st = Unslow(id);
    if (!st.ok()) LOG_WARN("unslowing worker {}: {}", id, st.message());
  }
  return r;
}

void WorkerThrottles::StopAll() {
  pending_.clear();
  for (auto& [id, e] : throttles_) {
    Status st = e.throttle->Stop();
    if (!st.ok()) LOG_WARN("unslowing worker {}: {}", id, st.message());
  }
  throttles_.clear();
}

const CpuThrottle* WorkerThrottles::Of(const std::string& worker) const {
  auto it = throttles_.find(worker);
  return it == throttles_.end() ? nullptr : it->second.throttle.get();
}

}  // namespace elastrain
