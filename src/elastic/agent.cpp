// The agent's executor: the decisions are elastic/agent_machine.h's; this file polls the
// workers' channels, reaps their exits, spawns and signals processes and talks to the
// store, feeding what it sees to the machine and carrying out what it answers.
#include "elastic/agent.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "common/clock.h"
#include "common/files.h"
#include "common/safe_path.h"
#include "common/log.h"
#include "common/process.h"
#include "config/config.h"
#include "elastic/agent_machine.h"
#include "elastic/cpu_throttle.h"
#include "elastic/lease_keeper.h"
#include "wire/channel.h"
#include "wire/job_state.h"
#include "wire/protocol.h"
#include "wire/worker_messages.h"

namespace elastrain {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How long the store watcher's WaitForChange blocks at a time (it re-arms at once), and
// how long it backs off when the store cannot be reached.
constexpr milliseconds kStoreWatchTimeout{1000};
constexpr milliseconds kStoreWatchRetry{200};
// The store is read this often even without a change seen (a watch that failed).
constexpr milliseconds kStoreResync{1000};

std::string LocalHostName() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

// A worker process as the executor holds it: what the machine does not need.
struct Proc {
  int pid = 0;
  std::unique_ptr<Channel> ch;  // null once the process is gone
};

// What the store says of the job, read in one List of elastrain/job/.
struct JobKeys {
  std::optional<JobSpec> spec;
  std::optional<JobRecord> record;
  std::optional<Plan> plan;
  std::optional<GenerationStop> stop;
};

}  // namespace

class Agent::Impl {
 public:
  explicit Impl(Agent* owner)
      : a_(owner),
        store_(*owner->store_),
        opt_(owner->opt_),
        lease_store_(opt_.lease_store ? *opt_.lease_store : store_),
        keeper_(opt_.lease_ttl, {[this] { return lease_store_.KeepAlive(lease_.load()); },
                                 [this](const std::string& why) { Fence(why); },
                                 [this] {
                                   lease_lost_ = true;
                                   a_->wake_.Notify();
                                 }}) {
    if (opt_.head_key) signed_.emplace(opt_.head_key, "agent " + opt_.id);
  }
  ~Impl() {
    keeper_.Stop();
    StopWatcher();
    CancelHealthCheck();
  }
  Result<AgentEnd> Run();

 private:
  Status Register();
  // The lease keeper's verdict (elastic/lease_keeper.h): SIGKILL every worker's process
  // group now, from the keeper's thread, whatever the loop is blocked in.
  void Fence(const std::string& why);
  // After the keeper found the lease gone: register again (fresh capacity), retrying.
  void RegisterAgainIfLost();
  AgentInfo Info(int slots, bool preempting) const;
  Status PutAgentInfo(int slots, bool preempting);
  std::string Holder();
  Status WaitForFreeId();
  Status SyncWithStore();
  Result<JobKeys> ReadJobKeys();
  JobObserved ObserveJob(const JobKeys& k);
  void RunCommands();
  // Waits up to `timeout` for a worker's message or exit, or a wake-up.
  void PollChannels(milliseconds timeout);
  // The store watcher thread: notifies a_->wake_ each time the revision moves.
  void WatchStore();
  void TellWatcherToStop();
  void StopWatcher();
  void ReadChannel(const std::string& id, Proc& p);
  void ReapExits();
  void Exited(const std::string& id, const ProcessExit& e);

  void Feed(const AgentInput& in);
  void Execute(const AgentAction& a);
  void Do(const SpawnWorker& a);
  void Do(const SendToWorker& a);
  void Do(const SignalWorker& a);
  void Do(const UpdateRegistration& a) { (void)PutAgentInfo(a.slots, a.preempting); }
  void Do(const PutReport& a);
  void Do(const PutDeparture& a) { (void)store_.Put(keys::Departed(opt_.id), ToJson(a.report)); }
  void Do(const KillHost&) {
    throttles_.StopAll();  // no cgroup outlives the agent
    ::raise(SIGKILL);
  }
  void Do(const SlowWorker& a);
  void Do(const UnslowWorker& a);
  void Do(const CheckHostHealth&);
  // Chaos slow: throttles whose calibration ended start, those that ran out of time end.
  void ExpireThrottles();
  void LogSlowed(const std::string& worker);
  void Do(const Finish& a) { end_ = a.end; }

