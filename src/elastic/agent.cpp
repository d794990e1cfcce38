#include "elastic/agent.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "common/clock.h"
#include "common/files.h"
#include "common/log.h"
#include "config/config.h"
#include "wire/channel.h"
#include "wire/exit_codes.h"
#include "wire/job_state.h"
#include "common/process.h"
#include "wire/protocol.h"
#include "wire/worker_messages.h"
#include "kernels/gemm.h"

namespace elastrain {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How long one loop iteration waits on the workers' channels.
constexpr milliseconds kChannelPoll{10};
// How often the store is checked for a new plan, stop request or chaos command.
constexpr double kStoreSyncSeconds = 0.025;
// Reports that carry only progress are written at most this often; state changes
// (ready, started, first step, ended, exit) are written at once.
constexpr double kProgressReportSeconds = 0.25;
// A fresh worker must report ready within this (config load and the SGEMM probe).
constexpr double kStartupTimeoutSeconds = 120;
// Exit records stay in the report this long, for the controller to read.
constexpr double kExitRecordSeconds = 600;
constexpr size_t kMaxExitRecords = 64;
// Slack on top of collective_timeout before a straggler of an old generation is killed.
constexpr double kStragglerSlackSeconds = 5;
// How long workers get to leave after an `exit` message before they are killed.
constexpr double kShutdownGraceSeconds = 10;
// Longest back-off between respawns of a slot whose workers die before becoming ready.
constexpr double kMaxRespawnBackoffSeconds = 30;

std::string LocalHostName() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

struct LocalWorker {
  WorkerRecord rec;
  std::unique_ptr<Channel> ch;
  double spawned_at = 0;
  double last_msg = 0;
  bool ready_seen = false;
  ExitKind kill_kind = ExitKind::kNone;  // set when the agent killed it
  std::string kill_desc;
  int64_t assigned_gen = -1;
  double assigned_at = 0;
  int64_t stop_sent_gen = -1;
  int stop_sent_reasons = 0;
  int64_t abort_sent_gen = -1;
  bool exited = false;
};

struct Slot {
  bool gone = false;  // its capacity was reclaimed (preemption)
  std::string worker;
  double respawn_at = 0;
  double backoff = 0;
};

// The job settings an agent needs, from the job's config.
struct JobSettings {
  double heartbeat_timeout = 60;
  double collective_timeout = 60;
  double preemption_notice = 30;
  int64_t threads_per_worker = 0;
};

}  // namespace

class Agent::Impl {
 public:
  Impl(Agent* owner) : a_(owner), store_(*owner->store_), opt_(owner->opt_) {}
  Result<AgentEnd> Run();

 private:
  std::string Describe(const LocalWorker& w) const {
    if (w.rec.generation >= 0 && w.rec.rank >= 0 && w.rec.phase != WorkerPhase::kIdle)
      return fmt::format("worker rank {} (pid {}) on host {}", w.rec.rank, w.rec.pid, opt_.host);
    return fmt::format("worker {} (pid {}) on host {}", w.rec.id, w.rec.pid, opt_.host);
  }
  // threads_per_worker, or this host's cores shared among its slots.
  int WorkerThreads() const {
    const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    return settings_.threads_per_worker > 0 ? static_cast<int>(settings_.threads_per_worker)
                                            : std::max(1, cores / std::max(1, static_cast<int>(slots_.size())));
  }
  int LiveSlots() const {
    int n = 0;
    for (const Slot& s : slots_) n += s.gone ? 0 : 1;
    return n;
  }
  Status Register();
  void KeepAliveIfDue();
  Status PutAgentInfo();
  Status SyncWithStore();
  void StartJob(const JobSpec& spec);
  void EndJob();
  void Spawn(int slot);
  void RespawnDue();
  void PollChannels();
  void Handle(LocalWorker& w, const WorkerMessage& msg);
  void Take(LocalWorker& w, const ProgressMessage& m, double now);
  void Take(LocalWorker& w, const ReadyMessage& m, double now);
  void Take(LocalWorker& w, const StartedMessage& m, double now);
  void Take(LocalWorker& w, const StepMessage& m, double now);
  void Take(LocalWorker& w, const CheckpointMessage& m, double now);
  void Take(LocalWorker& w, const EndedMessage& m, double now);
  void Take(LocalWorker& w, const FatalMessage& m, double now);
  void OnExit(LocalWorker& w, const ProcessExit& e);
  void ReapExits();
  void CheckHealth();
  void ApplyPlan(const Plan& plan);
  void ApplyStop(const GenerationStop& stop);
  void RunCommands();
  void Kill(LocalWorker& w, int sig, ExitKind kind, const std::string& desc);
  void PutReport(bool force);
  void BeginPreemption();
  bool AllExited() const {
    for (const auto& [id, w] : workers_)
      if (!w.exited) return false;
    return true;
  }
  void Urgent() { dirty_ = urgent_ = true; }

