#include "launch/launched_worker.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <cmath>
#include <memory>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "common/clock.h"
#include "common/events.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/process.h"
#include "common/signals.h"
#include "common/wakeup.h"
#include "wire/program_messages.h"
#include "launch/master_address.h"
#include "launch/rank_env.h"
#include "store/store.h"
#include "cost/checkpoint_period.h"
#include "wire/exit_codes.h"
#include "wire/protocol.h"

namespace elastrain {

namespace {

constexpr double kTickSeconds = 0.25;         // liveness ticks to the agent, as elastrain workers send
constexpr double kProgramSilenceSeconds = 3;  // a program that talks: no tick once it is this silent
constexpr double kKillGraceSeconds = 5;       // after the SIGTERM of a stop's deadline, before SIGKILL
constexpr double kHelloGraceSeconds = 2;      // a program that has not said hello by this age does not talk
constexpr double kSpareDelaySeconds = 10;     // longest wait before the next spare starts (see StartGeneration)
constexpr double kListenWaitSeconds = 3;      // how long a warm rank 0 gets to listen before its address is published
constexpr double kOrphanSweepSeconds = 1;
constexpr std::chrono::milliseconds kPollSlice{50};
constexpr const char* kLeftWhileWaiting = "left while waiting for rank 0's address";

std::atomic<bool> g_preempted{false};

class LaunchedWorker {
 public:
  LaunchedWorker(Channel* agent, const JobMessage& job, const TrainConfig& cfg, std::vector<std::string> program)
      : agent_(agent), job_(job), cfg_(cfg), program_(std::move(program)),
        tuner_(cfg.checkpoint_mtti_prior_seconds, cfg.checkpoint_period_min, cfg.checkpoint_period_max) {
    run_dir_ = cfg.base_output_directory + "/" + cfg.run_name;
    threads_ = job.threads > 0 ? job.threads : 1;
  }
  int Run();

 private:
  struct Program {
    pid_t pid = -1;
    std::unique_ptr<Channel> ch;
    double started = 0;       // wall seconds (for a spare: when it got its rank)
    bool connected = false;   // said hello
    bool ch_open = true;      // its channel is read (false after end of file or an oversized line)
    bool from_spare = false;  // a spare that was handed a rank
    bool waited = false;      // it said "waiting": it calls wait_for_assignment()
    bool killed = false;      // this worker sent it SIGKILL
    double last_msg = 0;
    bool exited = false;
    ProcessExit exit;
  };
  struct Generation {
    AssignMessage a;
    std::map<std::string, std::string> env;  // the rank's environment (a cold restart needs it again)
    std::unique_ptr<Program> prog;
    int64_t first_step = -1, last_step = -1;
    double last_step_time = 0, started = 0;
    int stop_reasons = 0;     // kStop* bits asked for
    double stop_deadline = 0; // > 0: the stop must be done by then (the program is told)
    double term_at = 0;       // > 0: SIGTERM then (unless sent)
    double kill_at = 0;       // > 0: SIGKILL then (unless sent)
    bool term_sent = false, kill_sent = false;
    bool aborted = false;
    // The step it began from: the one before its first reported step (-1: none reported).
    int64_t StartStep() const { return first_step >= 0 ? std::max<int64_t>(first_step - 1, 0) : -1; }
  };

  void Send(const WorkerMessage& m) { (void)agent_->Send(ToJson(m)); }
  bool ReadAgent();  // queues what the agent sent in inbox_; false: the agent is gone
  void Dispatch();   // acts on inbox_
  bool Superseded(int64_t generation) const;  // inbox_ holds an abort, a newer plan or an exit
  void Take(const AssignMessage& m);
  void Take(const StopMessage& m);
  void Take(const AbortMessage& m);
  void Take(const ExitMessage&) { exit_ = true; }
  void Take(const JobMessage&) {}

  Result<std::unique_ptr<Program>> Start(bool spare, const std::map<std::string, std::string>& env);
  void StartSpare();
  void StartGeneration(const AssignMessage& a);
  void RequestStop(int reason);
  void Signal(Program& p, int sig, const char* why);
  void ReadProgram(Program& p);
  void OnProgramMessage(Program& p, const ProgramMessage& m);
  void Reap();
  void EndGeneration();
  bool RestartCold();
  void CheckDeadlines(double now);
  void TickIfDue(double now);
  void SweepOrphans();
  void SendControl();
  bool NotePeriodChange(const std::optional<CheckpointPeriodChange>& change);
  void KillAll();