  // Health checks (elastic/health_check.h).
  HealthCheckOptions HealthOptions() const;
  void WriteHealth(const HealthRecord& rec);
  // Starts a check on health_thread_ when one is due (asked for, or the period passed
  // while idle), or renews the last verdict while busy.
  void MaybeCheckHealth();
  bool WorkersIdle() const;
  void JoinHealthThread();
  void CancelHealthCheck();
  // How often the record is written (checked, or renewed): the period, or with period 0
  // the default (a record that is only renewed must still not expire).
  double HealthInterval() const {
    return opt_.health_check_period > 0 ? opt_.health_check_period : kDefaultHealthCheckPeriodSeconds;
  }

  Agent* a_;
  Store& store_;
  AgentOptions opt_;
  std::unique_ptr<AgentMachine> machine_;
  std::map<std::string, Proc> procs_;  // live workers, by id
  std::atomic<LeaseId> lease_{0};
  Store& lease_store_;  // renewals, bounded by a short request timeout
  LeaseKeeper keeper_;
  std::atomic<bool> lease_lost_{false};
  Clock::time_point next_register_try_;
  std::mutex fence_mu_;
  std::map<std::string, int> fence_pids_;  // GUARDED_BY(fence_mu_): procs_'s pids, for Fence
  Clock::time_point last_sync_;
  int64_t seen_revision_ = -1;
  std::atomic<bool> store_changed_{true};  // set by the watcher, taken by the loop
  std::thread watcher_;
  std::mutex watcher_mu_;
  std::condition_variable watcher_cv_;
  bool watcher_stop_ = false;             // GUARDED_BY(watcher_mu_)
  std::string settings_job_;             // the job whose config settings_ holds
  std::optional<AgentJobSettings> settings_;
  std::string settings_error_;
  bool run_dir_admitted_ = false;          // settings_job_'s run directory is within --allow-path
  std::optional<AgentEnd> end_;
  std::string last_store_error_;
  WorkerThrottles throttles_;  // chaos slow; destroyed (undone) with the agent on every path
  std::optional<SignedReader> signed_;  // with a head key: what the head did not sign is ignored
  std::map<std::string, std::string> last_signed_;  // key -> the last value the head signed there
  std::string run_dir_;                    // the job's, once seen: its health check writes there
  std::thread health_thread_;
  std::atomic<bool> health_running_{false};
  std::atomic<bool> health_cancel_{false};  // the agent is stopping: a running check gives up
  bool health_asked_ = false;              // a check_health command came
  Clock::time_point next_health_;
  std::mutex health_mu_;
  std::optional<HealthRecord> last_health_;  // GUARDED_BY(health_mu_): the newest written
};

// ---------------------------------------------------------------- the machine
void Agent::Impl::Feed(const AgentInput& in) {
  for (const AgentAction& a : machine_->Step(in, WallSeconds())) Execute(a);
}

void Agent::Impl::Execute(const AgentAction& a) {
  std::visit([this](const auto& v) { Do(v); }, a);
}

void Agent::Impl::Do(const SpawnWorker& a) {
  auto pair = MakeChannelPair();
  if (!pair.ok()) {
    Feed(SpawnFailed{a.worker, pair.status().message()});
    return;
  }
  auto [mine, theirs] = pair.value();
  SpawnSpec spec;
  spec.args = a.launch.args;
  spec.env = a.launch.env;
  spec.env.insert(opt_.worker_env.begin(), opt_.worker_env.end());
  spec.log_path = a.launch.log_path;
  (void)MakeDirs(a.launch.log_path.substr(0, a.launch.log_path.rfind('/')));
  spec.channel_fd = theirs;
  auto pid = SpawnSelf(spec);
  ::close(theirs);
  if (!pid.ok()) {
    ::close(mine);
    Feed(SpawnFailed{a.worker, pid.status().message()});
    return;
  }
  procs_[a.worker] = Proc{pid.value(), std::make_unique<Channel>(mine)};
  {
    std::lock_guard<std::mutex> lock(fence_mu_);
    fence_pids_[a.worker] = pid.value();
  }
  Feed(WorkerSpawned{a.worker, pid.value()});
}

void Agent::Impl::Do(const SendToWorker& a) {
  auto it = procs_.find(a.worker);
  if (it == procs_.end() || !it->second.ch) return;
  // A failed send means the worker is gone: its exit is seen in the next poll.
  Status st = it->second.ch->Send(ToJson(a.message));
  if (!st.ok()) LOG_DEBUG("agent {}: worker {} did not take a message: {}", opt_.id, a.worker, st.message());
}

