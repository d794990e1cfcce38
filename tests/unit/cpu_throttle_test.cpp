// chaos slow (issue 32): the throttle of a real process (elastic/cpu_throttle.h), by a
// cgroup where /sys/fs/cgroup/cpu is writable, else by the stop/continue cycle; and the
// agent machine's slow/unslow/check_health commands. No timed assertions: the waits
// below poll for a state, bounded by a generous deadline.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "elastic/agent_machine.h"
#include "elastic/cpu_throttle.h"
#include "wire/exit_codes.h"

namespace elastrain {
namespace {

// A busy child leading its own process group, killed with its group at the end. With
// `grandchild`, it forks one more busy process into the group first.
class BusyChild {
 public:
  explicit BusyChild(bool grandchild = false) {
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      ::setpgid(0, 0);
      if (grandchild && ::fork() == 0) ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      volatile uint64_t spins = 0;
      for (;;) spins = spins + 1;
    }
    ::setpgid(pid_, pid_);  // whichever of the two runs first
  }
  ~BusyChild() {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

// The state letter of /proc/<pid>/stat (R running, S sleeping, T stopped, ...).
char State(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  return close == std::string::npos || close + 2 >= text.size() ? '?' : text[close + 2];
}

// Polls `ok` until it holds or 20 s pass (a bound for a loaded machine, not a timing).
bool Eventually(const std::function<bool()>& ok) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    if (ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return ok();
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<pid_t> Pids(const std::string& procs) {
  std::vector<pid_t> out;
  std::istringstream in(Slurp(procs));
  for (long p; in >> p;) out.push_back(static_cast<pid_t>(p));
  return out;
}

bool Contains(const std::vector<pid_t>& v, pid_t p) { return std::find(v.begin(), v.end(), p) != v.end(); }

bool CgroupWritable() { return ::access((std::string(kCpuCgroupRoot) + "/cgroup.procs").c_str(), W_OK) == 0; }

bool Exists(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0;
}

TEST(CpuThrottle, QuotaIsThePeriodTimesTheThreadsOverTheFactor) {
  EXPECT_EQ(CfsQuotaUs(100000, 1, 2), 50000);
  EXPECT_EQ(CfsQuotaUs(100000, 2, 4), 50000);
  EXPECT_EQ(CfsQuotaUs(100000, 1, 1.5), 66667);
  EXPECT_EQ(CfsQuotaUs(100000, 1, 100), 1000);
  EXPECT_EQ(CfsQuotaUs(10000, 1, 100), kMinCfsQuotaUs) << "cgroup v1 refuses a quota under 1 ms";
  EXPECT_EQ(CfsQuotaUs(100000, 0.5, 2), 25000) << "half a core had, half of that left";
}

TEST(CpuThrottle, TheRunnableShareIsTimeOnACpuOverThatAndTimeQueued) {
  EXPECT_DOUBLE_EQ(RunnableShare({1, 1}, {2, 1}), 1.0) << "never queued: a whole CPU";
  EXPECT_DOUBLE_EQ(RunnableShare({1, 1}, {2, 2}), 0.5) << "queued as long as it ran";
  EXPECT_DOUBLE_EQ(RunnableShare({1, 1}, {1, 3}), 1.0) << "did not run: too little to tell";
  EXPECT_DOUBLE_EQ(RunnableShare({1, 1}, {1.5, 0}), 1.0) << "a thread that exited took its time with it";
  EXPECT_DOUBLE_EQ(RunnableShare({0, 0}, {0.01, 100}), 0.01) << "at least 1%";
}

TEST(CpuThrottle, RefusesABadFactorAndAProcessThatIsGone) {
  BusyChild c;
  for (double f : {0.5, 1.0, 100.5, -3.0, std::nan("")}) {
    auto t = CpuThrottle::Start(c.pid(), f, 1);
    ASSERT_FALSE(t.ok()) << f;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << f;
    EXPECT_NE(t.status().message().find("factor"), std::string::npos) << t.status().message();
  }
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  int st = 0;
  ::waitpid(dead, &st, 0);
  auto t = CpuThrottle::Start(dead, 2, 1);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound) << t.status().message();
}

TEST(CpuThrottle, CgroupHoldsTheWholeProcessGroupWithItsQuotaAndIsRemovedAfter) {
  if (!CgroupWritable()) GTEST_SKIP() << kCpuCgroupRoot << " is not writable here: the fallback test covers this host";
  BusyChild c(/*grandchild=*/true);
  ASSERT_TRUE(Eventually([&] { return ProcessGroupMembers(c.pid()).size() == 2; })) << "the grandchild did not start";
  const std::vector<pid_t> group = ProcessGroupMembers(c.pid());
  auto before = CpuCgroupOf(c.pid());
  ASSERT_TRUE(before.ok()) << before.status().message();

  auto t = CpuThrottle::Start(c.pid(), 2, 1);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ((*t)->mechanism(), ThrottleMechanism::kCgroup) << (*t)->why_not_cgroup();
  const std::string dir = (*t)->cgroup_dir();
  EXPECT_NE(dir.find(kThrottleCgroupPrefix + std::to_string(c.pid())), std::string::npos) << dir;
  const std::vector<pid_t> inside = Pids(dir + "/cgroup.procs");
  for (pid_t p : group) EXPECT_TRUE(Contains(inside, p)) << "pid " << p << " of the group is not in " << dir;
  const long period = std::stol(Slurp(dir + "/cpu.cfs_period_us"));
  EXPECT_EQ(std::stol(Slurp(dir + "/cpu.cfs_quota_us")), period / 2);
  EXPECT_EQ((*t)->quota_us(), period / 2);
  auto now_in = CpuCgroupOf(c.pid());
  ASSERT_TRUE(now_in.ok());
  EXPECT_NE(now_in.value(), before.value());

  ASSERT_TRUE((*t)->Stop().ok());
  EXPECT_FALSE(Exists(dir)) << dir << " is still there after unslow";
  EXPECT_EQ(CpuCgroupOf(c.pid()).value(), before.value()) << "moved back to the parent cgroup";
  EXPECT_TRUE((*t)->Stop().ok()) << "idempotent";
}

TEST(CpuThrottle, CgroupOfAWorkerThatExitedIsRemovedToo) {
  if (!CgroupWritable()) GTEST_SKIP() << kCpuCgroupRoot << " is not writable here";
  std::string dir;
  {
    BusyChild c;
    auto t = CpuThrottle::Start(c.pid(), 4, 1);
    ASSERT_TRUE(t.ok()) << t.status().message();
    ASSERT_EQ((*t)->mechanism(), ThrottleMechanism::kCgroup) << (*t)->why_not_cgroup();
    dir = (*t)->cgroup_dir();
    ::kill(c.pid(), SIGKILL);
    int st = 0;
    ::waitpid(c.pid(), &st, 0);
    EXPECT_TRUE((*t)->Stop().ok());
  }
  EXPECT_FALSE(Exists(dir));
}

TEST(CpuThrottle, SweepRemovesAnEmptyThrottleCgroupOfAPidThatIsGone) {
  if (!CgroupWritable()) GTEST_SKIP() << kCpuCgroupRoot << " is not writable here";
  auto own = CpuCgroupOf(::getpid());
  ASSERT_TRUE(own.ok());
  const std::string parent = std::string(kCpuCgroupRoot) + (own.value() == "/" ? "" : own.value());
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  int st = 0;
  ::waitpid(dead, &st, 0);
  const std::string stale = parent + "/" + kThrottleCgroupPrefix + std::to_string(dead);
  ASSERT_EQ(::mkdir(stale.c_str(), 0755), 0) << stale;
  BusyChild live;  // a live agent's throttle, its worker not moved in yet: kept
  const std::string kept = parent + "/" + kThrottleCgroupPrefix + std::to_string(live.pid());
  ASSERT_EQ(::mkdir(kept.c_str(), 0755), 0) << kept;
  EXPECT_GE(SweepStaleThrottleCgroups(parent), 1);
  EXPECT_FALSE(Exists(stale));
  EXPECT_TRUE(Exists(kept));
  ::rmdir(kept.c_str());
}

TEST(CpuThrottle, WithoutACgroupTheDutyCycleStopsAndContinuesAndEndsRunning) {
  BusyChild c;
  ThrottleOptions opt;
  opt.cpu_root = "/nonexistent/cpu";  // no controller: the fallback
  auto t = CpuThrottle::Start(c.pid(), 2, 1, opt);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ((*t)->mechanism(), ThrottleMechanism::kStopContinue);
  EXPECT_NE((*t)->why_not_cgroup().find("/nonexistent/cpu"), std::string::npos) << (*t)->why_not_cgroup();
  EXPECT_TRUE((*t)->cgroup_dir().empty());
  EXPECT_TRUE(Eventually([&] { return State(c.pid()) == 'T'; })) << "the cycle never stopped the child";
  EXPECT_TRUE(Eventually([&] { return State(c.pid()) == 'R'; })) << "the cycle never continued the child";
  EXPECT_TRUE(Eventually([&] { return State(c.pid()) == 'T'; })) << "the cycle stopped the child only once";
  ASSERT_TRUE((*t)->Stop().ok());
  EXPECT_TRUE(Eventually([&] { return State(c.pid()) != 'T'; }));
  EXPECT_EQ(State(c.pid()), 'R') << "unslowed, the child runs";
}

TEST(WorkerThrottles, SecondsRunOutThenTheWorkerIsUnslowed) {
  BusyChild c;
  ThrottleOptions opt;
  opt.cpu_root = "";  // the cycle, on any host
  WorkerThrottles w(opt);
  ASSERT_TRUE(w.Slow("a1-w0", c.pid(), 2, 1, 5, 100).ok());
  ASSERT_NE(w.Of("a1-w0"), nullptr) << "a duty cycle needs no calibration";
  EXPECT_DOUBLE_EQ(w.Of("a1-w0")->factor(), 2);
  EXPECT_TRUE(w.Tick(104.9).expired.empty());
  EXPECT_EQ(w.Tick(105).expired, std::vector<std::string>{"a1-w0"});
  EXPECT_EQ(w.Of("a1-w0"), nullptr);
  EXPECT_TRUE(Eventually([&] { return State(c.pid()) == 'R'; }));

  ASSERT_TRUE(w.Slow("a1-w0", c.pid(), 3, 1, 0, 200).ok()) << "0 seconds: until unslowed";
  EXPECT_TRUE(w.Tick(1e12).expired.empty());
  ASSERT_TRUE(w.Slow("a1-w0", c.pid(), 4, 1, 0, 201).ok()) << "a second slow replaces the first";
  EXPECT_EQ(w.size(), 1u);
  EXPECT_DOUBLE_EQ(w.Of("a1-w0")->factor(), 4);
  EXPECT_TRUE(w.Unslow("a1-w0").ok());
  EXPECT_TRUE(w.Unslow("a1-w0").ok()) << "unslowing a worker not slowed is no error";
  EXPECT_EQ(w.size(), 0u);
  auto bad = w.Slow("a1-w0", c.pid(), 2, 1, -1, 0);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Eventually([&] { return State(c.pid()) == 'R'; }));
}

TEST(WorkerThrottles, DestroyedWithTheAgentTheyUndoEveryThrottle) {
  BusyChild a, b;
  std::string dir;
  {
    WorkerThrottles w;  // the real cgroup root where writable, else the cycle
    ASSERT_TRUE(w.Slow("w-a", a.pid(), 2, 1, 0, 0).ok());
    ASSERT_TRUE(w.Slow("w-b", b.pid(), 2, 1, 0, 0).ok());
    ASSERT_NE(w.Of("w-a"), nullptr);
    dir = w.Of("w-a")->cgroup_dir();
  }
  if (!dir.empty()) {
    EXPECT_FALSE(Exists(dir));
  }
  EXPECT_TRUE(Eventually([&] { return State(a.pid()) == 'R' && State(b.pid()) == 'R'; }));
}

TEST(WorkerThrottles, WithoutAWritableCgroupTheCycleStartsAtOnce) {
  BusyChild c;
  ThrottleOptions opt;
  opt.cpu_root = "/nonexistent/cpu";
  opt.calibration_seconds = kCalibrationSeconds;
  WorkerThrottles w(opt);
  ASSERT_TRUE(w.Slow("a1-w0", c.pid(), 2, 1, 0, 0).ok());
  EXPECT_FALSE(w.Pending("a1-w0")) << "nothing to calibrate: the cycle slows whatever share it gets";
  ASSERT_NE(w.Of("a1-w0"), nullptr);
  EXPECT_EQ(w.Of("a1-w0")->mechanism(), ThrottleMechanism::kStopContinue);
  w.StopAll();
  EXPECT_TRUE(Eventually([&] { return State(c.pid()) == 'R'; }));
}

TEST(WorkerThrottles, ACgroupQuotaIsCalibratedToTheShareTheWorkerHad) {
  if (!CgroupWritable()) GTEST_SKIP() << kCpuCgroupRoot << " is not writable here";
  BusyChild c;
  ThrottleOptions opt;  // the real root
  opt.calibration_seconds = kCalibrationSeconds;
  WorkerThrottles w(opt);
  const double t0 = 1000;
  ASSERT_TRUE(w.Slow("a1-w0", c.pid(), 2, 1, 10, t0).ok());
  EXPECT_TRUE(w.Pending("a1-w0"));
  EXPECT_EQ(w.Of("a1-w0"), nullptr);
  EXPECT_TRUE(w.Tick(t0 + kCalibrationSeconds / 2).started.empty()) << "still measuring";
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // some CPU time to measure (not asserted on)
  auto r = w.Tick(t0 + kCalibrationSeconds);
  ASSERT_EQ(r.started, std::vector<std::string>{"a1-w0"}) << (r.failed.empty() ? "" : r.failed[0].second);
  const CpuThrottle* t = w.Of("a1-w0");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->mechanism(), ThrottleMechanism::kCgroup) << t->why_not_cgroup();
  EXPECT_GT(t->cpus(), 0);
  EXPECT_LE(t->cpus(), 1) << "at most its one thread's core";
  const long period = std::stol(Slurp(t->cgroup_dir() + "/cpu.cfs_period_us"));
  EXPECT_EQ(std::stol(Slurp(t->cgroup_dir() + "/cpu.cfs_quota_us")), CfsQuotaUs(period, t->cpus(), 2));
  EXPECT_LE(t->quota_us(), period / 2);
  const std::string dir = t->cgroup_dir();
  EXPECT_EQ(w.Tick(t0 + kCalibrationSeconds + 10).expired, std::vector<std::string>{"a1-w0"}) << "10 s after it began";
  EXPECT_FALSE(Exists(dir));

