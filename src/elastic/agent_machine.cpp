#include "elastic/agent_machine.h"

#include <signal.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "common/collective_kind.h"
#include "common/log.h"
#include "elastic/fencing.h"
#include "wire/exit_codes.h"

namespace elastrain {

Status CheckStepAnatomy(const StepMessage& m) {
  const std::pair<const char*, double> fields[] = {
      {"step_seconds", m.step_seconds}, {"compute_seconds", m.compute_seconds}, {"wait_seconds", m.wait_seconds}};
  for (const auto& [field, v] : fields)
    if (!std::isfinite(v) || v < 0 || v > kMaxTimedStepSeconds)
      return Status::InvalidArgument(
          fmt::format("step {}: {}={}: expected a finite number in [0, {}]", m.step, field, v, kMaxTimedStepSeconds));
  if (m.compute_seconds + m.wait_seconds > m.step_seconds * (1 + kAnatomyRounding) + 1e-9)
    return Status::InvalidArgument(fmt::format("step {}: compute_seconds={} + wait_seconds={} exceed step_seconds={}",
                                               m.step, m.compute_seconds, m.wait_seconds, m.step_seconds));
  return Status::OK();
}

Status CheckCollectiveMark(const ProgressMessage& m) {
  if (m.collective_seq < -1)
    return Status::InvalidArgument(fmt::format("collective_seq={}: expected >= -1", m.collective_seq));
  const std::optional<CollectiveKind> kind = ParseChoice(kCollectiveKindChoices, m.collective_kind);
  if (!kind)
    return Status::InvalidArgument(fmt::format("collective_kind='{}': expected one of {}",
                                               m.collective_kind.substr(0, 32), ChoiceList(kCollectiveKindChoices)));
  if ((m.collective_seq == -1) != (*kind == CollectiveKind::kNone))
    return Status::InvalidArgument(fmt::format("collective_seq={} with collective_kind='{}': expected a kind exactly "
                                               "when a collective was entered (seq >= 0)",
                                               m.collective_seq, m.collective_kind));
  if (m.in_collective && m.collective_seq < 0)
    return Status::InvalidArgument("in_collective=true with collective_seq=-1: inside no collective entered");
  return Status::OK();
}

AgentMachine::AgentMachine(AgentMachineOptions opt) : opt_(std::move(opt)) {
  slots_.assign(std::max(1, opt_.slots), Slot());
}

std::vector<AgentAction> AgentMachine::Step(const AgentInput& in, double now) {
  Actions out;
  if (finished_) return out;
  std::visit([&](const auto& v) { On(v, now, &out); }, in);
  Settle(now, &out);
  return out;
}

int AgentMachine::LiveSlots() const {
  int n = 0;
  for (const Slot& s : slots_) n += s.gone ? 0 : 1;
  return n;
}

const WorkerRecord* AgentMachine::Worker(const std::string& id) const {
  auto it = workers_.find(id);
  return it == workers_.end() ? nullptr : &it->second.rec;
}

std::vector<std::string> AgentMachine::WorkerIds() const {
  std::vector<std::string> ids;
  for (const auto& [id, w] : workers_) ids.push_back(id);
  return ids;
}

std::string AgentMachine::Describe(const LocalWorker& w) const {
  if (w.rec.generation >= 0 && w.rec.rank >= 0 && w.rec.phase != WorkerPhase::kIdle)
    return fmt::format("worker rank {} (pid {}) on host {}", w.rec.rank, w.rec.pid, opt_.host);
  return fmt::format("worker {} (pid {}) on host {}", w.rec.id, w.rec.pid, opt_.host);
}

// threads_per_worker, or this host's cores shared among its slots.
JobMessage AgentMachine::JobMessageFor(const std::string& worker_id) const {
  JobMessage m;
  m.config_yaml = spec_.config_yaml;
  m.worker_id = worker_id;
  m.host = opt_.host;
  m.threads = WorkerThreads();
  m.peak_flops = host_peak_flops_;
  m.head_public_key = opt_.head_public_key;
  if (opt_.admission) {
    m.confined = true;
    m.allowed_programs = opt_.admission->programs;
    m.allowed_paths = opt_.admission->paths;
    m.agent = opt_.id;
  }
  return m;
}

int AgentMachine::WorkerThreads() const {
  const int slots = std::max(1, static_cast<int>(slots_.size()));
  return settings_.threads_per_worker > 0 ? static_cast<int>(settings_.threads_per_worker)
                                          : std::max(1, std::max(1, opt_.cores) / slots);
}

bool AgentMachine::AllExited() const {
  for (const auto& [id, w] : workers_)
    if (!w.exited) return false;
  return true;
}

void AgentMachine::Registration(Actions* out) const {
  out->push_back(UpdateRegistration{preempting_ ? 0 : LiveSlots(), preempting_});
}

// ---------------------------------------------------------------- the job
void AgentMachine::On(const JobObserved& in, double now, Actions* out) {
  const std::optional<JobSpec>& spec = in.spec;
  const bool other_job = spec && spec->job_id != job_id_;
  const bool already_next = next_job_ && spec && next_job_->first.job_id == spec->job_id;
  if (other_job && !in.terminal && !preempting_ && !stopping_ && !already_next) {
    if (!in.settings) {
      LOG_ERROR("agent {}: job {} has a config this agent cannot load: {}", opt_.id, spec->job_id, in.error);
      EndJob(now, out);
      job_id_ = spec->job_id;
      job_over_ = true;
      return;
    }
    if (!workers_.empty()) {  // the old job's workers leave first
      job_over_ = true;
      next_job_.emplace(*spec, *in.settings);
      EndJob(now, out);
      return;
    }
    StartJob(*spec, *in.settings, now, out);
    return;
  }
  // An embedded agent's one job can end before the agent first sees it (its controller
  // refused the run directory): there is nothing to run, and the agent is done.
  if (opt_.exit_when_job_ends && job_id_.empty() && spec && in.terminal) {
    job_id_ = spec->job_id;
    job_over_ = true;
    return;
  }
  if (!job_id_.empty() && (!spec || spec->job_id != job_id_ || in.terminal) && !job_over_) {
    LOG_INFO("agent {}: job {} is over; stopping its workers", opt_.id, job_id_);
    job_over_ = true;
    EndJob(now, out);
  }
}

void AgentMachine::StartJob(const JobSpec& spec, const AgentJobSettings& settings, double now, Actions* out) {
  spec_ = spec;
  job_id_ = spec.job_id;
  job_over_ = false;
  settings_ = settings;
  applied_gen_ = -1;
  gen_stop_ = GenerationStop();
  for (Slot& s : slots_) s = Slot();
  LOG_INFO("agent {}: job {} (run directory {}): starting {} workers", opt_.id, job_id_, spec_.run_dir, slots_.size());
  for (size_t i = 0; i < slots_.size(); ++i) Spawn(static_cast<int>(i), now, out);
}

// Tells every live worker to exit; Settle forgets them once they are gone, and
// CheckDeadlines kills those left after kShutdownGraceSeconds.
void AgentMachine::EndJob(double now, Actions* out) {
  if (workers_.empty()) return;
  for (auto& [id, w] : workers_)
    if (!w.exited) out->push_back(SendToWorker{id, ExitMessage{}});
  if (drain_deadline_ == 0) drain_deadline_ = now + kShutdownGraceSeconds;
}

void AgentMachine::Spawn(int slot, double now, Actions* out) {
  LocalWorker w;
  w.rec.id = fmt::format("{}-w{}", opt_.id, serial_++);
  w.rec.slot = slot;
  w.rec.phase = WorkerPhase::kStarting;
  w.spawned_at = w.last_msg = now;
  WorkerLaunch launch;
  launch.kind = WorkerKind::kElastrainWorker;
  launch.threads = WorkerThreads();
  launch.args = {"worker", "--channel-fd", "3"};
  launch.env = {{"OMP_NUM_THREADS", std::to_string(launch.threads)},
                {"OPENBLAS_NUM_THREADS", std::to_string(launch.threads)}};
  launch.log_path = fmt::format("{}/logs/{}.log", spec_.run_dir, w.rec.id);
  slots_[slot].worker = w.rec.id;
  slots_[slot].respawn_at = 0;
  out->push_back(SpawnWorker{slot, w.rec.id, std::move(launch)});
  workers_[w.rec.id] = std::move(w);
  Urgent();
}

void AgentMachine::On(const WorkerSpawned& in, double now, Actions* out) {
  auto it = workers_.find(in.worker);
  if (it == workers_.end()) return;
  LocalWorker& w = it->second;
  w.rec.pid = in.pid;
  LOG_INFO("agent {}: started worker {} (pid {}, slot {}, {} threads)", opt_.id, w.rec.id, w.rec.pid, w.rec.slot,
           WorkerThreads());
  // The MFU peak is the worker's to decide (train/mfu_peak.h); the agent only hands on
  // what the first worker of this host measured, so that a replacement does not measure
  // again (0.3 s of both cores) while a recovery waits for it.
  out->push_back(
      SendToWorker{w.rec.id, JobMessageFor(w.rec.id)});
}

void AgentMachine::On(const SpawnFailed& in, double now, Actions* out) {
  auto it = workers_.find(in.worker);
  if (it == workers_.end()) return;
  LOG_ERROR("agent {}: cannot start a worker: {}", opt_.id, in.error);
  Slot& s = slots_[it->second.rec.slot];
  if (s.worker == in.worker) s.worker.clear();
  s.respawn_at = now + kSpawnRetrySeconds;
  workers_.erase(it);
  Urgent();
}

void AgentMachine::RespawnDue(double now, Actions* out) {
  if (job_id_.empty() || job_over_ || preempting_ || stopping_) return;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (s.gone || !s.worker.empty() || s.respawn_at > now) continue;
    Spawn(static_cast<int>(i), now, out);
  }
}