void Agent::Impl::Do(const SignalWorker& a) {
  if (!procs_.count(a.worker) || a.pid <= 0) return;
  // A worker leads its process group (SpawnSelf): a SIGKILL takes whatever it started
  // with it (a launched program and that program's children).
  ::kill(a.signal == SIGKILL ? -a.pid : a.pid, a.signal);
}

void Agent::Impl::Do(const SlowWorker& a) {
  if (!procs_.count(a.worker) || a.pid <= 0) return;
  Status st = throttles_.Slow(a.worker, a.pid, a.factor, a.threads, a.seconds, WallSeconds());
  if (!st.ok()) LOG_WARN("agent {}: chaos slow of worker {} (pid {}) failed: {}", opt_.id, a.worker, a.pid, st.message());
  else if (throttles_.Pending(a.worker))
    LOG_INFO("agent {}: chaos slow: measuring the CPU share of worker {} (pid {}) for {}s", opt_.id, a.worker, a.pid,
             kCalibrationSeconds);
  else LogSlowed(a.worker);
}

void Agent::Impl::LogSlowed(const std::string& worker) {
  const CpuThrottle* t = throttles_.Of(worker);
  if (t == nullptr) return;
  LOG_WARN("agent {}: chaos slow: worker {} (pid {}) at 1/{} of {:.2f} CPU(s): {}", opt_.id, worker, t->pid(),
           t->factor(), t->cpus(), t->Describe());
}

void Agent::Impl::Do(const UnslowWorker& a) {
  const bool was = throttles_.Of(a.worker) != nullptr || throttles_.Pending(a.worker);
  Status st = throttles_.Unslow(a.worker);
  if (!st.ok()) LOG_WARN("agent {}: chaos unslow of worker {}: {}", opt_.id, a.worker, st.message());
  else if (was) LOG_WARN("agent {}: chaos unslow: worker {} runs at full speed again", opt_.id, a.worker);
}

// The machine passed the command's fence (its job); the check runs off the loop
// (MaybeCheckHealth).
void Agent::Impl::Do(const CheckHostHealth&) {
  health_asked_ = opt_.health_checks;
  if (!opt_.health_checks) LOG_WARN("agent {}: check_health asked, but this agent runs no health checks", opt_.id);
}

void Agent::Impl::ExpireThrottles() {
  const WorkerThrottles::TickResult r = throttles_.Tick(WallSeconds());
  for (const std::string& w : r.started) LogSlowed(w);
  for (const auto& [w, why] : r.failed) LOG_WARN("agent {}: chaos slow of worker {} failed: {}", opt_.id, w, why);
  for (const std::string& w : r.expired)
    LOG_WARN("agent {}: chaos slow of worker {} ran its time: at full speed again", opt_.id, w);
}

void Agent::Impl::Do(const PutReport& a) {
  Status st = store_.Put(keys::Report(opt_.id), ToJson(a.report), lease_).status();
  if (!st.ok()) {
    LOG_WARN("agent {}: cannot write its report: {}", opt_.id, st.message());
    return;
  }
  Feed(ReportWritten{});
}

// ---------------------------------------------------------------- registration
AgentInfo Agent::Impl::Info(int slots, bool preempting) const {
  AgentInfo info;
  info.id = opt_.id;
  info.host = opt_.host;
  info.address = opt_.address;
  info.slots = slots;
  info.pid = static_cast<int>(::getpid());
  info.started_at = WallSeconds();
  info.preempting = preempting;
  info.health_checks = opt_.health_checks;
  return info;
}

Status Agent::Impl::PutAgentInfo(int slots, bool preempting) {
  return store_.Put(keys::Agent(opt_.id), ToJson(Info(slots, preempting)), lease_).status();
}

// Who holds the registration of this agent's id, for messages.
std::string Agent::Impl::Holder() {
  auto held = store_.Get(keys::Agent(opt_.id));
  AgentInfo other;
  if (!held.ok() || !held->has_value() || !FromJson(held->value().value, &other).ok()) return "another agent";
  return fmt::format("pid {} on host {} ({})", other.pid, other.host, other.address);
}