  ASSERT_TRUE(w.Slow("a1-w0", c.pid(), 2, 1, 0, t0).ok());
  EXPECT_TRUE(w.Unslow("a1-w0").ok()) << "a pending slow is dropped";
  EXPECT_TRUE(w.Tick(t0 + 100).started.empty());
  EXPECT_EQ(w.size(), 0u);
}

TEST(WorkerThrottles, ByDefaultTheQuotaStartsAtOnceFromTheShareOverTheWorkersLife) {
  if (!CgroupWritable()) GTEST_SKIP() << kCpuCgroupRoot << " is not writable here";
  BusyChild c;
  ASSERT_TRUE(Eventually([&] {  // some time on a CPU to measure
    auto s = GroupSchedSample(c.pid());
    return s.ok() && s->on_cpu_seconds > 0.01;
  }));
  WorkerThrottles w;
  ASSERT_TRUE(w.Slow("a1-w0", c.pid(), 4, 2, 0, 0).ok());
  EXPECT_FALSE(w.Pending("a1-w0"));
  const CpuThrottle* t = w.Of("a1-w0");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->mechanism(), ThrottleMechanism::kCgroup) << t->why_not_cgroup();
  EXPECT_GT(t->cpus(), 0);
  EXPECT_LE(t->cpus(), 2) << "at most its two threads' cores";
  EXPECT_EQ(t->quota_us(), CfsQuotaUs(std::stol(Slurp(t->cgroup_dir() + "/cpu.cfs_period_us")), t->cpus(), 4));
}