  Agent* a_;
  Store& store_;
  AgentOptions opt_;
  LeaseId lease_ = 0;
  Clock::time_point last_keepalive_;
  Clock::time_point last_sync_;
  int64_t seen_revision_ = -1;
  double last_report_ = 0;
  bool dirty_ = true, urgent_ = true;
  std::string job_id_;          // the job whose workers run here ("" none)
  JobSpec spec_;
  JobSettings settings_;
  double peak_flops_ = 0;       // measured SGEMM ceiling of one worker, FLOP/s (0: workers measure)
  bool job_over_ = false;       // the job reached a terminal state
  Plan plan_;
  int64_t applied_gen_ = -1;
  GenerationStop gen_stop_;
  std::vector<Slot> slots_;
  std::map<std::string, LocalWorker> workers_;  // live and recently exited, by id
  int serial_ = 0;
  bool preempting_ = false;
  Clock::time_point preempt_deadline_;
  std::string last_store_error_;
};

// ---------------------------------------------------------------- registration
Status Agent::Impl::PutAgentInfo() {
  AgentInfo info;
  info.id = opt_.id;
  info.host = opt_.host;
  info.address = opt_.address;
  info.slots = preempting_ ? 0 : LiveSlots();
  info.pid = static_cast<int>(::getpid());
  info.started_at = WallSeconds();
  info.preempting = preempting_;
  return store_.Put(keys::Agent(opt_.id), ToJson(info), lease_).status();
}

Status Agent::Impl::Register() {
  ELASTRAIN_ASSIGN_OR_RETURN(lease_, store_.GrantLease(opt_.lease_ttl));
  last_keepalive_ = Clock::now();
  ELASTRAIN_RETURN_IF_ERROR(PutAgentInfo());
  Urgent();
  LOG_INFO("agent {} registered in {} (host {}, {} slots, lease {} ms)", opt_.id, store_.url(), opt_.host,
           LiveSlots(), opt_.lease_ttl.count());
  return Status::OK();
}

void Agent::Impl::KeepAliveIfDue() {
  if (Clock::now() - last_keepalive_ < opt_.lease_ttl / 3) return;
  last_keepalive_ = Clock::now();
  Status st = store_.KeepAlive(lease_);
  if (st.code() == StatusCode::kNotFound) {
    LOG_WARN("agent {}: lease expired (was this process stalled?); registering again; the controller may have "
             "written off the workers of this host",
             opt_.id);
    st = Register();
  }
  if (!st.ok()) LOG_WARN("agent {}: keep-alive failed: {}", opt_.id, st.message());
}