Status Agent::Impl::WaitForFreeId() {
  // An agent of this id that just died (a restarted pod or service) holds its
  // registration until its lease expires: wait that out, then refuse.
  const Clock::time_point deadline = Clock::now() + 2 * opt_.lease_ttl + std::chrono::seconds(1);
  bool told = false;
  for (;;) {
    ELASTRAIN_ASSIGN_OR_RETURN(auto held, store_.Get(keys::Agent(opt_.id)));
    if (!held.has_value()) return Status::OK();
    if (Clock::now() >= deadline || a_->stop_ || a_->preempt_)
      return Status::FailedPrecondition(fmt::format("agent id {} is registered by a live agent: {}; an id must be "
                                                    "unique among live agents (pass another --id)",
                                                    opt_.id, Holder()));
    if (!told) LOG_WARN("agent {}: the id is still registered by {}; waiting for its lease to end", opt_.id, Holder());
    told = true;
    std::this_thread::sleep_for(opt_.lease_ttl / 8);
  }
}

Status Agent::Impl::Register() {
  ELASTRAIN_RETURN_IF_ERROR(WaitForFreeId());
  const Clock::time_point asked = Clock::now();
  ELASTRAIN_ASSIGN_OR_RETURN(LeaseId lease, store_.GrantLease(opt_.lease_ttl));
  lease_ = lease;
  keeper_.Start(asked);
  const int slots = machine_->preempting() ? 0 : machine_->LiveSlots();
  // Created only where no key is: two agents starting with one id cannot both register.
  ELASTRAIN_ASSIGN_OR_RETURN(bool created, store_.CompareAndSwap(keys::Agent(opt_.id), 0,
                                                                 ToJson(Info(slots, machine_->preempting())), lease_));
  if (!created) {
    (void)store_.RevokeLease(lease_);  // its keeper finds the lease gone: this agent tries again later
    return Status::FailedPrecondition(fmt::format("agent id {} was registered by {} at the same moment; an id must be "
                                                  "unique among live agents (pass another --id)",
                                                  opt_.id, Holder()));
  }
  Feed(Registered{});
  LOG_INFO("agent {} registered in {} (host {}, {} slots, lease {} ms)", opt_.id, store_.url(), opt_.host, slots,
           opt_.lease_ttl.count());
  return Status::OK();
}

void Agent::Impl::Fence(const std::string& why) {
  std::lock_guard<std::mutex> lock(fence_mu_);
  LOG_ERROR("agent {}: self-fencing: {}; killing its {} worker(s) so that none outlives this agent's lease", opt_.id,
            why, fence_pids_.size());
  for (const auto& [id, pid] : fence_pids_)
    if (pid > 0) ::kill(-pid, SIGKILL);  // each leads its process group (SpawnSelf)
}

void Agent::Impl::RegisterAgainIfLost() {
  if (!lease_lost_ || Clock::now() < next_register_try_) return;
  LOG_WARN("agent {}: its lease expired; registering again (its slots come back as new capacity)", opt_.id);
  Status st = Register();
  if (st.ok()) {
    lease_lost_ = false;
    return;
  }
  LOG_WARN("agent {}: cannot register again yet: {}", opt_.id, st.message());
  next_register_try_ = Clock::now() + opt_.lease_ttl / 4;
}

// ---------------------------------------------------------------- workers
void Agent::Impl::PollChannels(milliseconds timeout) {
  std::vector<pollfd> fds;
  std::vector<std::string> ids;
  for (auto& [id, p] : procs_) {
    if (!p.ch) continue;
    fds.push_back({p.ch->fd(), POLLIN, 0});
    ids.push_back(id);
  }
  const size_t wake = fds.size();
  fds.push_back({a_->wake_.fd(), POLLIN, 0});  // fd -1 (no eventfd) is ignored by poll
  if (::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, timeout.count()))) <= 0) return;
  if (fds[wake].revents) a_->wake_.Drain();
  for (size_t i = 0; i < wake; ++i) {
    auto it = procs_.find(ids[i]);
    if (fds[i].revents && it != procs_.end()) ReadChannel(ids[i], it->second);
  }
}