  Channel* agent_;
  JobMessage job_;
  TrainConfig cfg_;
  std::vector<std::string> program_;
  std::string run_dir_;
  int threads_ = 1;
  std::unique_ptr<Program> spare_;
  std::optional<Generation> gen_;
  std::deque<AgentMessage> inbox_;
  int64_t last_generation_ = -1;  // the newest generation this worker took part in
  bool warm_failed_ = false;   // a spare died before taking a rank: later generations start cold
  bool exit_ = false, agent_gone_ = false, preempt_seen_ = false;
  double last_tick_ = 0, last_sweep_ = 0, sweep_due_ = 0;
  double spare_due_ = 0;  // > 0: start the next spare then
  Wakeup wake_;
  CheckpointPeriodTuner tuner_;
  MetricsWriter metrics_;
  EventLog events_;
  bool logs_open_ = false;
};

Result<std::unique_ptr<LaunchedWorker::Program>> LaunchedWorker::Start(bool spare,
                                                                      const std::map<std::string, std::string>& env) {
  ELASTRAIN_ASSIGN_OR_RETURN(auto pair, MakeChannelPair());
  auto [mine, theirs] = pair;
  SpawnSpec spec;
  spec.program = program_[0];
  spec.args.assign(program_.begin() + 1, program_.end());
  spec.env = env;
  spec.env.insert_or_assign("ELASTRAIN_CHANNEL_FD", std::string("3"));
  spec.env.insert_or_assign("ELASTRAIN_WARM", std::string(spare ? "1" : "0"));
  spec.env_drop_prefixes = SecretEnvironmentPrefixes();
  spec.channel_fd = theirs;
  spec.own_process_group = false;  // the worker's group: one kill(-pgid) ends the whole tree
  auto pid = SpawnProcess(spec);
  ::close(theirs);
  if (!pid.ok()) {
    ::close(mine);
    return pid.status();
  }
  auto p = std::make_unique<Program>();
  p->pid = pid.value();
  p->ch = std::make_unique<Channel>(mine);
  p->last_msg = p->started = WallSeconds();
  LOG_INFO("worker {}: started {} {} (pid {})", job_.worker_id, spare ? "spare" : "program", program_[0], p->pid);
  return p;
}

// The variables a spare can have before it knows its rank.
void LaunchedWorker::StartSpare() {
  if (!cfg_.warm_spares || warm_failed_ || spare_ || exit_ || g_preempted) return;
  std::map<std::string, std::string> env = {{"OMP_NUM_THREADS", std::to_string(threads_)},
                                            {"ELASTRAIN_RUN_DIR", run_dir_},
                                            {"ELASTRAIN_WORKER_ID", job_.worker_id}};
  auto p = Start(/*spare=*/true, env);
  if (!p.ok()) {
    LOG_WARN("worker {}: no warm spare: {}", job_.worker_id, p.status().message());
    warm_failed_ = true;
    return;
  }
  spare_ = std::move(p.value());
}

void LaunchedWorker::StartGeneration(const AssignMessage& a) {
  Generation g;
  g.a = a;
  g.started = WallSeconds();
  auto failed = [&](const Status& st) {
    EndedMessage e;
    e.generation = a.generation;
    e.outcome = GenerationOutcome::kFailed;
    if (st.message() == kLeftWhileWaiting) e.outcome = g_preempted ? GenerationOutcome::kStopped : GenerationOutcome::kAborted;
    if (g_preempted) {
      e.stop_reasons = kStopPreemption;
      e.leaving = true;
    }
    e.error = e.outcome == GenerationOutcome::kFailed ? st.message() : "";
    Send(e);
  };
  last_generation_ = a.generation;
  Send(StartedMessage{a.generation, a.rank, a.world});
  // MASTER_ADDR:MASTER_PORT: rank 0 picks it (and publishes it below), the others wait.
  auto rdzv = MasterAddress::Open(a.rendezvous, a.generation);
  if (!rdzv.ok()) return failed(rdzv.status());
  auto master = a.rank == 0 ? rdzv->Pick(a.address.empty() ? "127.0.0.1" : a.address)
                            : rdzv->Await(cfg_.collective_timeout, [&] {
                                TickIfDue(WallSeconds());
                                return ReadAgent() && !Superseded(a.generation) && !g_preempted;
                              });
  if (!master.ok() && master.status().code() == StatusCode::kFailedPrecondition)
    return failed(Status::FailedPrecondition(kLeftWhileWaiting));
  if (!master.ok()) return failed(master.status());
  RankAssignment ra;
  ra.generation = a.generation;
  ra.rank = a.rank;
  ra.world = a.world;
  for (const AssignPeer& p : a.members) ra.members.push_back({p.rank, p.host});
  ra.master_addr = master->first;
  ra.master_port = master->second;
  ra.max_failures = cfg_.max_failures;
  ra.min_workers = cfg_.min_workers;
  ra.max_workers = cfg_.max_workers;
  ra.run_id = cfg_.run_name;
  ra.run_dir = run_dir_;
  ra.worker_id = job_.worker_id;
  ra.threads = threads_;
  const auto env = RankEnvironment(ra);
  g.env = env;
  if (spare_ && !spare_->exited) {
    Status st = spare_->ch->Send(AssignToProgram(env));
    if (st.ok()) {
      g.prog = std::move(spare_);
      g.prog->from_spare = true;
      g.prog->started = WallSeconds();
      LOG_INFO("worker {}: generation {}: rank {} of {} to the warm spare (pid {})", job_.worker_id, a.generation,
               a.rank, a.world, g.prog->pid);
    }
  }
  if (!g.prog) {
    // A cold rank 0 publishes its address before its program starts: the others start
    // theirs meanwhile, and every import runs at once.
    if (a.rank == 0) {
      if (Status st = rdzv->Publish(); !st.ok()) return failed(st);
    }
    auto p = Start(/*spare=*/false, env);
    if (!p.ok()) return failed(p.status());
    g.prog = std::move(p.value());
    LOG_INFO("worker {}: generation {}: rank {} of {} (pid {})", job_.worker_id, a.generation, a.rank, a.world,
             g.prog->pid);
  } else if (a.rank == 0) {
    // A warm rank 0 listens within a fraction of a second: the others are told the
    // address once it does (up to kListenWaitSeconds), so that their first connection
    // finds the store (torch 1.13 retries a refused one only after a whole second).
    const double until = WallSeconds() + kListenWaitSeconds;
    while (WallSeconds() < until && !PortListening(ra.master_port) && ProcessRuns(g.prog->pid)) {
      ::usleep(10000);
      TickIfDue(WallSeconds());
    }
    if (Status st = rdzv->Publish(); !st.ok()) return failed(st);
  }
  if (a.rank == 0 && !logs_open_) {
    logs_open_ = true;
    if (Status st = metrics_.Open(run_dir_ + "/metrics.jsonl", /*append=*/true); !st.ok())
      LOG_WARN("worker {}: {}", job_.worker_id, st.message());
    if (Status st = events_.Open(run_dir_ + "/events.jsonl"); !st.ok())
      LOG_WARN("worker {}: {}", job_.worker_id, st.message());
  }
  gen_ = std::move(g);
  if (cfg_.checkpoint_period_auto)
    NotePeriodChange(tuner_.OnGenerationStart(a.failures, WallSeconds() - a.job_started_at));
  SendControl();
  // The next spare starts once this generation trains (its first step report), or
  // kSpareDelaySeconds from now, or when the generation ends: its imports must not
  // compete with the recovery it is meant to speed up.
  spare_due_ = WallSeconds() + kSpareDelaySeconds;
}

// checkpoint_period=auto moved the period: rank 0 records it (the caller tells the
// program). True when it moved.
bool LaunchedWorker::NotePeriodChange(const std::optional<CheckpointPeriodChange>& change) {
  if (!change || !gen_) return false;
  if (gen_->a.rank == 0)
    events_.Emit("checkpoint_period_changed",
                 {{"from", change->from}, {"to", change->to}, {"failures", change->failures},
                  {"mtti_seconds", change->mtti_seconds}, {"stall_seconds", change->stall_seconds},
                  {"step_seconds", change->step_seconds}, {"reason", change->reason}});
  return true;
}

void LaunchedWorker::SendControl() {
  if (!gen_ || !gen_->prog) return;
  ProgramControl c;
  c.stop = gen_->stop_reasons != 0;
  c.reason = gen_->stop_reasons & kStopPreemption ? "preemption" : gen_->stop_reasons & kStopUser ? "user"
             : c.stop ? "resize" : "";
  c.deadline = gen_->stop_deadline;
  c.checkpoint_period = cfg_.checkpoint_period_auto ? tuner_.period() : cfg_.checkpoint_period;
  (void)gen_->prog->ch->Send(ControlToProgram(c));
}

void LaunchedWorker::Signal(Program& p, int sig, const char* why) {
  if (p.exited || p.pid <= 0) return;
  LOG_INFO("worker {}: signal {} to program pid {} ({})", job_.worker_id, DescribeSignal(sig), p.pid, why);
  if (sig == SIGKILL) p.killed = true;
  ::kill(p.pid, sig);
}

// A stop for a resize, the user or a preemption. A preemption notice is forwarded at
// once (SIGTERM to the group), with SIGKILL at the notice's end. Otherwise a program
// that talks is told (a control message) and must be done by the deadline: SIGTERM
// then, SIGKILL kKillGraceSeconds later. One that does not talk gets SIGTERM as torchrun
// would send it, once it is kHelloGraceSeconds old (a program importing
// elastrain_worker says hello well before that), and has the notice's length to exit.
void LaunchedWorker::RequestStop(int reason) {
  if (!gen_ || !gen_->prog || (gen_->stop_reasons & reason)) return;
  Generation& g = *gen_;
  const double now = WallSeconds();
  if (g.stop_reasons == 0) g.stop_deadline = now + cfg_.preemption_notice_seconds;
  g.stop_reasons |= reason;
  SendControl();
  if (reason & kStopPreemption) {
    g.term_at = now;
    g.kill_at = std::min(g.stop_deadline, now + cfg_.preemption_notice_seconds);
  } else if (!g.term_sent) {
    g.term_at = g.prog->connected ? g.stop_deadline : std::max(now, g.prog->started + kHelloGraceSeconds);
  }
  CheckDeadlines(now);
}

void LaunchedWorker::Take(const AssignMessage& m) {
  if (gen_) {  // a newer generation ends whatever older one still runs
    gen_->aborted = true;
    if (gen_->prog) Signal(*gen_->prog, SIGKILL, "a newer generation was planned");
    for (int i = 0; i < 100 && gen_; ++i) {  // SIGKILL: gone within a second
      Reap();
      if (gen_) ::usleep(10000);
    }
  }
  StartGeneration(m);
}

void LaunchedWorker::Take(const StopMessage& m) {
  if (gen_ && gen_->a.generation == m.generation) RequestStop(m.reason == kStopUser ? kStopUser : kStopResize);
}

void LaunchedWorker::Take(const AbortMessage& m) {
  if (!gen_ || gen_->a.generation > m.generation) return;
  gen_->aborted = true;
  if (gen_->prog) Signal(*gen_->prog, SIGKILL, "the generation was aborted");
}

bool LaunchedWorker::ReadAgent() {
  std::vector<nlohmann::json> msgs;
  Status st = agent_->ReadAvailable(&msgs);
  for (const auto& j : msgs) {
    AgentMessage m;
    Status p = FromJson(j, &m);
    if (!p.ok()) {
      LOG_WARN("worker {}: ignored a message from the agent: {}", job_.worker_id, p.message());
      continue;
    }
    inbox_.push_back(std::move(m));
  }
  if (!st.ok()) agent_gone_ = true;
  return st.ok();
}

void LaunchedWorker::Dispatch() {
  while (!inbox_.empty()) {
    AgentMessage m = std::move(inbox_.front());
    inbox_.pop_front();
    std::visit([this](const auto& v) { Take(v); }, m);
  }
}

bool LaunchedWorker::Superseded(int64_t generation) const {
  for (const AgentMessage& m : inbox_) {
    if (std::holds_alternative<ExitMessage>(m)) return true;
    if (const auto* a = std::get_if<AbortMessage>(&m); a && a->generation >= generation) return true;
    if (const auto* a = std::get_if<AssignMessage>(&m); a && a->generation > generation) return true;
  }
  return false;
}

void LaunchedWorker::ReadProgram(Program& p) {
  std::vector<nlohmann::json> msgs;
  Status st = p.ch->ReadAvailable(&msgs);
  for (const auto& j : msgs) {
    ProgramMessage m;
    Status parsed = ParseProgramMessage(j, &m);
    if (!parsed.ok()) {
      LOG_WARN("worker {}: program pid {}: {}", job_.worker_id, p.pid, parsed.message());
      continue;
    }
    p.last_msg = WallSeconds();
    OnProgramMessage(p, m);
  }
  if (!st.ok()) {
    // End of file (it exits, or closed fd 3) or garbage: no longer read, and its liveness
    // is the process's again (a closed channel is not a hang).
    if (!p.exited && st.message().find("longer than") != std::string::npos)
      LOG_WARN("worker {}: program pid {}: {}", job_.worker_id, p.pid, st.message());
    p.ch_open = false;
    p.connected = false;
  }
}

void LaunchedWorker::OnProgramMessage(Program& p, const ProgramMessage& m) {
  if (std::holds_alternative<ProgramHello>(m)) p.connected = p.ch_open;
  if (std::holds_alternative<ProgramWaiting>(m)) p.waited = true;
  const bool running = gen_ && gen_->prog.get() == &p;
  if (!running) return;  // a spare's heartbeats and waiting only refresh last_msg
  Generation& g = *gen_;
  if (const auto* s = std::get_if<ProgramStep>(&m)) {
    const double now = WallSeconds();
    double secs = s->step_seconds;
    if (secs <= 0) {
      const double since = g.last_step_time > 0 ? now - g.last_step_time : now - g.started;
      const int64_t n = g.last_step >= 0 && s->step > g.last_step ? s->step - g.last_step : 1;
      secs = since / static_cast<double>(n);
    }
    if (g.first_step < 0) {
      g.first_step = s->step;
      if (spare_due_ > 0) spare_due_ = now;
    }
    g.last_step = s->step;
    g.last_step_time = now;
    Send(StepMessage{g.a.generation, s->step, g.StartStep(), std::isnan(s->loss) ? 0.0 : s->loss, secs, now});
    if (g.a.rank == 0 && (s->step % cfg_.log_period == 0 || s->step == g.first_step)) {
      nlohmann::json r = {{"step", s->step}, {"step_time", secs}, {"generation", g.a.generation},
                          {"world_size", g.a.world}, {"time", now}};
      if (!std::isnan(s->loss)) r["loss"] = s->loss;
      if (s->tokens > 0 && secs > 0) r["tokens_per_sec"] = static_cast<double>(s->tokens) / secs;
      for (const auto& [k, v] : s->metrics)
        if (!r.contains(k)) r[k] = v;
      (void)metrics_.Write(r);
    }
  } else if (const auto* c = std::get_if<ProgramCheckpoint>(&m)) {
    Send(CheckpointMessage{c->step, WallSeconds()});
    if (g.a.rank == 0)
      events_.Emit("checkpoint_saved", {{"step", c->step}, {"generation", g.a.generation}, {"dir", ""},
                                        {"write_seconds", c->seconds}, {"stall_seconds", c->seconds}});
    if (cfg_.checkpoint_period_auto && c->seconds > 0) {
      const double mean = g.last_step > g.first_step && g.first_step >= 0
                              ? (g.last_step_time - g.started) / static_cast<double>(g.last_step - g.first_step + 1)
                              : 0;
      if (NotePeriodChange(tuner_.OnSaveMeasured(c->seconds, mean, WallSeconds() - g.a.job_started_at)))
        SendControl();
    }
  }
}

void LaunchedWorker::Reap() {
  for (;;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) break;
    const ProcessExit e = ProcessExitFromStatus(status);
    if (gen_ && gen_->prog && gen_->prog->pid == pid) {
      gen_->prog->exited = true;
      gen_->prog->exit = e;
      if (gen_->prog->ch_open) ReadProgram(*gen_->prog);  // its last words
      if (!RestartCold()) EndGeneration();
    } else if (spare_ && spare_->pid == pid && (spare_->killed || g_preempted || exit_)) {
      spare_.reset();  // this worker ended it
    } else if (spare_ && spare_->pid == pid) {
      LOG_WARN("worker {}: the warm spare (pid {}) {} before it was given a rank; later generations start cold "
               "(does the program call wait_for_assignment()?)",
               job_.worker_id, pid, e.Describe());
      spare_.reset();
      warm_failed_ = true;
    }
    sweep_due_ = WallSeconds();  // whatever it left behind
  }
}

// A spare that was handed a rank and died without ever waiting for it does not call
// wait_for_assignment(): warm starts are off for this worker, and the rank starts cold
// (once) instead of failing the generation. True when it did.
bool LaunchedWorker::RestartCold() {
  Generation& g = *gen_;
  if (!g.prog->from_spare || g.prog->waited || g.aborted || g.stop_reasons != 0 || g_preempted) return false;
  LOG_WARN("worker {}: the warm spare (pid {}) {} without waiting for its rank; later generations start cold (does "
           "the program call wait_for_assignment() after its imports?)",
           job_.worker_id, g.prog->pid, g.prog->exit.Describe());
  warm_failed_ = true;
  if (spare_) Signal(*spare_, SIGKILL, "warm starts are off");
  auto p = Start(/*spare=*/false, g.env);
  if (!p.ok()) return false;
  g.prog = std::move(p.value());
  g.started = WallSeconds();
  return true;
}

// The running program exited: report how the generation ended on this rank.
void LaunchedWorker::EndGeneration() {
  Generation& g = *gen_;
  const ProcessExit e = g.prog->exit;
  EndedMessage ended;
  ended.generation = g.a.generation;
  ended.stop_reasons = g.stop_reasons;
  ended.start_step = g.StartStep();
  ended.step = g.last_step;
  ended.leaving = g_preempted.load();
  const std::string what = fmt::format("program {} (pid {}) {}", program_[0], g.prog->pid, e.Describe());
  if (g.aborted) {
    ended.outcome = GenerationOutcome::kAborted;
  } else if (g.stop_reasons != 0) {
    ended.outcome = GenerationOutcome::kStopped;
  } else if (e.ok()) {
    ended.outcome = GenerationOutcome::kCompleted;
  } else {
    ended.outcome = GenerationOutcome::kFailed;
    ended.error = what;
  }
  LOG_INFO("worker {}: generation {}: {} ({})", job_.worker_id, g.a.generation, what, Name(ended.outcome));
  Send(ended);
  gen_.reset();
  if (spare_due_ > 0) spare_due_ = WallSeconds();
  // Anything of its group still running (its own children) is swept as an orphan.
  sweep_due_ = WallSeconds();
}

void LaunchedWorker::CheckDeadlines(double now) {
  if (!gen_ || !gen_->prog) return;
  Generation& g = *gen_;
  if (!g.term_sent && g.term_at > 0 && now >= g.term_at) {
    // A program that said hello in the meantime is told and keeps its deadline.
    const bool preempting = (g.stop_reasons & kStopPreemption) != 0;
    if (!preempting && g.prog->connected && now < g.stop_deadline) {
      g.term_at = g.stop_deadline;
    } else {
      g.term_sent = true;
      if (preempting) {
        // The program's children too (this worker's own handler only notes it again);
        // only when this worker leads its group, as every agent-started worker does.
        if (::getpgrp() == ::getpid()) ::kill(-::getpgrp(), SIGTERM);
        else Signal(*g.prog, SIGTERM, "preemption notice");
      } else {
        Signal(*g.prog, SIGTERM, "stop");
      }
      if (g.kill_at == 0)
        g.kill_at = g.prog->connected ? now + kKillGraceSeconds : std::max(g.stop_deadline, now + kKillGraceSeconds);
    }
  }
  if (g.term_sent && !g.kill_sent && g.kill_at > 0 && now >= g.kill_at) {
    Signal(*g.prog, SIGKILL, "it did not exit within the grace");
    g.kill_sent = true;
  }
}

void LaunchedWorker::TickIfDue(double now) {
  if (now - last_tick_ < kTickSeconds) return;
  // A program that talks vouches for itself: a stopped or frozen one stops the ticks,
  // and the agent kills this worker as hung after worker_heartbeat_timeout.
  if (gen_ && gen_->prog && gen_->prog->connected && now - gen_->prog->last_msg > kProgramSilenceSeconds) return;
  last_tick_ = now;
  ProgressMessage p;
  p.generation = gen_ ? gen_->a.generation : last_generation_;
  p.step = gen_ ? gen_->last_step : -1;
  p.phase = !gen_ ? TrainPhase::kIdle : gen_->last_step >= 0 ? TrainPhase::kTrain : TrainPhase::kSetup;
  p.time = now;
  Send(p);
}

// Children that are not a current program: what finished programs left behind.
void LaunchedWorker::SweepOrphans() {
  std::set<pid_t> keep;
  if (gen_ && gen_->prog && !gen_->prog->exited) keep.insert(gen_->prog->pid);
  if (spare_) keep.insert(spare_->pid);
  for (pid_t pid : ChildProcesses())
    if (!keep.count(pid)) {
      LOG_INFO("worker {}: killing pid {}, left behind by a finished program", job_.worker_id, pid);
      ::kill(pid, SIGKILL);
    }
}

void LaunchedWorker::KillAll() {
  if (gen_ && gen_->prog) Signal(*gen_->prog, SIGKILL, "the worker leaves");
  if (spare_) Signal(*spare_, SIGKILL, "the worker leaves");
  for (pid_t pid : ChildProcesses()) ::kill(pid, SIGKILL);
  // Reap them all (they die at once: SIGKILL), a second at most.
  for (int i = 0; i < 100; ++i) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid < 0) break;  // no children left
    if (pid == 0) ::usleep(10000);
  }
}