// ---------------------------------------------------------------- workers
void Agent::Impl::Spawn(int slot) {
  LocalWorker w;
  w.rec.id = fmt::format("{}-w{}", opt_.id, serial_++);
  w.rec.slot = slot;
  w.rec.phase = WorkerPhase::kStarting;
  auto pair = MakeChannelPair();
  if (!pair.ok()) {
    LOG_ERROR("agent {}: {}", opt_.id, pair.status().message());
    return;
  }
  auto [mine, theirs] = pair.value();
  const int threads = WorkerThreads();
  SpawnSpec spec;
  spec.args = {"worker", "--channel-fd", "3"};
  spec.env = {{"OMP_NUM_THREADS", std::to_string(threads)}, {"OPENBLAS_NUM_THREADS", std::to_string(threads)}};
  (void)MakeDirs(spec_.run_dir + "/logs");
  spec.log_path = fmt::format("{}/logs/{}.log", spec_.run_dir, w.rec.id);
  spec.channel_fd = theirs;
  auto pid = SpawnSelf(spec);
  ::close(theirs);
  if (!pid.ok()) {
    ::close(mine);
    LOG_ERROR("agent {}: cannot start a worker: {}", opt_.id, pid.status().message());
    slots_[slot].respawn_at = WallSeconds() + 5;
    return;
  }
  w.rec.pid = pid.value();
  w.ch = std::make_unique<Channel>(mine);
  w.spawned_at = w.last_msg = WallSeconds();
  Status st = w.ch->Send(ToJson(AgentMessage(JobMessage{spec_.config_yaml, w.rec.id, opt_.host, threads, peak_flops_})));
  if (!st.ok()) LOG_WARN("agent {}: worker {} did not take its job: {}", opt_.id, w.rec.id, st.message());
  slots_[slot].worker = w.rec.id;
  slots_[slot].respawn_at = 0;
  LOG_INFO("agent {}: started worker {} (pid {}, slot {}, {} threads)", opt_.id, w.rec.id, w.rec.pid, slot, threads);
  workers_[w.rec.id] = std::move(w);
  Urgent();
}

void Agent::Impl::RespawnDue() {
  if (job_id_.empty() || job_over_ || preempting_) return;
  const double now = WallSeconds();
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (s.gone || !s.worker.empty() || s.respawn_at > now) continue;
    Spawn(static_cast<int>(i));
  }
}

void Agent::Impl::Kill(LocalWorker& w, int sig, ExitKind kind, const std::string& desc) {
  if (w.exited) return;
  if (w.kill_kind == ExitKind::kNone) {
    w.kill_kind = kind;
    w.kill_desc = desc;
  }
  ::kill(w.rec.pid, sig);
}

void Agent::Impl::Handle(LocalWorker& w, const WorkerMessage& msg) {
  const double now = WallSeconds();
  w.last_msg = now;
  w.rec.last_progress = now;
  std::visit([&](const auto& m) { Take(w, m, now); }, msg);
}

void Agent::Impl::Take(LocalWorker& w, const ProgressMessage& m, double) {
  if (m.generation == w.rec.generation) w.rec.train_phase = m.phase;
  dirty_ = true;
}
void Agent::Impl::Take(LocalWorker& w, const ReadyMessage& m, double) {
  w.ready_seen = true;
  w.rec.phase = WorkerPhase::kIdle;
  w.rec.state_step = m.state_step;
  slots_[w.rec.slot].backoff = 0;
  Urgent();
}
void Agent::Impl::Take(LocalWorker& w, const StartedMessage& m, double) {
  w.rec.phase = WorkerPhase::kRunning;
  w.rec.generation = m.generation;
  w.rec.rank = m.rank;
  w.rec.train_phase = TrainPhase::kSetup;
  Urgent();
}
void Agent::Impl::Take(LocalWorker& w, const StepMessage& m, double now) {
  if (m.generation != w.rec.generation) return;
  w.rec.step = m.step;
  w.rec.start_step = m.start_step;
  w.rec.last_step_time = m.time > 0 ? m.time : now;
  if (w.rec.first_step_time == 0) {
    w.rec.first_step_time = w.rec.last_step_time;
    w.rec.first_step_start = w.rec.last_step_time - m.step_seconds;
    Urgent();
  }
  dirty_ = true;
}
void Agent::Impl::Take(LocalWorker& w, const CheckpointMessage& m, double) {
  w.rec.checkpoint_step = m.step;
  Urgent();
}
void Agent::Impl::Take(LocalWorker& w, const EndedMessage& m, double) {
  w.rec.state_step = m.state_step;
  Urgent();
  if (m.generation < w.assigned_gen) return;  // it was already handed a newer generation
  // A worker that got a preemption notice reports its generation, then leaves: it is
  // no candidate for the next one.
  w.rec.phase = m.leaving ? WorkerPhase::kLeaving : WorkerPhase::kIdle;
  w.rec.generation = m.generation;
  w.rec.outcome = m.outcome;
  w.rec.stop_reasons = m.stop_reasons;
  w.rec.start_step = m.start_step;
  w.rec.step = m.step;
  w.rec.error = m.error;
  w.rec.train_phase = TrainPhase::kIdle;
}
void Agent::Impl::Take(LocalWorker& w, const FatalMessage& m, double) {
  w.rec.error = m.error;
  Urgent();
}