// ---------------------------------------------------------------- the agent machine
class AgentChaosThrottle : public ::testing::Test {
 protected:
  AgentChaosThrottle() : m_(Options()) {
    JobObserved j;
    j.spec = JobSpec{"job1", "model_name: tiny\n", "/runs/job1", 1};
    j.settings = AgentJobSettings{20, 30, 15, 3};  // threads_per_worker 3
    for (const AgentAction& a : m_.Step(j, now_))
      if (const auto* s = std::get_if<SpawnWorker>(&a)) {
        m_.Step(WorkerSpawned{s->worker, 100 + s->slot}, now_);
        m_.Step(WorkerSaid{s->worker, ReadyMessage{100 + s->slot, -1}}, now_);
      }
  }
  static AgentMachineOptions Options() {
    AgentMachineOptions o;
    o.id = "a1";
    o.host = "h1";
    o.slots = 2;
    o.cores = 8;
    o.store_url = "memory://";
    return o;
  }
  std::vector<AgentAction> Command(CommandAction action, const std::string& worker, double factor = 0,
                                   double seconds = 0) {
    AgentCommand c{action, worker, now_, "job1"};
    c.factor = factor;
    c.seconds = seconds;
    return m_.Step(CommandSeen{c}, now_);
  }
  template <typename A>
  static std::vector<A> All(const std::vector<AgentAction>& acts) {
    std::vector<A> out;
    for (const AgentAction& a : acts)
      if (const A* x = std::get_if<A>(&a)) out.push_back(*x);
    return out;
  }
  double now_ = 1000;
  AgentMachine m_;
};