// ---------------------------------------------------------------- generations
void AgentMachine::On(const PlanSeen& in, double now, Actions* out) {
  if (job_over_ || job_id_.empty() || stopping_) return;
  if (in.plan.job_id != job_id_ || in.plan.generation <= applied_gen_) return;
  const Status fenced = CheckPlan(in.plan, spec_, opt_.store_url, opt_.id, WorkerIds());
  if (!fenced.ok()) {
    if (refused_gen_ != in.plan.generation) LOG_ERROR("agent {}: {}", opt_.id, fenced.message());
    refused_gen_ = in.plan.generation;
    return;
  }
  ApplyPlan(in.plan, now, out);
}

void AgentMachine::ApplyPlan(const Plan& plan, double now, Actions* out) {
  plan_ = plan;
  applied_gen_ = plan.generation;
  std::vector<AssignPeer> peers;
  for (const PlanMember& m : plan.members) peers.push_back({m.rank, m.host, m.pid});
  int mine = 0;
  for (const PlanMember& m : plan.members) {
    if (m.agent != opt_.id) continue;
    auto it = workers_.find(m.worker);
    if (it == workers_.end() || it->second.exited) continue;
    LocalWorker& w = it->second;
    out->push_back(SendToWorker{w.rec.id, AssignMessage{plan.generation, m.rank, plan.world, plan.data, plan.fsdp,
                                                         plan.tensor, plan.restore, plan.rendezvous,
                                                         plan.inject_failure, plan.failures, plan.job_started_at,
                                                         opt_.address, peers, plan.covered_failures}});
    w.assigned_gen = plan.generation;
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
    ResetAnatomy(w);
    ++mine;
  }
  AbortOlderGenerations(plan, out);
  LOG_INFO("agent {}: generation {} ({} ranks, {} here)", opt_.id, plan.generation, plan.world, mine);
  Urgent();
}