void Agent::Impl::ReadChannel(const std::string& id, Proc& p) {
  std::vector<nlohmann::json> msgs;
  Status st = p.ch->ReadAvailable(&msgs);
  for (const auto& j : msgs) {
    WorkerMessage m;
    Status parsed = FromJson(j, &m);
    if (parsed.ok()) Feed(WorkerSaid{id, std::move(m)});
    else LOG_WARN("agent {}: worker {}: {}", opt_.id, id, parsed.message());
  }
  if (st.ok()) return;
  // The channel closed: the process is dead or dying. Collect its status now.
  int status = 0;
  const int pid = p.pid;
  pid_t r = ::waitpid(pid, &status, 0);
  Exited(id, r == pid ? ProcessExitFromStatus(status) : ProcessExit{true, SIGKILL});
}

void Agent::Impl::ReapExits() {
  std::vector<std::pair<std::string, ProcessExit>> gone;
  for (auto& [id, p] : procs_) {
    int status = 0;
    if (::waitpid(p.pid, &status, WNOHANG) == p.pid) gone.push_back({id, ProcessExitFromStatus(status)});
  }
  for (const auto& [id, e] : gone) Exited(id, e);
}

void Agent::Impl::Exited(const std::string& id, const ProcessExit& e) {
  if (Status st = throttles_.Unslow(id); !st.ok()) LOG_WARN("agent {}: unslowing worker {}: {}", opt_.id, id, st.message());
  // Whatever is left of its process group (a launched program it started) goes with it.
  if (auto it = procs_.find(id); it != procs_.end() && it->second.pid > 0) ::kill(-it->second.pid, SIGKILL);
  procs_.erase(id);
  {
    std::lock_guard<std::mutex> lock(fence_mu_);
    fence_pids_.erase(id);
  }
  Feed(WorkerExited{id, e});
}

// ---------------------------------------------------------------- the store
Result<JobKeys> Agent::Impl::ReadJobKeys() {
  ELASTRAIN_ASSIGN_OR_RETURN(std::vector<KeyValue> job, store_.List(keys::kRoot + "job/"));
  JobKeys k;
  for (KeyValue kv : job) {
    if (signed_ && keys::HeadSigned(kv.key)) {
      // What the head did not sign is ignored (logged once): the agent goes on with the
      // last record the head signed there, so a forgery changes nothing.
      if (signed_->Accept(kv.key, kv.value)) {
        last_signed_[kv.key] = kv.value;
      } else {
        auto last = last_signed_.find(kv.key);
        if (last == last_signed_.end()) continue;
        kv.value = last->second;
      }
    }
    Status st;
    if (kv.key == keys::JobSpec()) st = FromJson(kv.value, &k.spec.emplace());
    else if (kv.key == keys::JobRecord()) st = FromJson(kv.value, &k.record.emplace());
    else if (kv.key == keys::JobPlan()) st = FromJson(kv.value, &k.plan.emplace());
    else if (kv.key == keys::GenerationStop()) st = FromJson(kv.value, &k.stop.emplace());
    if (!st.ok()) return Status::Corruption(kv.key + ": " + st.message());
  }
  return k;
}

// The job as the machine takes it: its config's settings are loaded once per job.
JobObserved Agent::Impl::ObserveJob(const JobKeys& k) {
  JobObserved o;
  o.spec = k.spec;
  if (k.record && k.spec && k.record->job_id == k.spec->job_id) {
    o.terminal = IsTerminal(k.record->state);
  }
  if (k.spec && k.spec->job_id != settings_job_) {
    settings_job_ = k.spec->job_id;
    settings_.reset();
    settings_error_.clear();
    auto cfg = LoadConfigText(k.spec->config_yaml, "job " + k.spec->job_id + " config");
    // A run directory outside the directories this agent allows: not written at all.
    const Status admitted =
        opt_.admission ? AdmitPath(*opt_.admission, "the run directory", k.spec->run_dir) : Status::OK();
    run_dir_admitted_ = admitted.ok();
    if (!admitted.ok()) {
      settings_error_ = admitted.message();
    } else if (cfg.ok()) {
      settings_ = AgentJobSettings{cfg->worker_heartbeat_timeout, cfg->collective_timeout,
                                   cfg->preemption_notice_seconds, cfg->threads_per_worker};
    } else {
      settings_error_ = cfg.status().message();
    }
  }
  if (k.spec && run_dir_admitted_) {
    GuardDirectory(k.spec->run_dir);  // the workers' logs go there
    run_dir_ = k.spec->run_dir;
  }
  o.settings = settings_;
  o.error = settings_error_;
  return o;
}

