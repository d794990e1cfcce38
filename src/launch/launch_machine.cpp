#include "launch/launch_machine.h"

#include <signal.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "common/log.h"
#include "launch/rank_env.h"
#include "wire/exit_codes.h"

namespace elastrain::launch {

const char* Name(LaunchState s) {
  switch (s) {
    case LaunchState::kIdle: return "idle";
    case LaunchState::kAwaitingMaster: return "awaiting_master";
    case LaunchState::kStarting: return "starting";
    case LaunchState::kRunning: return "running";
    case LaunchState::kStopping: return "stopping";
    case LaunchState::kReplacing: return "replacing";
    case LaunchState::kExited: return "exited";
  }
  return "?";
}

bool SupersedesGeneration(const AgentMessage& m, int64_t generation) {
  if (std::holds_alternative<ExitMessage>(m)) return true;
  if (const auto* a = std::get_if<AbortMessage>(&m); a && a->generation >= generation) return true;
  if (const auto* a = std::get_if<AssignMessage>(&m); a && a->generation > generation) return true;
  return false;
}

LaunchMachine::LaunchMachine(LaunchMachineOptions opt)
    : opt_(std::move(opt)),
      tuner_(opt_.checkpoint_mtti_prior_seconds, opt_.checkpoint_period_min, opt_.checkpoint_period_max) {}

std::vector<LaunchAction> LaunchMachine::Step(const LaunchInput& in, double now) {
  Actions out;
  if (exited_) return out;
  std::visit([&](const auto& v) { On(v, now, &out); }, in);
  Settle(&out);
  return out;
}

LaunchState LaunchMachine::state() const {
  if (exited_) return LaunchState::kExited;
  if (replace_) return LaunchState::kReplacing;
  if (!gen_) return LaunchState::kIdle;
  if (gen_->phase == Phase::kAwaitingMaster) return LaunchState::kAwaitingMaster;
  if (gen_->phase == Phase::kStarting) return LaunchState::kStarting;
  return gen_->stop_reasons != 0 ? LaunchState::kStopping : LaunchState::kRunning;
}

bool LaunchMachine::KeepAwaitingMaster(const std::deque<AgentMessage>& queued) const {
  if (preempted_ || exit_ || !gen_) return false;
  for (const AgentMessage& m : queued)
    if (SupersedesGeneration(m, gen_->a.generation)) return false;
  return true;
}

double LaunchMachine::NextDeadline(double now) const {
  // A program that talks and went silent holds the ticks back: the next is due when it
  // speaks again, which wakes the executor anyway.
  const bool ticks_held = gen_ && gen_->prog && gen_->prog->connected && now - gen_->prog->last_msg > kProgramSilenceSeconds;
  double next = ticks_held ? now + kTickSeconds : last_tick_ + kTickSeconds;
  auto earliest = [&](double t) {
    if (t > 0) next = std::min(next, t);
  };
  if (gen_) {
    if (!gen_->term_sent) earliest(gen_->term_at);
    if (!gen_->kill_sent) earliest(gen_->kill_at);
    if (gen_->listen_until > 0) earliest(now + kListenProbeSeconds);
  }
  if (replace_) earliest(replace_->until);
  earliest(spare_due_);
  if (sweep_due_ > 0) earliest(last_sweep_ + kOrphanSweepSeconds);
  return std::max(next, now);
}

LaunchMachine::Program* LaunchMachine::Find(int id) {
  if (gen_ && gen_->prog && gen_->prog->id == id) return &*gen_->prog;
  if (spare_ && spare_->id == id) return &*spare_;
  return nullptr;
}

LaunchMachine::Program LaunchMachine::NewProgram(int pid, double now) {
  Program p;
  p.pid = pid;
  p.started = p.last_msg = now;
  return p;
}

// What completes once the inputs are taken: a preempted worker leaves once no generation
// runs; one told to exit (or whose agent is gone) leaves at once.
void LaunchMachine::Settle(Actions* out) {
  if (exited_) return;
  if (preempted_ && !gen_ && !replace_) {
    exited_ = true;
    out->push_back(Exit{kExitPreempted});
  } else if (exit_) {
    exited_ = true;
    out->push_back(Exit{kExitSuccess});
  }
}

// ---------------------------------------------------------------- the agent
void LaunchMachine::On(const Begin& in, double now, Actions* out) {
  out->push_back(SendToAgent{ReadyMessage{in.pid, -1, 0}});
  StartSpare(out);
}

void LaunchMachine::On(const AgentSaid& in, double now, Actions* out) {
  std::visit([&](const auto& v) { Take(v, now, out); }, in.message);
}

void LaunchMachine::On(const AgentGone&, double, Actions*) { exit_ = true; }

void LaunchMachine::Take(const AssignMessage& m, double now, Actions* out) {
  if (gen_ && gen_->prog && !gen_->prog->exited) {  // a newer generation ends whatever older one still runs
    gen_->aborted = true;
    Signal(*gen_->prog, SIGKILL, "a newer generation was planned", out);
    replace_ = Replace{m, now + kReplaceWaitSeconds};
    return;
  }
  gen_.reset();
  StartGeneration(m, now, out);
}

void LaunchMachine::Take(const StopMessage& m, double now, Actions* out) {
  if (gen_ && gen_->a.generation == m.generation) RequestStop(m.reason == kStopUser ? kStopUser : kStopResize, now, out);
}

void LaunchMachine::Take(const AbortMessage& m, double now, Actions* out) {
  if (!gen_ || gen_->a.generation > m.generation) return;
  gen_->aborted = true;
  if (gen_->prog) Signal(*gen_->prog, SIGKILL, "the generation was aborted", out);
}

void LaunchMachine::On(const PreemptionNotice&, double now, Actions* out) {
  if (preempted_) return;
  preempted_ = true;
  LOG_WARN("worker {}: preemption notice: the program has {}s to save and exit", opt_.worker_id,
           opt_.preemption_notice_seconds);
  if (spare_) Signal(*spare_, SIGKILL, "preemption", out);
  RequestStop(kStopPreemption, now, out);
}

// ---------------------------------------------------------------- a generation starts
void LaunchMachine::StartGeneration(const AssignMessage& a, double now, Actions* out) {
  last_generation_ = a.generation;
  gen_.emplace();
  gen_->a = a;
  gen_->started = now;
  out->push_back(SendToAgent{StartedMessage{a.generation, a.rank, a.world}});
  if (preempted_) return Failed(Status::Cancelled("a preempted worker takes no new rank"), out);
  // MASTER_ADDR:MASTER_PORT: rank 0 picks it (and publishes it later), the others wait.
  out->push_back(ResolveMaster{a.generation, a.rank, a.address.empty() ? "127.0.0.1" : a.address, a.rendezvous,
                               opt_.collective_timeout});
}

// The generation ends before its program ran. A wait given up (Cancelled) is no fault:
// the generation was aborted, or this worker leaves (a preemption).
void LaunchMachine::Failed(const Status& st, Actions* out) {
  EndedMessage e;
  e.generation = gen_->a.generation;
  e.outcome = GenerationOutcome::kFailed;
  if (st.cancelled()) e.outcome = preempted_ ? GenerationOutcome::kStopped : GenerationOutcome::kAborted;
  if (preempted_) {
    e.stop_reasons = kStopPreemption;
    e.leaving = true;
  }
  e.error = e.outcome == GenerationOutcome::kFailed ? st.message() : "";
  out->push_back(SendToAgent{e});
  gen_.reset();
}

void LaunchMachine::On(const MasterResolved& in, double now, Actions* out) {
  if (!gen_ || gen_->a.generation != in.generation || gen_->phase != Phase::kAwaitingMaster) return;
  if (!in.status.ok()) return Failed(in.status, out);
  Generation& g = *gen_;
  const AssignMessage& a = g.a;
  RankAssignment ra;
  ra.generation = a.generation;
  ra.rank = a.rank;
  ra.world = a.world;
  for (const AssignPeer& p : a.members) ra.members.push_back({p.rank, p.host});
  ra.master_addr = in.address;
  ra.master_port = in.port;
  ra.max_failures = opt_.max_failures;
  ra.min_workers = opt_.min_workers;
  ra.max_workers = opt_.max_workers;
  ra.run_id = opt_.run_id;
  ra.run_dir = opt_.run_dir;
  ra.worker_id = opt_.worker_id;
  ra.threads = opt_.threads;
  g.env = RankEnvironment(ra);
  g.master_port = in.port;
  g.phase = Phase::kStarting;
  if (spare_ && !spare_->exited) return out->push_back(AssignSpare{spare_->id, g.env});
  StartCold(now, out);
}

// A cold rank 0 publishes its address before its program starts: the others start
// theirs meanwhile, and every import runs at once.
void LaunchMachine::StartCold(double now, Actions* out) {
  if (gen_->a.rank == 0) return out->push_back(PublishMaster{gen_->a.generation});
  const int id = next_id_++;
  gen_->restarting = id;
  out->push_back(StartProgram{id, /*spare=*/false, gen_->env});
}

void LaunchMachine::On(const MasterPublished& in, double now, Actions* out) {
  if (!gen_ || gen_->a.generation != in.generation) return;
  if (!in.status.ok()) {
    if (gen_->prog) Signal(*gen_->prog, SIGKILL, "its address could not be published", out);
    return Failed(in.status, out);
  }
  if (gen_->phase == Phase::kStarting && !gen_->prog) {  // cold: now the program
    const int id = next_id_++;
    gen_->restarting = id;
    out->push_back(StartProgram{id, /*spare=*/false, gen_->env});
  }
}

void LaunchMachine::On(const SpareAssigned& in, double now, Actions* out) {
  if (!gen_ || gen_->phase != Phase::kStarting || !spare_ || spare_->id != in.program) return;
  if (!in.status.ok()) return StartCold(now, out);  // the spare keeps waiting, unused
  Generation& g = *gen_;
  g.prog = std::move(*spare_);
  spare_.reset();
  g.prog->from_spare = true;
  g.prog->started = now;
  LOG_INFO("worker {}: generation {}: rank {} of {} to the warm spare (pid {})", opt_.worker_id, g.a.generation,
           g.a.rank, g.a.world, g.prog->pid);
  // A warm rank 0 listens within a fraction of a second: the others are told the address
  // once it does (up to kListenWaitSeconds), so that their first connection finds the
  // store (torch 1.13 retries a refused one only after a whole second).
  if (g.a.rank == 0) {
    g.listen_until = now + kListenWaitSeconds;
    out->push_back(ProbeListening{g.a.generation, g.master_port, g.prog->pid});
  }
  Trains(now, out);
}

void LaunchMachine::On(const ListenProbed& in, double now, Actions* out) {
  if (!gen_ || gen_->a.generation != in.generation || gen_->listen_until <= 0) return;
  if (in.listening || !in.runs || now >= gen_->listen_until) Publish(out);
}

void LaunchMachine::Publish(Actions* out) {
  gen_->listen_until = 0;
  out->push_back(PublishMaster{gen_->a.generation});
}

void LaunchMachine::On(const ProgramStarted& in, double now, Actions* out) {
  if (in.program == pending_spare_) {
    pending_spare_ = 0;
    spare_ = NewProgram(in.pid, now);
    spare_->id = in.program;
    if (preempted_ || exit_) Signal(*spare_, SIGKILL, "the worker leaves", out);
    return;
  }
  if (!gen_ || gen_->restarting != in.program) return;
  Generation& g = *gen_;
  const bool first = !g.prog;
  g.restarting = 0;
  g.prog = NewProgram(in.pid, now);
  g.prog->id = in.program;
  if (!first) {  // a cold restart of a spare that never waited
    g.started = now;
    return;
  }
  LOG_INFO("worker {}: generation {}: rank {} of {} (pid {})", opt_.worker_id, g.a.generation, g.a.rank, g.a.world,
           in.pid);
  Trains(now, out);
}

void LaunchMachine::On(const ProgramStartFailed& in, double now, Actions* out) {
  if (in.program == pending_spare_) {
    pending_spare_ = 0;
    LOG_WARN("worker {}: no warm spare: {}", opt_.worker_id, in.status.message());
    warm_failed_ = true;
    return;
  }
  if (!gen_ || gen_->restarting != in.program) return;
  gen_->restarting = 0;
  if (gen_->prog) return EndGeneration(now, out);  // the cold restart failed: the spare's exit ends it
  Failed(in.status, out);
}

// The generation's program runs (cold, or a spare handed the rank).
void LaunchMachine::Trains(double now, Actions* out) {
  Generation& g = *gen_;
  g.phase = Phase::kRunning;
  if (g.a.rank == 0 && !logs_open_) {
    logs_open_ = true;
    out->push_back(OpenRunLogs{});
  }
  if (opt_.checkpoint_period_auto)
    NotePeriodChange(tuner_.OnGenerationStart(g.a.failures, now - g.a.job_started_at), out);
  SendControl(out);
  // The next spare starts once this generation trains (its first step report), or
  // kSpareDelaySeconds from now, or when the generation ends: its imports must not
  // compete with the recovery it is meant to speed up.
  spare_due_ = now + kSpareDelaySeconds;
}

// The variables a spare can have before it knows its rank.
void LaunchMachine::StartSpare(Actions* out) {
  if (!opt_.warm_spares || warm_failed_ || spare_ || pending_spare_ || exit_ || preempted_) return;
  pending_spare_ = next_id_++;
  out->push_back(StartProgram{pending_spare_,
                              /*spare=*/true,
                              {{"OMP_NUM_THREADS", std::to_string(opt_.threads)},
                               {"ELASTRAIN_RUN_DIR", opt_.run_dir},
                               {"ELASTRAIN_WORKER_ID", opt_.worker_id}}});
}

// ---------------------------------------------------------------- the program
// checkpoint_period=auto moved the period: rank 0 records it (the caller tells the
// program). True when it moved.
bool LaunchMachine::NotePeriodChange(const std::optional<CheckpointPeriodChange>& change, Actions* out) {
  if (!change || !gen_) return false;
  if (gen_->a.rank == 0)
    out->push_back(EmitEvent{CheckpointPeriodChangedEvent{
        .from = change->from, .to = change->to, .failures = change->failures,
        .covered_failures = change->covered_failures, .mtti_seconds = change->mtti_seconds,
        .stall_seconds = change->stall_seconds, .step_seconds = change->step_seconds, .reason = change->reason,
        .generation = gen_->a.generation}});
  return true;
}

void LaunchMachine::SendControl(Actions* out) {
  if (!gen_ || !gen_->prog) return;
  const int r = gen_->stop_reasons;
  ProgramControl c;
  c.stop = r != 0;
  c.reason = r & kStopPreemption ? "preemption" : r & kStopUser ? "user" : c.stop ? "resize" : "";
  c.deadline = gen_->stop_deadline;
  c.checkpoint_period = opt_.checkpoint_period_auto ? tuner_.period() : opt_.checkpoint_period;
  out->push_back(TellProgram{gen_->prog->id, c});
}

void LaunchMachine::Signal(Program& p, int sig, const std::string& why, Actions* out) {
  if (p.exited || p.pid <= 0) return;
  if (sig == SIGKILL) p.killed = true;
  out->push_back(SignalProgram{p.id, p.pid, sig, why});
}

// A stop for a resize, the user or a preemption. A preemption notice is forwarded at
// once (SIGTERM to the group), with SIGKILL at the notice's end. Otherwise a program
// that talks is told (a control message) and must be done by the deadline: SIGTERM
// then, SIGKILL kKillGraceSeconds later. One that does not talk gets SIGTERM as torchrun
// would send it, once it is kHelloGraceSeconds old (a program importing
// elastrain_worker says hello well before that), and has the notice's length to exit.
void LaunchMachine::RequestStop(int reason, double now, Actions* out) {
  if (!gen_ || !gen_->prog || (gen_->stop_reasons & reason)) return;
  Generation& g = *gen_;
  if (g.stop_reasons == 0) g.stop_deadline = now + opt_.preemption_notice_seconds;
  g.stop_reasons |= reason;
  SendControl(out);
  if (reason & kStopPreemption) {
    g.term_at = now;
    g.kill_at = std::min(g.stop_deadline, now + opt_.preemption_notice_seconds);
  } else if (!g.term_sent) {
    g.term_at = g.prog->connected ? g.stop_deadline : std::max(now, g.prog->started + kHelloGraceSeconds);
  }
  CheckDeadlines(now, out);
}

void LaunchMachine::On(const ProgramSaid& in, double now, Actions* out) {
  Program* p = Find(in.program);
  if (!p) return;
  p->last_msg = now;
  OnProgramMessage(*p, in.message, now, out);
}

void LaunchMachine::On(const ProgramChannelClosed& in, double, Actions*) {
  // Its liveness is the process's again (a closed channel is not a hang).
  if (Program* p = Find(in.program)) {
    p->ch_open = false;
    p->connected = false;
  }
}

void LaunchMachine::OnProgramMessage(Program& p, const ProgramMessage& m, double now, Actions* out) {
  if (std::holds_alternative<ProgramHello>(m)) p.connected = p.ch_open;
  if (std::holds_alternative<ProgramWaiting>(m)) p.waited = true;
  const bool running = gen_ && gen_->prog && &*gen_->prog == &p;
  if (!running) return;  // a spare's heartbeats and waiting only refresh last_msg
  if (const auto* s = std::get_if<ProgramStep>(&m)) OnStep(*s, now, out);
  if (const auto* c = std::get_if<ProgramCheckpoint>(&m)) OnCheckpoint(*c, now, out);
  if (const auto* c = std::get_if<ProgramCollective>(&m)) {
    gen_->collective_seq = c->seq;
    gen_->collective_kind = c->kind;
    gen_->in_collective = c->inside;
  }
}

void LaunchMachine::OnStep(const ProgramStep& s, double now, Actions* out) {
  Generation& g = *gen_;
  double secs = s.step_seconds;
  if (secs <= 0) {
    const double since = g.last_step_time > 0 ? now - g.last_step_time : now - g.started;
    const int64_t n = g.last_step >= 0 && s.step > g.last_step ? s.step - g.last_step : 1;
    secs = since / static_cast<double>(n);
  }
  if (g.first_step < 0) {
    g.first_step = s.step;
    if (spare_due_ > 0) spare_due_ = now;
  }
  // The step's anatomy: the program's compute_seconds, else all of it is compute. A
  // program's first step timed by this worker (no step_seconds) spans its start-up, not a
  // step: it is sent untimed (0 and 0).
  const bool measured = secs > 0 && (s.step_seconds > 0 || g.last_step >= 0);
  const double compute = !measured ? 0 : std::clamp(s.compute_seconds.value_or(secs), 0.0, secs);
  const double wait = measured ? secs - compute : 0;
  g.last_step = s.step;
  g.last_step_time = now;
  out->push_back(SendToAgent{StepMessage{g.a.generation, s.step, g.StartStep(), std::isnan(s.loss) ? 0.0 : s.loss,
                                         secs, now, compute, wait}});
  if (g.a.rank != 0 || (s.step % std::max<int64_t>(opt_.log_period, 1) != 0 && s.step != g.first_step)) return;
  nlohmann::json r = {{"step", s.step}, {"step_time", secs}, {"generation", g.a.generation},
                      {"world_size", g.a.world}, {"time", now}};
  if (!std::isnan(s.loss)) r["loss"] = s.loss;
  if (s.tokens > 0 && secs > 0) r["tokens_per_sec"] = static_cast<double>(s.tokens) / secs;
  for (const auto& [k, v] : s.metrics)
    if (!r.contains(k)) r[k] = v;
  out->push_back(WriteMetrics{std::move(r)});
}

void LaunchMachine::OnCheckpoint(const ProgramCheckpoint& c, double now, Actions* out) {
  Generation& g = *gen_;
  out->push_back(SendToAgent{CheckpointMessage{c.step, now}});
  if (g.a.rank == 0) {
    CheckpointSavedEvent saved;  // the program's word: its step and how long it took
    saved.step = c.step;
    saved.generation = g.a.generation;
    saved.write_seconds = saved.stall_seconds = c.seconds;
    out->push_back(EmitEvent{saved});
  }
  if (!opt_.checkpoint_period_auto || c.seconds <= 0) return;
  const double mean = g.last_step > g.first_step && g.first_step >= 0
                          ? (g.last_step_time - g.started) / static_cast<double>(g.last_step - g.first_step + 1)
                          : 0;
  if (NotePeriodChange(tuner_.OnSaveMeasured(c.seconds, mean, now - g.a.job_started_at), out)) SendControl(out);
}

// ---------------------------------------------------------------- exits
void LaunchMachine::On(const ProcessReaped& in, double now, Actions* out) {
  sweep_due_ = now;  // whatever it left behind
  if (gen_ && gen_->prog && gen_->prog->pid == in.pid && !gen_->prog->exited) {
    gen_->prog->exited = true;
    gen_->prog->exit = in.exit;
    gen_->prog->stderr_tail = in.stderr_tail;
    if (replace_) {
      EndGeneration(now, out);
      const AssignMessage next = replace_->next;
      replace_.reset();
      return StartGeneration(next, now, out);
    }
    if (!RestartCold(out)) EndGeneration(now, out);
  } else if (spare_ && spare_->pid == in.pid && (spare_->killed || preempted_ || exit_)) {
    spare_.reset();  // this worker ended it
  } else if (spare_ && spare_->pid == in.pid) {
    LOG_WARN("worker {}: the warm spare (pid {}) {} before it was given a rank; later generations start cold "
             "(does the program call wait_for_assignment()?){}",
             opt_.worker_id, in.pid, in.exit.Describe(),
             in.stderr_tail.empty() ? "" : fmt::format(" [its stderr ended: {}]", in.stderr_tail));
    spare_.reset();
    warm_failed_ = true;
  }
}

// A spare that was handed a rank and died without ever waiting for it does not call
// wait_for_assignment(): warm starts are off for this worker, and the rank starts cold
// (once) instead of failing the generation. True when it did.
bool LaunchMachine::RestartCold(Actions* out) {
  Generation& g = *gen_;
  if (!g.prog->from_spare || g.prog->waited || g.aborted || g.stop_reasons != 0 || preempted_) return false;
  LOG_WARN("worker {}: the warm spare (pid {}) {} without waiting for its rank; later generations start cold (does "
           "the program call wait_for_assignment() after its imports?)",
           opt_.worker_id, g.prog->pid, g.prog->exit.Describe());
  warm_failed_ = true;
  if (spare_) Signal(*spare_, SIGKILL, "warm starts are off", out);
  g.restarting = next_id_++;
  out->push_back(StartProgram{g.restarting, /*spare=*/false, g.env});
  return true;
}

// The running program exited: report how the generation ended on this rank.
void LaunchMachine::EndGeneration(double now, Actions* out) {
  Generation& g = *gen_;
  const ProcessExit e = g.prog->exit;
  EndedMessage ended;
  ended.generation = g.a.generation;
  ended.stop_reasons = g.stop_reasons;
  ended.start_step = g.StartStep();
  ended.step = g.last_step;
  ended.leaving = preempted_;
  const std::string what = fmt::format("program {} (pid {}) {}", opt_.program, g.prog->pid, e.Describe());
  if (g.aborted) {
    ended.outcome = GenerationOutcome::kAborted;
  } else if (g.stop_reasons != 0) {
    ended.outcome = GenerationOutcome::kStopped;
  } else if (e.ok()) {
    ended.outcome = GenerationOutcome::kCompleted;
  } else {
    ended.outcome = GenerationOutcome::kFailed;
    // Its last words on stderr name the cause (a traceback's last line) where its exit
    // code does not; the whole of them is in this worker's log (logs/<worker>.log).
    ended.error = what;
    if (!g.prog->stderr_tail.empty()) ended.error += fmt::format(" [its stderr ended: {}]", g.prog->stderr_tail);
  }
  LOG_INFO("worker {}: generation {}: {} ({})", opt_.worker_id, g.a.generation,
           ended.error.empty() ? what : ended.error, Name(ended.outcome));
  out->push_back(SendToAgent{ended});
  gen_.reset();
  if (spare_due_ > 0) spare_due_ = now;
  sweep_due_ = now;  // anything of its group still running (its own children) is an orphan
}

// ---------------------------------------------------------------- time
void LaunchMachine::On(const Tick&, double now, Actions* out) {
  if (gen_ && gen_->phase == Phase::kAwaitingMaster) return TickIfDue(now, out);  // only ticks while waiting
  if (replace_ && now >= replace_->until) {
    // The old program did not go within the wait: it is swept as an orphan once it does.
    LOG_WARN("worker {}: program pid {} of generation {} still runs {}s after SIGKILL; starting generation {}",
             opt_.worker_id, gen_ ? gen_->prog->pid : -1, gen_ ? gen_->a.generation : -1, kReplaceWaitSeconds,
             replace_->next.generation);
    const AssignMessage next = replace_->next;
    replace_.reset();
    gen_.reset();
    StartGeneration(next, now, out);
  }
  CheckDeadlines(now, out);
  if (gen_ && gen_->listen_until > 0 && gen_->prog)
    out->push_back(ProbeListening{gen_->a.generation, gen_->master_port, gen_->prog->pid});
  if (sweep_due_ > 0 && now - last_sweep_ >= kOrphanSweepSeconds) {
    last_sweep_ = now;
    sweep_due_ = 0;
    SweepOrphans sweep;
    if (gen_ && gen_->prog && !gen_->prog->exited) sweep.keep.push_back(gen_->prog->pid);
    if (spare_) sweep.keep.push_back(spare_->pid);
    out->push_back(std::move(sweep));
  }
  if (spare_due_ > 0 && now >= spare_due_) {
    spare_due_ = 0;
    StartSpare(out);
  }
  TickIfDue(now, out);
}

void LaunchMachine::CheckDeadlines(double now, Actions* out) {
  if (!gen_ || !gen_->prog) return;
  Generation& g = *gen_;
  if (!g.term_sent && g.term_at > 0 && now >= g.term_at) {
    // A program that said hello in the meantime is told and keeps its deadline.
    const bool preempting = (g.stop_reasons & kStopPreemption) != 0;
    if (!preempting && g.prog->connected && now < g.stop_deadline) {
      g.term_at = g.stop_deadline;
    } else {
      g.term_sent = true;
      // On a preemption the program's children too (this worker's own handler only notes
      // it again); only when this worker leads its group, as every agent-started one does.
      if (preempting && opt_.leads_process_group) out->push_back(SignalGroup{SIGTERM, "preemption notice"});
      else Signal(*g.prog, SIGTERM, preempting ? "preemption notice" : "stop", out);
      if (g.kill_at == 0)
        g.kill_at = g.prog->connected ? now + kKillGraceSeconds : std::max(g.stop_deadline, now + kKillGraceSeconds);
    }
  }
  if (g.term_sent && !g.kill_sent && g.kill_at > 0 && now >= g.kill_at) {
    Signal(*g.prog, SIGKILL, "it did not exit within the grace", out);
    g.kill_sent = true;
  }
}

void LaunchMachine::TickIfDue(double now, Actions* out) {
  if (now - last_tick_ < kTickSeconds) return;
  // A program that talks vouches for itself: a stopped or frozen one stops the ticks,
  // and the agent kills this worker as hung after worker_heartbeat_timeout.
  const Program* p = gen_ && gen_->prog ? &*gen_->prog : nullptr;
  if (p && p->connected && now - p->last_msg > kProgramSilenceSeconds) return;
  last_tick_ = now;
  ProgressMessage m;
  m.generation = gen_ ? gen_->a.generation : last_generation_;
  m.step = gen_ ? gen_->last_step : -1;
  m.phase = !gen_ ? TrainPhase::kIdle : gen_->last_step >= 0 ? TrainPhase::kTrain : TrainPhase::kSetup;
  m.time = now;
  if (gen_) {
    m.collective_seq = gen_->collective_seq;
    m.collective_kind = gen_->collective_kind;
    m.in_collective = gen_->in_collective;
  }
  out->push_back(SendToAgent{m});
}

}  // namespace elastrain::launch