// Workers still in an older generation that the plan leaves out stop at once.
void AgentMachine::AbortOlderGenerations(const Plan& plan, Actions* out) {
  for (auto& [id, w] : workers_) {
    if (w.exited || w.assigned_gen == plan.generation || w.rec.phase != WorkerPhase::kRunning) continue;
    if (w.abort_sent_gen >= w.rec.generation) continue;
    out->push_back(SendToWorker{id, AbortMessage{w.rec.generation}});
    w.abort_sent_gen = w.rec.generation;
  }
}

void AgentMachine::On(const StopSeen& in, double now, Actions* out) {
  if (job_over_ || job_id_.empty()) return;
  const GenerationStop& s = in.stop;
  if (Status fenced = CheckStop(s, job_id_); !fenced.ok()) {
    LOG_DEBUG("agent {}: {}", opt_.id, fenced.message());  // a leftover of another job
    return;
  }
  if (s.generation != gen_stop_.generation || s.reasons != gen_stop_.reasons || s.abort != gen_stop_.abort)
    ApplyStop(s, out);
}

void AgentMachine::ApplyStop(const GenerationStop& stop, Actions* out) {
  gen_stop_ = stop;
  for (auto& [id, w] : workers_) {
    if (w.exited || w.assigned_gen != stop.generation) continue;
    if (stop.abort && w.abort_sent_gen < stop.generation) {
      out->push_back(SendToWorker{id, AbortMessage{stop.generation}});
      w.abort_sent_gen = stop.generation;
    }
    const int fresh = stop.reasons & ~(w.stop_sent_gen == stop.generation ? w.stop_sent_reasons : 0);
    for (StopReason bit : {kStopResize, kStopUser})
      if (fresh & bit) out->push_back(SendToWorker{id, StopMessage{stop.generation, bit}});
    if (w.stop_sent_gen != stop.generation) w.stop_sent_reasons = 0;
    w.stop_sent_gen = stop.generation;
    w.stop_sent_reasons |= stop.reasons;
  }
}