int LaunchedWorker::Run() {
  WorkerNotice notice(&g_preempted, [this] { wake_.Notify(); });
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  Send(ReadyMessage{static_cast<int>(::getpid()), -1, 0});
  StartSpare();
  int code = kExitSuccess;
  while (!exit_ && !agent_gone_) {
    std::vector<pollfd> fds = {{agent_->fd(), POLLIN, 0}, {wake_.fd(), POLLIN, 0}};
    std::vector<Program*> progs;
    if (gen_ && gen_->prog) progs.push_back(gen_->prog.get());
    if (spare_) progs.push_back(spare_.get());
    for (Program* p : progs) fds.push_back({p->ch_open ? p->ch->fd() : -1, POLLIN, 0});
    ::poll(fds.data(), fds.size(), static_cast<int>(kPollSlice.count()));
    if (fds[1].revents) wake_.Drain();
    for (size_t i = 0; i < progs.size(); ++i)
      if (fds[i + 2].revents) ReadProgram(*progs[i]);
    if (!ReadAgent()) break;
    Dispatch();
    if (g_preempted && !preempt_seen_) {
      preempt_seen_ = true;
      LOG_WARN("worker {}: preemption notice: the program has {}s to save and exit", job_.worker_id,
               cfg_.preemption_notice_seconds);
      if (spare_) Signal(*spare_, SIGKILL, "preemption");
      RequestStop(kStopPreemption);
    }
    Reap();
    const double now = WallSeconds();
    CheckDeadlines(now);
    if (g_preempted && !gen_) {
      code = kExitPreempted;
      break;
    }
    if (sweep_due_ > 0 && now - last_sweep_ >= kOrphanSweepSeconds) {
      last_sweep_ = now;
      sweep_due_ = 0;
      SweepOrphans();
    }
    if (spare_due_ > 0 && now >= spare_due_) {
      spare_due_ = 0;
      StartSpare();
    }
    TickIfDue(now);
  }
  KillAll();
  return code;
}

}  // namespace

int RunLaunchedWorker(Channel* agent, const JobMessage& job, const TrainConfig& cfg) {
  auto program = LaunchProgram(cfg);
  if (!program.ok() || program->empty()) {
    const std::string error = program.ok() ? "launch_program is empty" : program.status().message();
    (void)agent->Send(ToJson(WorkerMessage(FatalMessage{error})));
    return kExitBadConfig;
  }
  // A program that cannot be run fails the job once, here, not every generation.
  if (auto found = FindProgram(program->front()); !found.ok()) {
    (void)agent->Send(ToJson(WorkerMessage(FatalMessage{found.status().message()})));
    return kExitBadConfig;
  }
  LaunchedWorker w(agent, job, cfg, std::move(program.value()));
  return w.Run();
}

}  // namespace elastrain