void Agent::Impl::PollChannels() {
  std::vector<pollfd> fds;
  std::vector<std::string> ids;
  for (auto& [id, w] : workers_) {
    if (w.exited || !w.ch) continue;
    fds.push_back({w.ch->fd(), POLLIN, 0});
    ids.push_back(id);
  }
  if (fds.empty()) {
    std::this_thread::sleep_for(kChannelPoll);
    return;
  }
  if (::poll(fds.data(), fds.size(), static_cast<int>(kChannelPoll.count())) <= 0) return;
  for (size_t i = 0; i < fds.size(); ++i) {
    if (!fds[i].revents) continue;
    LocalWorker& w = workers_[ids[i]];
    std::vector<nlohmann::json> msgs;
    Status st = w.ch->ReadAvailable(&msgs);
    for (const auto& j : msgs) {
      WorkerMessage m;
      Status parsed = FromJson(j, &m);
      if (parsed.ok()) Handle(w, m);
      else LOG_WARN("agent {}: worker {}: {}", opt_.id, w.rec.id, parsed.message());
    }
    if (!st.ok()) {
      // The channel closed: the process is dead or dying. Collect its status now.
      int status = 0;
      pid_t r = ::waitpid(w.rec.pid, &status, 0);
      OnExit(w, r == w.rec.pid ? ProcessExitFromStatus(status) : ProcessExit{true, SIGKILL});
    }
  }
}

void Agent::Impl::ReapExits() {
  for (auto& [id, w] : workers_) {
    if (w.exited) continue;
    int status = 0;
    if (::waitpid(w.rec.pid, &status, WNOHANG) == w.rec.pid) OnExit(w, ProcessExitFromStatus(status));
  }
}

void Agent::Impl::OnExit(LocalWorker& w, const ProcessExit& e) {
  if (w.exited) return;
  w.exited = true;
  w.ch.reset();
  const double now = WallSeconds();
  WorkerRecord& r = w.rec;
  r.exit_time = now;
  r.exit_code = e.signaled ? 0 : e.value;
  r.exit_signal = e.signaled ? e.value : 0;
  const std::string who = Describe(w);
  if (w.kill_kind != ExitKind::kNone) {
    r.exit_kind = w.kill_kind;
    r.exit_desc = w.kill_desc.empty() ? who + " " + e.Describe() : w.kill_desc;
  } else if (!e.signaled && e.value == kExitPreempted) {
    r.exit_kind = ExitKind::kPreempted;
    r.exit_desc = who + " left after a preemption notice";
  } else if (e.ok()) {
    r.exit_kind = ExitKind::kSuccess;
    r.exit_desc = who + " exited";
  } else {
    r.exit_kind = ExitKind::kFailure;
    r.exit_desc = who + " " + e.Describe();
    if (!r.error.empty()) r.exit_desc += ": " + r.error;
  }
  r.phase = WorkerPhase::kExited;
  if (r.exit_kind == ExitKind::kFailure || r.exit_kind == ExitKind::kHung)
    LOG_WARN("agent {}: {} ({})", opt_.id, r.exit_desc, Name(r.exit_kind));
  else LOG_INFO("agent {}: {} ({})", opt_.id, r.exit_desc, Name(r.exit_kind));
  Slot& s = slots_[r.slot];
  if (s.worker == r.id) s.worker.clear();
  if (r.exit_kind == ExitKind::kPreempted) {
    s.gone = true;  // spot capacity reclaimed: this slot does not come back
    (void)PutAgentInfo();
  } else if (!preempting_ && !job_over_) {
    // A worker that never became ready backs off (a bad host or config); one that ran
    // is replaced at once, in the background, while the job recovers without it.
    s.backoff = w.ready_seen ? 0 : std::min(kMaxRespawnBackoffSeconds, std::max(1.0, 2 * s.backoff));
    s.respawn_at = now + s.backoff;
  }
  Urgent();
}