// ---------------------------------------------------------------- commands, notices
void AgentMachine::On(const CommandSeen& in, double now, Actions* out) {
  if (job_over_ || job_id_.empty()) return;
  const AgentCommand& c = in.command;
  if (Status fenced = CheckCommand(c, job_id_); !fenced.ok()) {
    LOG_WARN("agent {}: {}", opt_.id, fenced.message());
    return;
  }
  LOG_WARN("agent {}: {} {}", opt_.id, Name(c.action), c.worker);
  if (c.action == CommandAction::kHost) {
    out->push_back(KillHost{});  // its workers die with it (PR_SET_PDEATHSIG), the lease expires
    return;
  }
  if (c.action == CommandAction::kCheckHealth) {  // the host's, not a worker's
    out->push_back(CheckHostHealth{});
    return;
  }
  auto it = workers_.find(c.worker);
  if (it == workers_.end() || it->second.exited) return;
  LocalWorker& w = it->second;
  switch (c.action) {
    case CommandAction::kHang:  // chaos: it stops; the heartbeat check finds it hung
      out->push_back(SignalWorker{w.rec.id, w.rec.pid, SIGSTOP, "chaos: hang"});
      break;
    case CommandAction::kKill:  // chaos: a crash, reported as the process's own failure
      out->push_back(SignalWorker{w.rec.id, w.rec.pid, SIGKILL, "chaos: kill"});
      break;
    case CommandAction::kTerminate:
      Kill(w, SIGKILL, ExitKind::kEnded, Describe(w) + " was killed by the controller (straggler)", out);
      break;
    case CommandAction::kHung:
      Kill(w, SIGKILL, ExitKind::kHung, Describe(w) + " made no step progress; killed by the controller", out);
      break;
    case CommandAction::kHost: break;
    case CommandAction::kSlow:  // chaos: a gray failure, the worker at 1/factor of its CPU
      if (!(c.factor > 1 && c.factor <= kMaxSlowFactor) || !(c.seconds >= 0 && c.seconds <= kMaxSlowSeconds)) {
        LOG_WARN("agent {}: refused slow of {}: factor {} (expected (1, {}]), seconds {} (expected 0 to {})",
                 opt_.id, Describe(w), c.factor, kMaxSlowFactor, c.seconds, kMaxSlowSeconds);
        break;
      }
      out->push_back(SlowWorker{w.rec.id, w.rec.pid, c.factor, c.seconds, WorkerThreads()});
      break;
    case CommandAction::kUnslow:
      out->push_back(UnslowWorker{w.rec.id});
      break;
    case CommandAction::kPreempt:  // chaos: one worker's spot capacity reclaimed, with notice
      if (!(c.seconds >= 0 && c.seconds <= kMaxSlowSeconds)) {
        LOG_WARN("agent {}: refused preempt of {}: seconds {} (expected 0 to {})", opt_.id, Describe(w), c.seconds,
                 kMaxSlowSeconds);
        break;
      }
      if (w.leave_by > 0) break;  // already leaving
      w.leave_by = now + settings_.preemption_notice;
      w.slot_returns_after = c.seconds;
      out->push_back(SignalWorker{w.rec.id, w.rec.pid, SIGTERM, "chaos: preemption notice"});
      break;
    case CommandAction::kCheckHealth: break;  // above
  }
}