TEST_F(AgentChaosThrottle, SlowThrottlesTheWorkerByItsThreads) {
  auto slow = All<SlowWorker>(Command(CommandAction::kSlow, "a1-w1", 2.5, 30));
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_EQ(slow[0].worker, "a1-w1");
  EXPECT_EQ(slow[0].pid, 101);
  EXPECT_DOUBLE_EQ(slow[0].factor, 2.5);
  EXPECT_DOUBLE_EQ(slow[0].seconds, 30);
  EXPECT_EQ(slow[0].threads, 3) << "threads_per_worker";
  auto unslow = All<UnslowWorker>(Command(CommandAction::kUnslow, "a1-w1"));
  ASSERT_EQ(unslow.size(), 1u);
  EXPECT_EQ(unslow[0].worker, "a1-w1");
}

TEST_F(AgentChaosThrottle, ASlowCommandOutOfRangeOrForAnotherWorkerDoesNothing) {
  for (double f : {0.0, 1.0, 101.0, std::nan("")})
    EXPECT_TRUE(All<SlowWorker>(Command(CommandAction::kSlow, "a1-w0", f)).empty()) << f;
  EXPECT_TRUE(All<SlowWorker>(Command(CommandAction::kSlow, "a1-w0", 2, -5)).empty());
  EXPECT_TRUE(All<SlowWorker>(Command(CommandAction::kSlow, "a1-w9", 2)).empty()) << "no such worker";
  AgentCommand other{CommandAction::kSlow, "a1-w0", now_, "job2"};
  other.factor = 2;
  EXPECT_TRUE(All<SlowWorker>(m_.Step(CommandSeen{other}, now_)).empty()) << "another job's command";
}