void Agent::Impl::CheckHealth() {
  const double now = WallSeconds();
  for (auto& [id, w] : workers_) {
    if (w.exited || w.kill_kind != ExitKind::kNone) continue;
    if (!w.ready_seen) {
      if (now - w.spawned_at > kStartupTimeoutSeconds)
        Kill(w, SIGKILL, ExitKind::kFailure,
             fmt::format("{} did not become ready within {:.0f}s", Describe(w), kStartupTimeoutSeconds));
      continue;
    }
    const double silent = now - w.last_msg;
    if (silent > settings_.heartbeat_timeout) {
      Kill(w, SIGKILL, ExitKind::kHung,
           fmt::format("{} sent nothing for {:.1f}s (worker_heartbeat_timeout={}s): hung (stopped or frozen), killed",
                       Describe(w), silent, settings_.heartbeat_timeout));
      continue;
    }
    // A worker still in a generation older than the plan's, long after the plan came.
    if (w.rec.phase == WorkerPhase::kRunning && w.rec.generation < applied_gen_ && applied_gen_ >= 0) {
      const double since = now - plan_.created_at;
      if (since > settings_.collective_timeout + kStragglerSlackSeconds) {
        const bool member = w.assigned_gen == applied_gen_;
        Kill(w, SIGKILL, member ? ExitKind::kHung : ExitKind::kEnded,
             fmt::format("{} was still in generation {} {:.1f}s after generation {} was planned; killed", Describe(w),
                         w.rec.generation, since, applied_gen_));
      }
    }
  }
}

// ---------------------------------------------------------------- the job
void Agent::Impl::StartJob(const JobSpec& spec) {
  EndJob();
  auto cfg = LoadConfigText(spec.config_yaml, "job " + spec.job_id + " config");
  if (!cfg.ok()) {
    LOG_ERROR("agent {}: job {} has a config this agent cannot load: {}", opt_.id, spec.job_id, cfg.status().message());
    job_id_ = spec.job_id;
    job_over_ = true;
    return;
  }
  spec_ = spec;
  job_id_ = spec.job_id;
  job_over_ = false;
  settings_.heartbeat_timeout = cfg->worker_heartbeat_timeout;
  settings_.collective_timeout = cfg->collective_timeout;
  settings_.preemption_notice = cfg->preemption_notice_seconds;
  settings_.threads_per_worker = cfg->threads_per_worker;
  applied_gen_ = -1;
  gen_stop_ = GenerationStop();
  for (Slot& s : slots_) s = Slot();
  // The SGEMM ceiling (MFU's denominator) of one worker's threads, measured once here
  // while the host is quiet, rather than by every worker as it starts.
  peak_flops_ = 0;
  if (cfg->hardware_peak_tflops <= 0) {
    SetComputeThreads(WorkerThreads());
    peak_flops_ = MeasureSgemmGflops() * 1e9;
  }
  LOG_INFO("agent {}: job {} (run directory {}): starting {} workers", opt_.id, job_id_, spec_.run_dir, slots_.size());
  for (size_t i = 0; i < slots_.size(); ++i) Spawn(static_cast<int>(i));
}