void AgentMachine::On(const PreemptionNotice&, double now, Actions* out) {
  if (preempting_) return;
  preempting_ = true;
  preempt_deadline_ = now + settings_.preemption_notice;
  LOG_WARN("agent {}: preemption notice; workers save and leave within {}s", opt_.id, settings_.preemption_notice);
  for (auto& [id, w] : workers_)
    if (!w.exited) out->push_back(SignalWorker{id, w.rec.pid, SIGTERM, "preemption notice"});
  for (Slot& s : slots_) s.gone = true;
  Registration(out);
  Urgent();
}

void AgentMachine::On(const UserStop&, double now, Actions* out) {
  if (stopping_) return;
  stopping_ = true;
  if (preempting_) {
    preempt_deadline_ = now;  // leave now: what has not left yet is killed
    return;
  }
  EndJob(now, out);
}

void AgentMachine::Kill(LocalWorker& w, int sig, ExitKind kind, const std::string& desc, Actions* out) {
  if (w.exited) return;
  if (w.kill_kind == ExitKind::kNone) {
    w.kill_kind = kind;
    w.kill_desc = desc;
  }
  out->push_back(SignalWorker{w.rec.id, w.rec.pid, sig, desc.empty() ? std::string(Name(kind)) : desc});
}

// ---------------------------------------------------------------- worker messages
void AgentMachine::On(const WorkerSaid& in, double now, Actions* out) {
  auto it = workers_.find(in.worker);
  if (it == workers_.end() || it->second.exited) return;
  LocalWorker& w = it->second;
  w.last_msg = now;
  w.rec.last_progress = now;
  std::visit([&](const auto& m) { Take(w, m, now); }, in.message);
}

void AgentMachine::Take(LocalWorker& w, const ProgressMessage& m, double) {
  dirty_ = true;
  if (m.generation != w.rec.generation) return;
  w.rec.train_phase = m.phase;
  if (Status st = CheckCollectiveMark(m); !st.ok()) return Refuse(w, "collective mark", st);
  w.rec.collective_seq = m.collective_seq;
  w.rec.collective_kind = m.collective_kind;
  w.rec.in_collective = m.in_collective;
}

void AgentMachine::Take(LocalWorker& w, const ReadyMessage& m, double) {
  w.ready_seen = true;
  w.rec.phase = WorkerPhase::kIdle;
  w.rec.state_step = m.state_step;
  if (m.peak_flops > 0 && host_peak_flops_ <= 0) host_peak_flops_ = m.peak_flops;
  slots_[w.rec.slot].backoff = 0;
  Urgent();
}

void AgentMachine::Take(LocalWorker& w, const StartedMessage& m, double) {
  if (m.generation != w.rec.generation) ResetAnatomy(w);
  w.rec.phase = WorkerPhase::kRunning;
  w.rec.generation = m.generation;
  w.rec.rank = m.rank;
  w.rec.train_phase = TrainPhase::kSetup;
  Urgent();
}

void AgentMachine::Take(LocalWorker& w, const StepMessage& m, double now) {
  if (m.generation != w.rec.generation) return;
  w.rec.step = m.step;
  w.rec.start_step = m.start_step;
  w.rec.last_step_time = m.time > 0 ? m.time : now;
  if (w.rec.first_step_time == 0) {
    w.rec.first_step_time = w.rec.last_step_time;
    w.rec.first_step_start = w.rec.last_step_time - m.step_seconds;
    Urgent();
  }
  TimeStep(w, m);
  dirty_ = true;
}