void Agent::Impl::RunCommands() {
  auto cmds = store_.List(keys::CommandPrefix(opt_.id));
  if (!cmds.ok()) return;
  for (const KeyValue& kv : cmds.value()) {
    (void)store_.Delete(kv.key);
    if (signed_ && !signed_->Accept(kv.key, kv.value, /*once_only=*/true)) continue;  // refused, logged once
    AgentCommand c;
    Status st = FromJson(kv.value, &c);
    if (st.ok()) Feed(CommandSeen{c});
    else LOG_WARN("agent {}: ignored a command: {}", opt_.id, st.message());
  }
}

void Agent::Impl::WatchStore() {
  int64_t seen = -1;
  std::unique_lock<std::mutex> lock(watcher_mu_);
  while (!watcher_stop_) {
    lock.unlock();
    auto rev = store_.WaitForChange(seen, kStoreWatchTimeout);
    lock.lock();
    if (!rev.ok()) {
      // The loop's own store reads report the error; here only wait for it to pass.
      watcher_cv_.wait_for(lock, kStoreWatchRetry, [&] { return watcher_stop_; });
      continue;
    }
    if (rev.value() != seen) {
      seen = rev.value();
      store_changed_ = true;
      a_->wake_.Notify();
    }
  }
}

void Agent::Impl::TellWatcherToStop() {
  {
    std::lock_guard<std::mutex> lock(watcher_mu_);
    watcher_stop_ = true;
  }
  watcher_cv_.notify_all();
}

void Agent::Impl::StopWatcher() {
  if (!watcher_.joinable()) return;
  TellWatcherToStop();
  watcher_.join();  // at the next change in the store, or within one kStoreWatchTimeout
}

Status Agent::Impl::SyncWithStore() {
  ELASTRAIN_ASSIGN_OR_RETURN(int64_t rev, store_.Revision());
  if (rev == seen_revision_) return Status::OK();
  seen_revision_ = rev;
  ELASTRAIN_ASSIGN_OR_RETURN(JobKeys k, ReadJobKeys());
  Feed(ObserveJob(k));
  if (k.plan) Feed(PlanSeen{*k.plan});
  if (k.stop) Feed(StopSeen{*k.stop});
  RunCommands();
  return Status::OK();
}

// ---------------------------------------------------------------- the loop
Result<AgentEnd> Agent::Impl::Run() {
  if (opt_.host.empty()) opt_.host = LocalHostName();
  if (opt_.id.empty()) opt_.id = fmt::format("{}-{}", opt_.host, ::getpid());
  if (opt_.slots < 1) return Status::InvalidArgument(fmt::format("--slots {}: expected at least 1", opt_.slots));
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  machine_ = std::make_unique<AgentMachine>(
      AgentMachineOptions{opt_.id, opt_.host, opt_.address, opt_.slots, cores, opt_.exit_when_job_ends, store_.url(),
                          opt_.head_key ? opt_.head_key->pem() : std::string(), opt_.admission});
  if (auto own = CpuCgroupOf(::getpid()); own.ok()) {  // left by an agent that was killed
    const int swept = SweepStaleThrottleCgroups(kCpuCgroupRoot + (own.value() == "/" ? "" : own.value()));
    if (swept > 0) LOG_INFO("agent {}: removed {} empty throttle cgroup(s) left behind", opt_.id, swept);
  }
  if (opt_.health_checks) {
    // Before it offers slots: a host is never seen without a verdict. A failing one
    // registers all the same (the controller says why it is not planned).
    WriteHealth(RunHealthCheck(HealthOptions(), opt_.host, opt_.id, HealthInterval()));
    next_health_ = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(1000 * HealthInterval()));
  }
  ELASTRAIN_RETURN_IF_ERROR(Register());
  watcher_ = std::thread([this] { WatchStore(); });
  bool stop_fed = false, preempt_fed = false;
  while (!end_) {
    if (a_->stop_ && !stop_fed) {
      stop_fed = true;
      Feed(UserStop{});
    }
    if (a_->preempt_ && !preempt_fed) {
      preempt_fed = true;
      Feed(PreemptionNotice{});
    }
    PollChannels(kAgentIdleWait);
    ReapExits();
    if (store_changed_.exchange(false) || Clock::now() - last_sync_ >= kStoreResync) {
      last_sync_ = Clock::now();
      Status st = SyncWithStore();
      if (!st.ok() && st.message() != last_store_error_) LOG_WARN("agent {}: {}", opt_.id, st.message());
      last_store_error_ = st.ok() ? "" : st.message();
    }
    RegisterAgainIfLost();
    ExpireThrottles();
    if (opt_.health_checks) MaybeCheckHealth();
    Feed(Tick{});
  }
  CancelHealthCheck();
  throttles_.StopAll();
  // Revoking the lease removes this agent's keys: a change, which ends the watcher's
  // wait at once rather than at its timeout.
  TellWatcherToStop();
  keeper_.Stop();
  (void)store_.RevokeLease(lease_);
  StopWatcher();
  LOG_INFO("agent {}: stopped", opt_.id);
  return *end_;
}