void Agent::Impl::EndJob() {
  if (workers_.empty()) return;
  for (auto& [id, w] : workers_)
    if (!w.exited && w.ch) (void)w.ch->Send(ToJson(AgentMessage(ExitMessage{})));
  const auto deadline = Clock::now() + milliseconds(static_cast<int64_t>(kShutdownGraceSeconds * 1000));
  while (!AllExited() && Clock::now() < deadline) {
    PollChannels();
    ReapExits();
  }
  for (auto& [id, w] : workers_) Kill(w, SIGKILL, ExitKind::kEnded, "");
  for (auto& [id, w] : workers_) {
    if (w.exited) continue;
    int status = 0;
    ::waitpid(w.rec.pid, &status, 0);
    OnExit(w, ProcessExitFromStatus(status));
  }
  workers_.clear();
  for (Slot& s : slots_) s.worker.clear();
  Urgent();
}

void Agent::Impl::ApplyPlan(const Plan& plan) {
  plan_ = plan;
  applied_gen_ = plan.generation;
  std::vector<AssignPeer> members;
  for (const PlanMember& m : plan.members) members.push_back({m.rank, m.host, m.pid});
  int mine = 0;
  for (const PlanMember& m : plan.members) {
    if (m.agent != opt_.id) continue;
    auto it = workers_.find(m.worker);
    if (it == workers_.end() || it->second.exited) continue;
    LocalWorker& w = it->second;
    Status st = w.ch->Send(ToJson(AgentMessage(AssignMessage{
        plan.generation, m.rank, plan.world, plan.data, plan.fsdp, plan.tensor, plan.restore, plan.rendezvous,
        plan.inject_failure, plan.failures, plan.job_started_at, opt_.address, members})));
    if (!st.ok()) continue;  // its exit is seen in the next poll
    w.assigned_gen = plan.generation;
    w.assigned_at = WallSeconds();
    w.rec.phase = WorkerPhase::kRunning;
    w.rec.generation = plan.generation;
    w.rec.rank = m.rank;
    w.rec.step = -1;
    w.rec.start_step = -1;
    w.rec.first_step_time = 0;
    w.rec.first_step_start = 0;
    w.rec.last_step_time = 0;
    w.rec.outcome = GenerationOutcome::kNone;
    w.rec.error.clear();
    w.rec.train_phase = TrainPhase::kSetup;
    ++mine;
  }
  // Workers still in an older generation that the plan leaves out stop at once.
  for (auto& [id, w] : workers_) {
    if (w.exited || w.assigned_gen == plan.generation || w.rec.phase != WorkerPhase::kRunning) continue;
    if (w.abort_sent_gen >= w.rec.generation) continue;
    (void)w.ch->Send(ToJson(AgentMessage(AbortMessage{w.rec.generation})));
    w.abort_sent_gen = w.rec.generation;
  }
  LOG_INFO("agent {}: generation {} ({} ranks, {} here)", opt_.id, plan.generation, plan.world, mine);
  Urgent();
}

void Agent::Impl::ApplyStop(const GenerationStop& stop) {
  gen_stop_ = stop;
  for (auto& [id, w] : workers_) {
    if (w.exited || w.assigned_gen != stop.generation) continue;
    if (stop.abort && w.abort_sent_gen < stop.generation) {
      (void)w.ch->Send(ToJson(AgentMessage(AbortMessage{stop.generation})));
      w.abort_sent_gen = stop.generation;
    }
    const int fresh = stop.reasons & ~(w.stop_sent_gen == stop.generation ? w.stop_sent_reasons : 0);
    for (int bit : {kStopResize, kStopUser}) {
      if (!(fresh & bit)) continue;
      (void)w.ch->Send(ToJson(AgentMessage(StopMessage{stop.generation, static_cast<StopReason>(bit)})));
    }
    if (w.stop_sent_gen != stop.generation) w.stop_sent_reasons = 0;
    w.stop_sent_gen = stop.generation;
    w.stop_sent_reasons |= stop.reasons;
  }
}