void AgentMachine::TimeStep(LocalWorker& w, const StepMessage& m) {
  if (m.compute_seconds == 0 && m.wait_seconds == 0) return;  // not timed (a worker that does not measure)
  Status st = CheckStepAnatomy(m);
  if (st.ok() && m.step <= w.rec.timed_until_step)
    st = Status::InvalidArgument(fmt::format("step={}: expected a step after the last timed one, {}", m.step,
                                             w.rec.timed_until_step));
  if (!st.ok()) return Refuse(w, "step anatomy", st);
  if (w.timed.size() >= static_cast<size_t>(kAnatomyWindow)) w.timed.pop_front();
  w.timed.emplace_back(m.compute_seconds, m.wait_seconds);
  // Medians, not means: one step that saved a checkpoint or ran an eval (the chief's
  // extra work, every checkpoint_period) is not a slow rank; a slow rank is slow in most.
  std::vector<double> compute, wait;
  for (const auto& [c, x] : w.timed) {
    compute.push_back(c);
    wait.push_back(x);
  }
  auto median = [](std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  };
  w.rec.compute_seconds = median(compute);
  w.rec.wait_seconds = median(wait);
  w.rec.timed_steps = static_cast<int64_t>(w.timed.size());
  w.rec.timed_until_step = m.step;
}

void AgentMachine::ResetAnatomy(LocalWorker& w) {
  w.timed.clear();
  w.rec.compute_seconds = w.rec.wait_seconds = 0;
  w.rec.timed_steps = 0;
  w.rec.timed_until_step = -1;
  w.rec.collective_seq = -1;
  w.rec.collective_kind.clear();
  w.rec.in_collective = false;
  w.refused = 0;
}

void AgentMachine::Refuse(LocalWorker& w, const char* what, const Status& why) {
  ++w.refused;
  if (w.refused > 3 && w.refused % 100 != 0) return;  // a worker that keeps sending them fills no log
  LOG_WARN("agent {}: worker {} ({}): refused its {} in generation {} (refusal {}): {}", opt_.id, w.rec.id,
           Describe(w), what, w.rec.generation, w.refused, why.message());
}

void AgentMachine::Take(LocalWorker& w, const CheckpointMessage& m, double) {
  w.rec.checkpoint_step = m.step;
  Urgent();
}

void AgentMachine::Take(LocalWorker& w, const EndedMessage& m, double) {
  w.rec.state_step = m.state_step;
  w.rec.copies_generation = m.copies_generation;
  w.rec.copies = m.copies;
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
  w.rec.timed_out = m.timed_out;
  w.rec.train_phase = TrainPhase::kIdle;
}

void AgentMachine::Take(LocalWorker& w, const FatalMessage& m, double) {
  w.rec.error = m.error;
  Urgent();
}

// ---------------------------------------------------------------- exits
void AgentMachine::On(const WorkerExited& in, double now, Actions* out) {
  auto it = workers_.find(in.worker);
  if (it == workers_.end() || it->second.exited) return;
  LocalWorker& w = it->second;
  const ProcessExit& e = in.exit;
  w.exited = true;
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
    s.gone = true;  // spot capacity reclaimed: this slot does not come back, but after a chaos preempt's seconds
    s.returns_at = w.slot_returns_after > 0 && !preempting_ ? now + w.slot_returns_after : 0;
    Registration(out);
  } else if (!preempting_ && !job_over_ && !stopping_) {
    // A worker that never became ready backs off (a bad host or config); one that ran
    // is replaced at once, in the background, while the job recovers without it.
    s.backoff = w.ready_seen ? 0 : std::min(kMaxRespawnBackoffSeconds, std::max(1.0, 2 * s.backoff));
    s.respawn_at = now + s.backoff;
  }
  Urgent();
}

// ---------------------------------------------------------------- time
void AgentMachine::On(const Tick&, double now, Actions* out) {
  CheckHealth(now, out);
  CheckDeadlines(now, out);
  ReturnSlots(now, out);
  RespawnDue(now, out);
  ReportIfDue(now, out);
}

void AgentMachine::CheckHealth(double now, Actions* out) {
  for (auto& [id, w] : workers_) {
    if (w.exited || w.kill_kind != ExitKind::kNone) continue;
    if (!w.ready_seen) {
      if (now - w.spawned_at > kStartupTimeoutSeconds)
        Kill(w, SIGKILL, ExitKind::kFailure,
             fmt::format("{} did not become ready within {:.0f}s", Describe(w), kStartupTimeoutSeconds), out);
      continue;
    }
    const double silent = now - w.last_msg;
    if (silent > settings_.heartbeat_timeout) {
      Kill(w, SIGKILL, ExitKind::kHung,
           fmt::format("{} sent nothing for {:.1f}s (worker_heartbeat_timeout={}s): hung (stopped or frozen), killed",
                       Describe(w), silent, settings_.heartbeat_timeout),
           out);
      continue;
    }
    // A worker still in a generation older than the plan's, long after the plan came.
    if (w.rec.phase == WorkerPhase::kRunning && w.rec.generation < applied_gen_ && applied_gen_ >= 0) {
      const double since = now - plan_.created_at;
      if (since > settings_.collective_timeout + kStragglerSlackSeconds) {
        const bool member = w.assigned_gen == applied_gen_;
        Kill(w, SIGKILL, member ? ExitKind::kHung : ExitKind::kEnded,
             fmt::format("{} was still in generation {} {:.1f}s after generation {} was planned; killed", Describe(w),
                         w.rec.generation, since, applied_gen_),
             out);
      }
    }
  }
}