// chaos preempt (issue 37): a notice to one worker; its slot is gone until the capacity
// returns after the command's seconds, and a worker that ignores the notice is killed
// when preemption_notice_seconds (15 here) are up.
TEST_F(AgentChaosThrottle, PreemptGivesANoticeAndTheSlotReturnsAfterItsSeconds) {
  auto notice = All<SignalWorker>(Command(CommandAction::kPreempt, "a1-w1", 0, 60));
  ASSERT_EQ(notice.size(), 1u);
  EXPECT_EQ(notice[0].pid, 101);
  EXPECT_EQ(notice[0].signal, SIGTERM);
  EXPECT_TRUE(All<SignalWorker>(Command(CommandAction::kPreempt, "a1-w1", 0, 60)).empty()) << "already leaving";
  auto left = m_.Step(WorkerExited{"a1-w1", ProcessExit{false, kExitPreempted}}, now_ + 2);
  EXPECT_EQ(m_.Worker("a1-w1")->exit_kind, ExitKind::kPreempted);
  EXPECT_EQ(m_.LiveSlots(), 1);
  auto reg = All<UpdateRegistration>(left);
  ASSERT_EQ(reg.size(), 1u);
  EXPECT_EQ(reg[0].slots, 1);
  EXPECT_TRUE(All<SpawnWorker>(m_.Step(Tick{}, now_ + 61)).empty()) << "59 s after it left: still gone";
  auto back = m_.Step(Tick{}, now_ + 63);
  EXPECT_EQ(m_.LiveSlots(), 2);
  ASSERT_EQ(All<UpdateRegistration>(back).size(), 1u);
  EXPECT_EQ(All<UpdateRegistration>(back)[0].slots, 2);
  ASSERT_EQ(All<SpawnWorker>(back).size(), 1u) << "the returned slot is filled";
  EXPECT_EQ(All<SpawnWorker>(back)[0].slot, 1);
}