void Agent::Impl::RunCommands() {
  auto cmds = store_.List(keys::CommandPrefix(opt_.id));
  if (!cmds.ok()) return;
  for (const KeyValue& kv : cmds.value()) {
    (void)store_.Delete(kv.key);
    AgentCommand c;
    if (!FromJson(kv.value, &c).ok()) continue;
    LOG_WARN("agent {}: {} {}", opt_.id, Name(c.action), c.worker);
    if (c.action == CommandAction::kHost) {
      // The whole host goes: its workers die with it (PR_SET_PDEATHSIG), the lease expires.
      ::raise(SIGKILL);
    }
    auto it = workers_.find(c.worker);
    if (it == workers_.end() || it->second.exited) continue;
    LocalWorker& w = it->second;
    if (c.action == CommandAction::kHang) ::kill(w.rec.pid, SIGSTOP);
    else if (c.action == CommandAction::kKill) ::kill(w.rec.pid, SIGKILL);
    else if (c.action == CommandAction::kTerminate)
      Kill(w, SIGKILL, ExitKind::kEnded, Describe(w) + " was killed by the controller (straggler)");
    else if (c.action == CommandAction::kHung)
      Kill(w, SIGKILL, ExitKind::kHung, Describe(w) + " made no step progress; killed by the controller");
  }
}

Status Agent::Impl::SyncWithStore() {
  ELASTRAIN_ASSIGN_OR_RETURN(int64_t rev, store_.Revision());
  if (rev == seen_revision_) return Status::OK();
  seen_revision_ = rev;
  ELASTRAIN_ASSIGN_OR_RETURN(std::vector<KeyValue> job, store_.List(keys::kRoot + "job/"));
  std::optional<JobSpec> spec;
  std::optional<JobRecord> record;
  std::optional<Plan> plan;
  std::optional<GenerationStop> stop;
  for (const KeyValue& kv : job) {
    Status st;
    if (kv.key == keys::JobSpec()) st = FromJson(kv.value, &spec.emplace());
    else if (kv.key == keys::JobRecord()) st = FromJson(kv.value, &record.emplace());
    else if (kv.key == keys::JobPlan()) st = FromJson(kv.value, &plan.emplace());
    else if (kv.key == keys::GenerationStop()) st = FromJson(kv.value, &stop.emplace());
    if (!st.ok()) return Status::Corruption(kv.key + ": " + st.message());
  }
  const bool terminal = record && record->job_id == (spec ? spec->job_id : "") &&
                        ParseJobState(record->state).ok() && IsTerminal(ParseJobState(record->state).value());
  if (spec && spec->job_id != job_id_ && !terminal && !preempting_) StartJob(*spec);
  if (!job_id_.empty() && (!spec || spec->job_id != job_id_ || terminal) && !job_over_) {
    LOG_INFO("agent {}: job {} is over; stopping its workers", opt_.id, job_id_);
    job_over_ = true;
    EndJob();
  }
  if (job_over_ || job_id_.empty()) return Status::OK();
  if (plan && plan->job_id == job_id_ && plan->generation > applied_gen_) ApplyPlan(*plan);
  if (stop && (stop->generation != gen_stop_.generation || stop->reasons != gen_stop_.reasons ||
               stop->abort != gen_stop_.abort))
    ApplyStop(*stop);
  RunCommands();
  return Status::OK();
}