// ---------------------------------------------------------------- health checks
HealthCheckOptions Agent::Impl::HealthOptions() const {
  HealthCheckOptions h;
  h.command = opt_.health_check_command;
  h.timeout = opt_.health_check_timeout;
  h.run_dir = run_dir_;
  h.store_reachable = [this] { return store_.Revision().status(); };
  h.cancelled = [this] { return health_cancel_.load(); };
  return h;
}

void Agent::Impl::WriteHealth(const HealthRecord& rec) {
  if (rec.healthy) LOG_INFO("agent {}: health check passed (GEMM {:.2f} GFLOP/s, memory {:.2f} GB/s)", opt_.id,
                            rec.gemm_gflops, rec.memory_gbps);
  else LOG_WARN("agent {}: health check failed: {}", opt_.id, rec.reason);
  // Not leased: the record outlives this agent and a head restart; it expires instead.
  Status st = store_.Put(keys::Health(opt_.host), ToJson(rec)).status();
  if (!st.ok()) LOG_WARN("agent {}: cannot write {}: {}", opt_.id, keys::Health(opt_.host), st.message());
  std::lock_guard<std::mutex> lock(health_mu_);
  last_health_ = rec;
}

bool Agent::Impl::WorkersIdle() const {
  for (const std::string& id : machine_->WorkerIds()) {
    const WorkerRecord* w = machine_->Worker(id);
    if (w && (w->phase == WorkerPhase::kRunning || w->phase == WorkerPhase::kLeaving)) return false;
  }
  return true;
}

void Agent::Impl::JoinHealthThread() {
  if (health_thread_.joinable()) health_thread_.join();  // within the command's timeout + the probe
}

void Agent::Impl::CancelHealthCheck() {
  health_cancel_ = true;  // its command is killed within one poll; the probe is under a second
  JoinHealthThread();
}

void Agent::Impl::MaybeCheckHealth() {
  if (health_running_) return;
  const Clock::time_point now = Clock::now();
  if (!health_asked_ && now < next_health_) return;
  const double period = HealthInterval();
  next_health_ = now + std::chrono::milliseconds(static_cast<int64_t>(1000 * period));
  const bool check = health_asked_ || (opt_.health_check_period > 0 && WorkersIdle());
  health_asked_ = false;
  if (!check) {
    // Busy (or checking only when asked): the last verdict is renewed, not re-measured.
    std::optional<HealthRecord> rec;
    {
      std::lock_guard<std::mutex> lock(health_mu_);
      rec = last_health_;
    }
    if (!rec) return;
    rec->expires_at = WallSeconds() + kHealthRecordPeriods * period;
    Status st = store_.Put(keys::Health(opt_.host), ToJson(*rec)).status();
    if (!st.ok()) LOG_WARN("agent {}: cannot renew {}: {}", opt_.id, keys::Health(opt_.host), st.message());
    else {
      std::lock_guard<std::mutex> lock(health_mu_);
      last_health_ = rec;
    }
    return;
  }
  JoinHealthThread();  // the last one has ended (health_running_ is false)
  health_running_ = true;
  health_thread_ = std::thread([this, h = HealthOptions()] {
    WriteHealth(RunHealthCheck(h, opt_.host, opt_.id, HealthInterval()));
    health_running_ = false;
    a_->wake_.Notify();
  });
}

Agent::Agent(std::shared_ptr<Store> store, AgentOptions opt) : store_(std::move(store)), opt_(std::move(opt)) {
  impl_ = std::make_unique<Impl>(this);
}
Agent::~Agent() = default;

Result<AgentEnd> Agent::Run() { return impl_->Run(); }

}  // namespace elastrain