TEST_F(AgentChaosThrottle, APreemptWithoutSecondsTakesTheSlotForGoodAndAnIgnoredNoticeEndsInAKill) {
  ASSERT_EQ(All<SignalWorker>(Command(CommandAction::kPreempt, "a1-w0")).size(), 1u);
  EXPECT_TRUE(All<SignalWorker>(m_.Step(Tick{}, now_ + 14)).empty()) << "within its notice";
  auto kill = All<SignalWorker>(m_.Step(Tick{}, now_ + 16));
  ASSERT_EQ(kill.size(), 1u);
  EXPECT_EQ(kill[0].signal, SIGKILL);
  m_.Step(WorkerExited{"a1-w0", ProcessExit{true, SIGKILL}}, now_ + 16);
  EXPECT_EQ(m_.Worker("a1-w0")->exit_kind, ExitKind::kPreempted);
  EXPECT_EQ(m_.LiveSlots(), 1);
  EXPECT_TRUE(All<SpawnWorker>(m_.Step(Tick{}, now_ + 1e6)).empty()) << "never returns";
  EXPECT_EQ(m_.LiveSlots(), 1);
  for (double s : {-1.0, 1e9, std::nan("")})
    EXPECT_TRUE(All<SignalWorker>(Command(CommandAction::kPreempt, "a1-w1", 0, s)).empty()) << s;
}

TEST_F(AgentChaosThrottle, CheckHealthIsTheHostsNotAWorkers) {
  EXPECT_EQ(All<CheckHostHealth>(Command(CommandAction::kCheckHealth, "")).size(), 1u);
}

}  // namespace
}  // namespace elastrain