void Agent::Impl::PutReport(bool force) {
  const double now = WallSeconds();
  if (!force && !urgent_ && (!dirty_ || now - last_report_ < kProgressReportSeconds)) return;
  AgentReport rep;
  rep.agent = opt_.id;
  rep.time = now;
  // Forget exit records the controller has had ample time to read.
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->second.exited && now - it->second.rec.exit_time > kExitRecordSeconds) it = workers_.erase(it);
    else ++it;
  }
  std::vector<const LocalWorker*> exited;
  for (const auto& [id, w] : workers_) (w.exited ? exited.push_back(&w) : rep.workers.push_back(w.rec));
  std::sort(exited.begin(), exited.end(),
            [](const LocalWorker* a, const LocalWorker* b) { return a->rec.exit_time > b->rec.exit_time; });
  for (size_t i = 0; i < exited.size() && i < kMaxExitRecords; ++i) rep.workers.push_back(exited[i]->rec);
  Status st = store_.Put(keys::Report(opt_.id), ToJson(rep), lease_).status();
  if (!st.ok()) {
    LOG_WARN("agent {}: cannot write its report: {}", opt_.id, st.message());
    return;
  }
  last_report_ = now;
  dirty_ = urgent_ = false;
}

void Agent::Impl::BeginPreemption() {
  preempting_ = true;
  preempt_deadline_ = Clock::now() + milliseconds(static_cast<int64_t>(settings_.preemption_notice * 1000));
  LOG_WARN("agent {}: preemption notice; workers save and leave within {}s", opt_.id, settings_.preemption_notice);
  for (auto& [id, w] : workers_)
    if (!w.exited) ::kill(w.rec.pid, SIGTERM);
  for (Slot& s : slots_) s.gone = true;
  (void)PutAgentInfo();
  Urgent();
}

Result<AgentEnd> Agent::Impl::Run() {
  if (opt_.host.empty()) opt_.host = LocalHostName();
  if (opt_.id.empty()) opt_.id = fmt::format("{}-{}", opt_.host, ::getpid());
  if (opt_.slots < 1) return Status::InvalidArgument(fmt::format("--slots {}: expected at least 1", opt_.slots));
  slots_.assign(opt_.slots, Slot());
  ELASTRAIN_RETURN_IF_ERROR(Register());
  AgentEnd end = AgentEnd::kStopped;
  for (;;) {
    if (a_->stop_) break;
    if (a_->preempt_ && !preempting_) BeginPreemption();
    PollChannels();
    ReapExits();
    CheckHealth();
    if (Clock::now() - last_sync_ >= std::chrono::duration<double>(kStoreSyncSeconds)) {
      last_sync_ = Clock::now();
      Status st = SyncWithStore();
      if (!st.ok() && st.message() != last_store_error_) LOG_WARN("agent {}: {}", opt_.id, st.message());
      last_store_error_ = st.ok() ? "" : st.message();
    }
    RespawnDue();
    KeepAliveIfDue();
    PutReport(false);
    if (preempting_ && (AllExited() || Clock::now() > preempt_deadline_)) {
      end = AgentEnd::kPreempted;
      break;
    }
    if (opt_.exit_when_job_ends && job_over_ && AllExited()) {
      end = AgentEnd::kJobEnded;
      break;
    }
  }
  if (preempting_) {
    for (auto& [id, w] : workers_) {
      Kill(w, SIGKILL, ExitKind::kPreempted, Describe(w) + " did not leave within preemption_notice_seconds; killed");
      if (w.exited) continue;
      int status = 0;
      ::waitpid(w.rec.pid, &status, 0);
      OnExit(w, ProcessExitFromStatus(status));
    }
    // A departing agent leaves its last report where no lease removes it: the controller
    // reads from it that the workers were preempted, not lost.
    AgentReport rep;
    rep.agent = opt_.id;
    rep.time = WallSeconds();
    for (const auto& [id, w] : workers_) rep.workers.push_back(w.rec);
    (void)store_.Put(keys::Departed(opt_.id), ToJson(rep));
  }
  EndJob();
  (void)store_.RevokeLease(lease_);
  LOG_INFO("agent {}: stopped", opt_.id);
  return end;
}

Agent::Agent(std::shared_ptr<Store> store, AgentOptions opt) : store_(std::move(store)), opt_(std::move(opt)) {
  impl_ = std::make_unique<Impl>(this);
}
Agent::~Agent() = default;

Result<AgentEnd> Agent::Run() { return impl_->Run(); }

}  // namespace elastrain