// Slots a chaos preempt took come back when their time is up (the capacity returned):
// registered again, and filled by RespawnDue.
void AgentMachine::ReturnSlots(double now, Actions* out) {
  if (preempting_ || stopping_ || job_over_) return;
  bool returned = false;
  for (Slot& s : slots_) {
    if (!s.gone || s.returns_at <= 0 || now < s.returns_at) continue;
    s.gone = false;
    s.returns_at = 0;
    s.respawn_at = now;
    s.backoff = 0;
    returned = true;
  }
  if (!returned) return;
  LOG_INFO("agent {}: preempted capacity returned: {} slots", opt_.id, LiveSlots());
  Registration(out);
  Urgent();
}

void AgentMachine::CheckDeadlines(double now, Actions* out) {
  for (auto& [id, w] : workers_)
    if (w.leave_by > 0 && now >= w.leave_by && !w.exited && w.kill_kind == ExitKind::kNone)
      Kill(w, SIGKILL, ExitKind::kPreempted,
           Describe(w) + " did not leave within preemption_notice_seconds of its notice; killed", out);
  if (drain_deadline_ > 0 && now >= drain_deadline_ && !drain_killed_) {
    drain_killed_ = true;
    for (auto& [id, w] : workers_) Kill(w, SIGKILL, ExitKind::kEnded, "", out);
  }
  if (preempting_ && !leave_killed_ && (AllExited() || now >= preempt_deadline_)) {
    leave_killed_ = true;
    for (auto& [id, w] : workers_)
      Kill(w, SIGKILL, ExitKind::kPreempted, Describe(w) + " did not leave within preemption_notice_seconds; killed",
           out);
  }
}

void AgentMachine::Settle(double now, Actions* out) {
  if (!AllExited()) return;
  if (preempting_) {
    if (!leave_killed_) return;  // the notice period runs (Tick ends it)
    // A departing agent leaves its last report where no lease removes it: the
    // controller reads from it that the workers were preempted, not lost.
    AgentReport rep;
    rep.agent = opt_.id;
    rep.time = now;
    for (const auto& [id, w] : workers_) rep.workers.push_back(w.rec);
    out->push_back(PutDeparture{std::move(rep)});
    out->push_back(Finish{AgentEnd::kPreempted});
    finished_ = true;
    return;
  }
  if (drain_deadline_ > 0 || (stopping_ && !workers_.empty())) {  // a drain is over: forget its workers
    drain_deadline_ = 0;
    drain_killed_ = false;
    workers_.clear();
    for (Slot& s : slots_) s.worker.clear();
    Urgent();
  }
  if (stopping_) {
    out->push_back(Finish{AgentEnd::kStopped});
    finished_ = true;
    return;
  }
  if (next_job_) {
    auto next = std::move(*next_job_);
    next_job_.reset();
    StartJob(next.first, next.second, now, out);
    return;
  }
  if (opt_.exit_when_job_ends && job_over_) {
    out->push_back(Finish{AgentEnd::kJobEnded});
    finished_ = true;
  }
}

// ---------------------------------------------------------------- reports
void AgentMachine::On(const ReportWritten&, double now, Actions*) {
  last_report_ = now;
  dirty_ = urgent_ = false;
}

void AgentMachine::ReportIfDue(double now, Actions* out) {
  if (!urgent_ && (!dirty_ || now - last_report_ < kProgressReportSeconds)) return;
  out->push_back(PutReport{Report(now)});
}

AgentReport AgentMachine::Report(double now) {
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
  return rep;
}

}  // namespace elastrain
