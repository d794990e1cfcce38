#include "elastic/policy.h"

#include <algorithm>
#include <climits>
#include <map>
#include <set>

#include <fmt/format.h>

#include "elastic/hang.h"
#include "elastic/health_gate.h"
#include "plan/ram_tier.h"
#include "plan/mesh_for_config.h"

namespace elastrain {

JobSettings SettingsFromConfig(const TrainConfig& cfg, const std::string& job_id,
                               const RendezvousAddress& rendezvous) {
  JobSettings s;
  s.job_id = job_id;
  s.min_workers = static_cast<int>(cfg.min_workers);
  s.max_workers = static_cast<int>(cfg.max_workers);
  s.max_failures = cfg.max_failures;
  s.resource_wait_timeout = cfg.resource_wait_timeout;
  s.heartbeat_timeout = cfg.worker_heartbeat_timeout;
  s.collective_timeout = cfg.collective_timeout;
  s.placement = cfg.placement_strategy;
  s.host_failure_threshold = cfg.host_failure_threshold;
  s.host_cooldown_seconds = cfg.host_cooldown_seconds;
  s.fail_at_step = cfg.fail_at_step;
  s.ram_tier = cfg.memory_snapshot_period > 0 && cfg.launch_program.empty();
  s.steps = cfg.steps;
  s.straggler.threshold = cfg.straggler_threshold;
  s.straggler.persistence_steps = cfg.straggler_persistence_steps;
  s.straggler.policy = cfg.straggler_policy;
  s.rendezvous = rendezvous;
  // A launched program is one process per rank whatever it does inside: any world size
  // runs, as plain data parallelism as far as the plan is concerned.
  if (!cfg.launch_program.empty()) s.mesh_for = [](int world) -> Result<Mesh> { return Mesh(world, 1, 1); };
  else s.mesh_for = [cfg](int world) { return ResolveMeshForConfig(cfg, world); };
  return s;
}

int ChooseWorldSize(int available, const JobSettings& s, Mesh* mesh) {
  for (int n = std::min(available, s.max_workers); n >= s.min_workers && n >= 1; --n) {
    auto m = s.mesh_for(n);
    if (!m.ok()) continue;
    if (mesh) *mesh = m.value();
    return n;
  }
  return 0;
}

namespace {

// What became of one member of the running generation: its outcome or exit kind, as the
// table in wire/worker_vocab.h maps them (kExited: the process ended, see its exit kind).
enum class Fate { kLive, kCompleted, kStopped, kFailed, kAborted, kExited, kLost };

struct Member {
  const PlanMember* m = nullptr;
  const ObservedWorker* w = nullptr;  // null when lost
  Fate fate = Fate::kLive;
  std::string desc;
};

class Decider {
 public:
  Decider(const JobRecord& rec, const Observation& obs, const JobSettings& s) : obs_(obs), s_(s) {
    d_.record = rec;
  }
  Decision Run();

 private:
  JobRecord& r() { return d_.record; }
  const JobRecord& r() const { return d_.record; }
  JobState state() const { return d_.record.state; }
  void Emit(AnyEvent e) { d_.events.push_back(std::move(e)); }
  void Transition(JobState to, const std::string& reason);
  void Fail(const std::string& reason) {
    Transition(JobState::kFailed, reason);
    d_.shutdown = true;
  }
  bool AgentAlive(const std::string& id) const {
    for (const AgentInfo& a : obs_.agents)
      if (a.id == id) return true;
    return false;
  }
  const AgentInfo* FindAgent(const std::string& id) const {
    for (const AgentInfo& a : obs_.agents)
      if (a.id == id) return &a;
    return nullptr;
  }
  bool Reported(const std::string& agent) const {
    return std::find(obs_.reported.begin(), obs_.reported.end(), agent) != obs_.reported.end();
  }
  const ObservedWorker* FindWorker(const std::string& id) const {
    for (const ObservedWorker& w : obs_.workers)
      if (w.rec.id == id) return &w;
    return nullptr;
  }
  bool InCooldown(const std::string& host) const {
    auto it = d_.record.cooldown_until.find(host);
    return it != d_.record.cooldown_until.end() && it->second > obs_.now;
  }
  bool Excluded(const ObservedWorker& w) const {
    if (replacing_.count(w.rec.id)) return true;
    auto it = d_.record.excluded_workers.find(w.rec.id);
    return it != d_.record.excluded_workers.end() && it->second > obs_.now;
  }
  std::vector<Member> ClassifyMembers(const Plan& plan) const;
  void EvaluateGeneration();
  void NoteFirstStep(const Plan& plan, const std::vector<Member>& members);
  bool EndIfStalled(int64_t g, const std::vector<Member>& members);
  // Gray failures: stragglers judged (and excluded) in a running generation; a hang's
  // diagnosis when it ends. Diagnose returns the ranks behind.
  void JudgeStragglers(const Plan& plan, const std::vector<Member>& members);
  void ExcludeStragglers(const Plan& plan, const std::vector<Member>& members,
                         const std::vector<StragglerDetectedEvent>& named);
  std::vector<const Member*> DiagnoseHang(int64_t g, const std::vector<Member>& members, const std::string& trigger);
  void ReplaceBehind(const std::vector<const Member*>& behind);
  void AskStopOrResize(const Plan& plan);
  int StopBits(int64_t g) const;
  void BeginEnding(int64_t g, const std::vector<Member>& members);
  void NoteEndedMember(int64_t g, const Member& x);
  bool EndStragglers(int64_t g, const std::vector<Member>& members);
  void EndGeneration(const std::vector<Member>& members);
  void RecordHostFailure(const std::string& host);
  void TryStart();
  // Idle workers on live agents, in placement order; cooled-down hosts only if needed.
  // `running`: workers of the running generation that will join too (a resize); they
  // count toward min_workers before cooled-down hosts are called on.
  std::vector<const ObservedWorker*> Candidates(bool* used_cooled, int running = 0) const;
  Plan MakePlan(const std::vector<const ObservedWorker*>& chosen, const Mesh& mesh) const;
  void PlanPeerRestore(const std::vector<const ObservedWorker*>& chosen, RestorePlan* restore) const;

  const Observation& obs_;
  const JobSettings& s_;
  Decision d_;
  std::set<std::string> replacing_;  // workers killed in this decision: not planned again
  HealthGateResult health_;  // which hosts their health checks let be planned (elastic/health_gate.h)
};

void Decider::Transition(JobState to, const std::string& reason) {
  const JobState from = state();
  r().reason = reason;
  if (from == to) return;
  r().state = to;
  if (IsTerminal(to)) r().ended_at = obs_.now;
  // Recovery spans: from the end of the last generation that trained to the first step
  // of the next, less the time spent waiting for resources in between.
  const double since = r().state_since > 0 ? r().state_since : r().started_at;
  if (from == JobState::kWaitingForResources) r().waited_since_trained += obs_.now - since;
  if (from == JobState::kRunning && r().first_step_noted) {
    r().trained_until = obs_.now;
    r().waited_since_trained = 0;
  }
  r().state_since = obs_.now;
  JobStateEvent e;
  e.from = JobStateName(from);
  e.to = JobStateName(to);
  e.reason = reason;
  e.generation = r().generation;
  e.step = r().step;
  e.failures = r().failures;
  Emit(std::move(e));
}

std::vector<Member> Decider::ClassifyMembers(const Plan& plan) const {
  std::vector<Member> out;
  for (const PlanMember& m : plan.members) {
    Member x;
    x.m = &m;
    x.w = FindWorker(m.worker);
    const std::string who = fmt::format("worker rank {} (pid {}) on host {}", m.rank, m.pid, m.host);
    if (!x.w) {
      if (AgentAlive(m.agent) && !Reported(m.agent)) {
        x.fate = Fate::kLive;  // the agent has not written its first report yet
      } else {
        x.fate = Fate::kLost;
        x.desc = AgentAlive(m.agent)
                     ? fmt::format("{} is no longer reported by agent {}", who, m.agent)
                     : fmt::format("{} was lost with its host: agent {} stopped renewing its lease", who, m.agent);
      }
    } else if (x.w->rec.phase == WorkerPhase::kExited) {
      x.fate = Fate::kExited;
      x.desc = x.w->rec.exit_desc;
    } else if ((x.w->rec.phase == WorkerPhase::kIdle || x.w->rec.phase == WorkerPhase::kLeaving) &&
               x.w->rec.generation == plan.generation) {
      const GenerationOutcome o = x.w->rec.outcome;
      x.fate = o == GenerationOutcome::kCompleted ? Fate::kCompleted : o == GenerationOutcome::kStopped ? Fate::kStopped
               : o == GenerationOutcome::kAborted ? Fate::kAborted : Fate::kFailed;
      x.desc = o == GenerationOutcome::kFailed ? fmt::format("{} failed: {}", who, x.w->rec.error)
                                               : who + " " + Name(o);
    } else if (x.w->departed) {
      x.fate = Fate::kLost;
      x.desc = fmt::format("{} left with its preempted host", who);
    } else {
      x.fate = Fate::kLive;
    }
    out.push_back(std::move(x));
  }
  return out;
}

void Decider::RecordHostFailure(const std::string& host) {
  std::vector<double>& times = r().host_failures[host];
  times.push_back(obs_.now);
  times.erase(std::remove_if(times.begin(), times.end(),
                             [&](double t) { return t < obs_.now - s_.host_cooldown_seconds; }),
              times.end());
  if (static_cast<int64_t>(times.size()) >= s_.host_failure_threshold && s_.host_cooldown_seconds > 0) {
    r().cooldown_until[host] = obs_.now + s_.host_cooldown_seconds;
    HostCooldownEvent e;
    e.host = host;
    e.failures = static_cast<int64_t>(times.size());
    e.until = obs_.now + s_.host_cooldown_seconds;
    e.reason = fmt::format("{} failures within host_cooldown_seconds={}", times.size(), s_.host_cooldown_seconds);
    Emit(std::move(e));
  }
}

// The rules of a running generation, in order: every member done (succeeded); nobody
// ending (stalled as a whole, or a stop or resize to ask for); some member ending (abort
// the others if one was lost, note each ending member once, end stragglers); nobody left
// running (the generation ends).
void Decider::EvaluateGeneration() {
  if (!obs_.plan || obs_.plan->generation != r().generation) {
    // The plan this record names is not in the store (lost write): plan again.
    Transition(JobState::kRecovering, fmt::format("the plan of generation {} is missing; planning again",
                                                  r().generation));
    return;
  }
  const Plan& plan = *obs_.plan;
  std::vector<Member> members = ClassifyMembers(plan);
  for (const Member& x : members)
    if (x.w && x.w->rec.generation == plan.generation) r().step = std::max(r().step, x.w->rec.step);
  if (!r().first_step_noted) NoteFirstStep(plan, members);

  bool all_completed = !members.empty(), any_ending = false;
  for (const Member& x : members) {
    all_completed &= x.fate == Fate::kCompleted;
    any_ending |= x.fate != Fate::kLive && x.fate != Fate::kCompleted;
  }
  if (all_completed) {
    Transition(JobState::kSucceeded, fmt::format("all {} steps done", r().step));
    d_.shutdown = true;
    return;
  }
  if (!any_ending) {
    JudgeStragglers(plan, members);
    if (!EndIfStalled(plan.generation, members)) AskStopOrResize(plan);
    return;
  }
  if (r().hang_diagnosed_gen != plan.generation) {
    // A member killed as hung or lost with its host, or one whose collective timed out:
    // name who the generation was waiting for, and replace the living ones. A member
    // that died otherwise (a crash, a kill, a preemption) explains the others' failed
    // collectives: nobody else is behind, and killing a survivor would lose the state it
    // holds (its replica, its RAM-tier copies). So does a peer's error (a connection
    // reset by a process that died before its agent noticed): the collective marks are
    // then a moment's reports, not a settled hang, and name nobody.
    bool silent = false, died = false, timed_out = false;
    for (const Member& x : members) {
      silent |= (x.fate == Fate::kExited && x.w->rec.exit_kind == ExitKind::kHung) ||
                (x.fate == Fate::kLost && !(x.w && x.w->departed));
      died |= x.fate == Fate::kExited || x.fate == Fate::kLost;
      timed_out |= x.fate == Fate::kFailed && x.w->rec.timed_out;
    }
    if (silent || (timed_out && !died))
      ReplaceBehind(DiagnoseHang(plan.generation, members, silent ? "silent_rank" : "collective_timeout"));
  }
  if (r().ending_since == 0) BeginEnding(plan.generation, members);
  for (const Member& x : members) NoteEndedMember(plan.generation, x);
  if (!EndStragglers(plan.generation, members)) EndGeneration(members);
}

// The first completed step of the generation (by the earliest rank): the recovery span
// ends there.
void Decider::NoteFirstStep(const Plan& plan, const std::vector<Member>& members) {
  const int64_t g = plan.generation;
  double first = 0, began = 0;
  int64_t step = -1, start = -1;
  for (const Member& x : members)
    if (x.w && x.w->rec.generation == g && x.w->rec.first_step_time > 0 &&
        (first == 0 || x.w->rec.first_step_time < first)) {
      first = x.w->rec.first_step_time;
      began = x.w->rec.first_step_start > 0 ? x.w->rec.first_step_start : first;
      step = x.w->rec.step;
      start = x.w->rec.start_step;
    }
  if (first == 0) return;
  r().first_step_noted = true;
  GenerationFirstStepEvent e;
  e.generation = g;
  e.first_step_time = first;
  e.step_started = began;
  e.step = step;
  e.start_step = start;
  e.world = plan.world;
  // Failure (or resize) to the first step of this generation, less any wait.
  if (r().trained_until > 0) {
    e.recovery_seconds = std::max(0.0, began - r().trained_until - r().waited_since_trained);
    r().last_recovery_seconds = *e.recovery_seconds;
  } else if (r().planned_at > 0 && r().start_seconds == 0) {
    r().start_seconds = std::max(0.0, began - r().planned_at);  // what a start costs, before any recovery
  }
  Emit(std::move(e));
}

// Hung as a whole: everyone in the training loop, nobody advancing for twice the
// heartbeat timeout. Every member is killed as hung (once). True when it was.
bool Decider::EndIfStalled(int64_t g, const std::vector<Member>& members) {
  double newest = 0;
  for (const Member& x : members) {
    if (!x.w || x.w->rec.generation != g || x.w->rec.train_phase != TrainPhase::kTrain || x.w->rec.first_step_time == 0)
      return false;
    newest = std::max(newest, x.w->rec.last_step_time);
  }
  if (newest == 0 || obs_.now - newest <= 2 * s_.heartbeat_timeout || r().kill_sent_gen == g) return false;
  r().kill_sent_gen = g;
  GenerationStalledEvent e;
  e.generation = g;
  e.seconds = obs_.now - newest;
  e.step = r().step;
  e.reason = fmt::format("no rank completed a step for {:.1f}s (2 x worker_heartbeat_timeout={}s)", obs_.now - newest,
                         s_.heartbeat_timeout);
  Emit(std::move(e));
  const std::vector<const Member*> behind = DiagnoseHang(g, members, "stalled");
  if (!behind.empty()) {  // the rank(s) behind are replaced; the others give up and keep their state
    ReplaceBehind(behind);
    d_.stop = GenerationStop{g, StopBits(g), true, s_.job_id};
    return true;
  }
  for (const Member& x : members) d_.commands.push_back({x.m->agent, {CommandAction::kHung, x.m->worker, obs_.now, s_.job_id}});
  return true;
}

std::vector<const Member*> Decider::DiagnoseHang(int64_t g, const std::vector<Member>& members,
                                                 const std::string& trigger) {
  r().hang_diagnosed_gen = g;
  std::vector<HangMember> hm;
  for (const Member& x : members) {
    HangMember h;
    h.rank = x.m->rank;
    h.worker = x.m->worker;
    h.host = x.m->host;
    h.reported = x.w != nullptr;
    if (x.w && x.w->rec.generation == g) {
      h.collective_seq = x.w->rec.collective_seq;
      h.collective_kind = x.w->rec.collective_kind;
      h.in_collective = x.w->rec.in_collective;
      h.last_progress = x.w->rec.last_progress;
    }
    h.gone = (x.fate == Fate::kLost && !(x.w && x.w->departed)) ||
             (x.fate == Fate::kExited && x.w->rec.exit_kind == ExitKind::kHung);
    hm.push_back(std::move(h));
  }
  HangDiagnosedEvent e = elastrain::DiagnoseHang(g, hm, obs_.now, trigger);
  std::vector<const Member*> behind;
  for (int rank : e.behind)
    for (const Member& x : members)
      if (x.m->rank == rank) behind.push_back(&x);
  Emit(std::move(e));
  return behind;
}

// The ranks behind that still run (or sit idle after failing) are killed as hung: their
// agents start fresh processes; they are not planned again meanwhile.
void Decider::ReplaceBehind(const std::vector<const Member*>& behind) {
  for (const Member* x : behind) {
    if (!x->w || x->fate == Fate::kExited || x->fate == Fate::kLost) continue;
    replacing_.insert(x->m->worker);
    d_.commands.push_back({x->m->agent, {CommandAction::kHung, x->m->worker, obs_.now, s_.job_id}});
  }
}

// The step anatomy of a running generation's members, judged (elastic/straggler.h).
void Decider::JudgeStragglers(const Plan& plan, const std::vector<Member>& members) {
  std::vector<RankTiming> ranks;
  for (const Member& x : members) {
    if (!x.w || x.w->rec.generation != plan.generation || x.w->rec.phase != WorkerPhase::kRunning) continue;
    const WorkerRecord& w = x.w->rec;
    ranks.push_back({x.m->rank, x.m->worker, x.m->host, w.compute_seconds, w.wait_seconds, w.timed_steps,
                     w.timed_until_step});
  }
  StragglerJudgement j = elastrain::JudgeStragglers(ranks, plan.generation, r().step, obs_.now, s_.straggler,
                                                   &r().stragglers);
  for (std::string& why : j.refused) d_.warnings.push_back("step anatomy refused: " + why);
  for (const StragglerClearedEvent& e : j.cleared) Emit(e);
  for (const StragglerDetectedEvent& e : j.detected) Emit(e);
  if (s_.straggler.policy == StragglerPolicy::kExclude && !j.detected.empty() &&
      r().resize_requested_gen != plan.generation && !obs_.stop_requested)
    ExcludeStragglers(plan, members, j.detected);
}

// Takes the named stragglers out when the world without them is valid and it pays:
// their hosts (or, on a host whose other ranks keep pace, their workers) cool down, and
// the generation stops at its next checkpoint boundary to be planned again without them.
void Decider::ExcludeStragglers(const Plan& plan, const std::vector<Member>& members,
                                const std::vector<StragglerDetectedEvent>& named) {
  std::vector<int> out;
  std::set<std::string> slow_workers;
  for (const StragglerDetectedEvent& e : named) {
    out.push_back(e.rank);
    slow_workers.insert(e.worker);
  }
  const int left = plan.world - static_cast<int>(out.size());
  if (left < s_.min_workers || ChooseWorldSize(left, s_, nullptr) != left) {
    d_.warnings.push_back(fmt::format("straggler_policy=exclude: not excluding rank(s) of generation {}: {} workers "
                                      "would be left (min_workers={}, or no mesh for that world)",
                                      plan.generation, left, s_.min_workers));
    return;
  }
  std::vector<RankTiming> ranks;
  for (const Member& x : members)
    if (x.w && x.w->rec.generation == plan.generation)
      ranks.push_back({x.m->rank, x.m->worker, x.m->host, x.w->rec.compute_seconds, x.w->rec.wait_seconds,
                       x.w->rec.timed_steps, x.w->rec.timed_until_step});
  const ReplanCost cost = r().last_recovery_seconds > 0 ? ReplanCost{r().last_recovery_seconds, "the last recovery"}
                         : r().start_seconds > 0 ? ReplanCost{r().start_seconds, "the job's start, planned to first step"}
                                                 : ReplanCost{};
  // Every rank of its host slow: the host is the problem (it cools down as a whole). A
  // rank keeps pace when its last judged slowdown is within the threshold: one slowed with
  // the named ones but not yet named (a window behind) does not.
  auto keeps_pace = [&](const std::string& worker) {
    auto it = r().stragglers.find(worker);
    return it == r().stragglers.end() || !(it->second.slowdown > s_.straggler.threshold);
  };
  std::set<std::string> whole_hosts;
  for (const StragglerDetectedEvent& s : named) {
    bool whole_host = true;
    for (const Member& x : members)
      if (x.m->host == s.host && !slow_workers.count(x.m->worker) && keeps_pace(x.m->worker)) whole_host = false;
    if (whole_host) whole_hosts.insert(s.host);
  }
  // Idle spares off the excluded hosts take the stragglers' places: the world need not shrink.
  bool cooled = false;
  int spares = 0;
  for (const ObservedWorker* w : Candidates(&cooled, left))
    if (!cooled && !whole_hosts.count(w->host)) ++spares;
  const int next_world = ChooseWorldSize(std::min(plan.world, left + spares), s_, nullptr);
  const ExclusionCase c = WeighExclusion(ranks, out, s_.steps - r().step, cost, next_world);
  if (!c.pays) {
    d_.warnings.push_back(fmt::format("straggler_policy=exclude: not excluding rank(s) of generation {}: {}",
                                      plan.generation, c.reason));
    return;
  }
  const double until = obs_.now + s_.host_cooldown_seconds;
  for (const StragglerDetectedEvent& s : named) {
    const bool whole_host = whole_hosts.count(s.host) > 0;
    HostExcludedEvent e;
    e.host = s.host;
    e.until = until;
    e.generation = plan.generation;
    e.step = r().step;
    e.slowdown = s.slowdown;
    e.expected_gain_seconds = c.expected_gain_seconds;
    e.replan_cost_seconds = c.replan_cost_seconds;
    if (whole_host) {
      r().cooldown_until[s.host] = until;
      r().excluded_at[s.host] = obs_.now;
      e.reason = fmt::format("straggler: rank {} at {:.2f}x the median rank's compute; {}", s.rank, s.slowdown,
                             c.reason);
    } else {
      r().excluded_workers[s.worker] = until;
      e.reason = fmt::format("straggler: rank {} ({}) at {:.2f}x the median rank's compute, its host's other ranks "
                             "keep pace: only this worker is excluded; {}",
                             s.rank, s.worker, s.slowdown, c.reason);
    }
    Emit(std::move(e));
  }
  r().resize_requested_gen = plan.generation;
  d_.stop = GenerationStop{plan.generation, StopBits(plan.generation), false, s_.job_id};
}

// A healthy generation: ask it to stop at a step boundary for the user's stop, or at the
// next checkpoint boundary to grow when idle workers could join.
void Decider::AskStopOrResize(const Plan& plan) {
  const int64_t g = plan.generation;
  const bool user_stop = obs_.stop_requested && r().stop_sent_gen != g;
  bool resize = false;
  if (!obs_.stop_requested && r().resize_requested_gen != g && plan.world < s_.max_workers) {
    bool cooled = false;
    const int available = static_cast<int>(Candidates(&cooled, plan.world).size());
    const int target = ChooseWorldSize(plan.world + available, s_, nullptr);
    if (available > 0 && target > plan.world) {
      resize = true;
      r().resize_requested_gen = g;
      ResizeRequestedEvent e;
      e.generation = g;
      e.world = plan.world;
      e.target = target;
      e.reason = fmt::format("{} idle workers; the world grows from {} to {} at the next checkpoint boundary",
                             available, plan.world, target);
      Emit(std::move(e));
    }
  }
  if (user_stop) {
    r().stop_sent_gen = g;
    StopRequestedEvent e;
    e.generation = g;
    e.step = r().step;
    Emit(std::move(e));
  }
  if (user_stop || resize) d_.stop = GenerationStop{g, StopBits(g), false, s_.job_id};
}

int Decider::StopBits(int64_t g) const {
  int bits = 0;
  if (r().stop_sent_gen == g) bits |= kStopUser;
  if (r().resize_requested_gen == g) bits |= kStopResize;
  return bits;
}

// The generation began to end. If it lost a member, the others are told to give up at
// once (a rendezvous still waiting for the lost one would otherwise wait out its
// timeout); members stopping at a step boundary all stop by themselves.
void Decider::BeginEnding(int64_t g, const std::vector<Member>& members) {
  r().ending_since = obs_.now;
  bool lost_member = false;
  for (const Member& x : members)
    lost_member |= x.fate == Fate::kExited || x.fate == Fate::kLost || x.fate == Fate::kFailed ||
                   x.fate == Fate::kAborted;
  if (lost_member) d_.stop = GenerationStop{g, StopBits(g), true, s_.job_id};
}

// One event per member that ended other than by completing or stopping (once each).
void Decider::NoteEndedMember(int64_t g, const Member& x) {
  const bool leaving = x.fate == Fate::kStopped && x.w->rec.phase == WorkerPhase::kLeaving;  // saved, then left on notice
  if (x.fate == Fate::kLive || x.fate == Fate::kCompleted || (x.fate == Fate::kStopped && !leaving)) return;
  if (std::find(r().noted.begin(), r().noted.end(), x.m->worker) != r().noted.end()) return;
  r().noted.push_back(x.m->worker);
  WorkerEndFields f;
  f.generation = g;
  f.rank = x.m->rank;
  f.worker = x.m->worker;
  f.host = x.m->host;
  f.pid = x.m->pid;
  f.reason = x.desc;
  f.step = r().step;
  if (x.fate == Fate::kExited) {
    const WorkerRecord& w = x.w->rec;
    f.detected_at = w.exit_time;
    f.exit_code = w.exit_code;
    f.signal = w.exit_signal;
    Emit(WorkerExitEvent(w.exit_kind, std::move(f)));
  } else if (x.fate == Fate::kAborted) {
    Emit(WorkerAbortedEvent{std::move(f)});
  } else if (x.fate == Fate::kLost) {
    Emit(HostLostEvent{std::move(f)});
  } else if (leaving) {
    f.reason = fmt::format("worker rank {} (pid {}) on host {} saved step {} and left after a preemption notice",
                           x.m->rank, x.m->pid, x.m->host, x.w->rec.step);
    Emit(WorkerPreemptedEvent{std::move(f)});
  } else {
    Emit(WorkerErrorEvent{std::move(f)});
  }
}

// Members still running while the generation ends are waited for, and killed as
// stragglers once collective_timeout (plus a grace) has passed. True while any run.
bool Decider::EndStragglers(int64_t g, const std::vector<Member>& members) {
  std::vector<const Member*> live;
  for (const Member& x : members)
    if (x.fate == Fate::kLive) live.push_back(&x);
  if (live.empty()) return false;
  if (obs_.now - r().ending_since > s_.collective_timeout + kEndingGraceSeconds && r().kill_sent_gen != g) {
    r().kill_sent_gen = g;
    for (const Member* x : live) d_.commands.push_back({x->m->agent, {CommandAction::kTerminate, x->m->worker, obs_.now, s_.job_id}});
    StragglersKilledEvent e;
    e.generation = g;
    e.count = static_cast<int64_t>(live.size());
    e.reason = fmt::format("{} ranks still running {:.1f}s after the generation began to end (collective_timeout={}s "
                           "+ {}s)",
                           live.size(), obs_.now - r().ending_since, s_.collective_timeout, kEndingGraceSeconds);
    Emit(std::move(e));
  }
  return true;
}

void Decider::EndGeneration(const std::vector<Member>& members) {
  const int64_t g = obs_.plan->generation;
  r().ending_since = 0;
  r().noted.clear();
  int64_t max_step = r().step;
  for (const Member& x : members)
    if (x.w) max_step = std::max(max_step, x.w->rec.step);
  if (r().inject_armed && s_.fail_at_step > 0 && max_step >= s_.fail_at_step) r().inject_armed = false;

  // The cause: a process death or hang first (by the time it was seen), then a lost
  // host, then an error a member reported (often the others' view of the same death).
  const Member* cause = nullptr;
  auto rank_of = [](const Member& x) {
    if (x.fate == Fate::kExited) {
      if (IsFailureExit(x.w->rec.exit_kind)) return 0;
      return INT_MAX;  // preempted or terminated: not a cause
    }
    if (x.fate == Fate::kLost) return x.w && x.w->departed ? INT_MAX : 1;  // left with a preempted host
    if (x.fate == Fate::kFailed) return 2;
    return INT_MAX;
  };
  for (const Member& x : members) {
    const int rk = rank_of(x);
    if (rk == INT_MAX) continue;
    if (!cause || rk < rank_of(*cause) ||
        (rk == 0 && rank_of(*cause) == 0 && x.w->rec.exit_time < cause->w->rec.exit_time))
      cause = &x;
  }
  bool preempted = false, user_stopped = false;
  for (const Member& x : members) {
    if (x.fate == Fate::kExited && x.w->rec.exit_kind == ExitKind::kPreempted) preempted = true;
    if (x.fate == Fate::kLost && x.w && x.w->departed) preempted = true;
    if (x.fate == Fate::kStopped && (x.w->rec.stop_reasons & kStopPreemption)) preempted = true;
    if (x.fate == Fate::kStopped && (x.w->rec.stop_reasons & kStopUser)) user_stopped = true;
  }
  if (cause) {
    ++r().failures;
    std::set<std::string> hosts;
    for (const Member& x : members)
      if (rank_of(x) <= 1) hosts.insert(x.m->host);
    for (const std::string& h : hosts) RecordHostFailure(h);
    const std::string budget = s_.max_failures < 0 ? "max_failures=-1 (unlimited)"
                                                   : fmt::format("max_failures={}", s_.max_failures);
    GenerationFailedEvent e;
    e.generation = g;
    e.reason = cause->desc;
    e.failures = r().failures;
    e.max_failures = s_.max_failures;
    e.step = max_step;
    Emit(std::move(e));
    if (s_.max_failures >= 0 && r().failures > s_.max_failures) {
      Fail(fmt::format("{} in generation {} at step {}; failure budget spent ({}, {} failure{})", cause->desc, g,
                       max_step, budget, r().failures, r().failures == 1 ? "" : "s"));
      return;
    }
    Transition(JobState::kRecovering, fmt::format("{} (failure {} of {})", cause->desc, r().failures, budget));
  } else if (user_stopped || obs_.stop_requested) {
    Transition(JobState::kStopped, fmt::format("stopped by elastrain stop after step {}", max_step));
    d_.shutdown = true;
    return;
  } else {
    Transition(JobState::kResizing, preempted ? fmt::format("preemption at step {}", max_step)
                                              : fmt::format("resize at step {}", max_step));
  }
  TryStart();
}

std::vector<const ObservedWorker*> Decider::Candidates(bool* used_cooled, int running) const {
  std::vector<const ObservedWorker*> all, usable;
  std::set<std::string> in_plan;
  if (obs_.plan && state() == JobState::kRunning)
    for (const PlanMember& m : obs_.plan->members) in_plan.insert(m.worker);
  for (const ObservedWorker& w : obs_.workers) {
    const AgentInfo* a = FindAgent(w.agent);
    if (!a || a->preempting || w.departed || w.rec.phase != WorkerPhase::kIdle || in_plan.count(w.rec.id)) continue;
    if (replacing_.count(w.rec.id)) continue;
    if (!health_.Plannable(w.host)) continue;  // failing or owing a health check: never, not even cooled
    all.push_back(&w);
    if (!InCooldown(w.host) && !Excluded(w)) usable.push_back(&w);
  }
  *used_cooled = running + static_cast<int>(usable.size()) < s_.min_workers && all.size() > usable.size();
  std::vector<const ObservedWorker*> pick = *used_cooled ? all : usable;
  // Survivors keep their order (their previous ranks); newcomers follow, by id.
  auto prev_rank = [&](const ObservedWorker* w) {
    return w->rec.generation == r().generation && w->rec.rank >= 0 ? w->rec.rank : INT_MAX;
  };
  std::map<std::string, std::vector<const ObservedWorker*>> by_agent;
  for (const ObservedWorker* w : pick) by_agent[w->agent].push_back(w);
  for (auto& [id, v] : by_agent)
    std::sort(v.begin(), v.end(), [&](auto* a, auto* b) {
      return std::make_pair(prev_rank(a), a->rec.id) < std::make_pair(prev_rank(b), b->rec.id);
    });
  std::vector<std::vector<const ObservedWorker*>> groups;
  for (auto& [id, v] : by_agent) groups.push_back(v);
  std::vector<const ObservedWorker*> out;
  if (s_.placement == PlacementStrategy::kSpread) {
    for (size_t i = 0;; ++i) {
      bool any = false;
      for (auto& v : groups)
        if (i < v.size()) out.push_back(v[i]), any = true;
      if (!any) break;
    }
  } else {  // PACK: the hosts with the most idle workers first
    std::stable_sort(groups.begin(), groups.end(), [](auto& a, auto& b) { return a.size() > b.size(); });
    for (auto& v : groups) out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

Plan Decider::MakePlan(const std::vector<const ObservedWorker*>& chosen, const Mesh& mesh) const {
  Plan p;
  p.job_id = s_.job_id;
  p.generation = r().generation + 1;
  p.world = static_cast<int>(chosen.size());
  p.data = mesh.data();
  p.fsdp = mesh.fsdp();
  p.tensor = mesh.tensor();
  p.rendezvous = s_.rendezvous;
  p.inject_failure = r().inject_armed && s_.fail_at_step > 0;
  p.created_at = obs_.now;
  p.failures = r().failures;
  p.covered_failures = r().covered_failures;
  p.job_started_at = r().started_at;
  int source = -1;
  for (size_t i = 0; i < chosen.size(); ++i) {
    const ObservedWorker* w = chosen[i];
    p.members.push_back({static_cast<int>(i), w->rec.id, w->agent, w->host, w->rec.pid});
    if (w->rec.state_step >= 0 && (source < 0 || w->rec.state_step > chosen[source]->rec.state_step))
      source = static_cast<int>(i);
  }
  const bool replicated = mesh.fsdp() == 1 && mesh.tensor() == 1;
  if (replicated && source >= 0 && chosen[source]->rec.state_step >= r().latest_checkpoint_step) {
    p.restore.kind = RestoreKind::kMemory;
    p.restore.source_rank = source;
    p.restore.step = chosen[source]->rec.state_step;
  } else {
    p.restore.kind = RestoreKind::kCheckpoint;
    p.restore.step = std::max<int64_t>(0, r().latest_checkpoint_step);
    PlanPeerRestore(chosen, &p.restore);
  }
  return p;
}

// The RAM tier: the last generation was sharded, and the chosen workers that ran in it
// report what they hold of its shards. Sets `restore` to peers when they hold one whole
// step at least as new as the latest checkpoint; otherwise leaves the checkpoint and
// says why.
void Decider::PlanPeerRestore(const std::vector<const ObservedWorker*>& chosen, RestorePlan* restore) const {
  if (!s_.ram_tier || !obs_.plan || obs_.plan->generation != r().generation) return;
  const Plan& old = *obs_.plan;
  if (old.fsdp * old.tensor <= 1 || old.world <= 1) return;  // not sharded: no RAM tier ran
  const int shards = old.fsdp * old.tensor;
  std::map<std::string, int> old_rank;
  for (const PlanMember& m : old.members) old_rank[m.worker] = m.rank;
  std::vector<bool> alive(static_cast<size_t>(old.world), false);
  std::map<int, int> new_rank;  // old rank -> new rank
  std::vector<ShardCopy> copies;
  for (size_t i = 0; i < chosen.size(); ++i) {
    const WorkerRecord& rec = chosen[i]->rec;
    auto it = old_rank.find(rec.id);
    if (it == old_rank.end() || it->second < 0 || it->second >= old.world || rec.copies_generation != old.generation)
      continue;
    alive[static_cast<size_t>(it->second)] = true;
    new_rank[it->second] = static_cast<int>(i);
    for (const HeldCopy& c : rec.copies)
      if (c.shard >= 0 && c.shard < shards) copies.push_back({c.shard, it->second, c.step});
  }
  const PeerRestoreChoice choice = ChoosePeerRestore(shards, alive, copies, r().latest_checkpoint_step);
  restore->why = choice.why;
  if (!choice.from_memory) return;
  restore->kind = RestoreKind::kPeers;
  restore->step = choice.step;
  restore->old_generation = old.generation;
  restore->old_fsdp = old.fsdp;
  restore->old_tensor = old.tensor;
  restore->sources.clear();
  for (int holder : choice.source) restore->sources.push_back(new_rank.at(holder));
}

void Decider::TryStart() {
  if (obs_.stop_requested) {
    Transition(JobState::kStopped, fmt::format("stopped by elastrain stop at step {}", r().step));
    d_.shutdown = true;
    return;
  }
  bool cooled = false;
  std::vector<const ObservedWorker*> cands = Candidates(&cooled);
  if (r().wait_since == 0) r().wait_since = obs_.now;
  // The first generation waits for workers that are still starting (a second or so),
  // rather than starting small and resizing at once. Later ones go with who is ready.
  if (state() == JobState::kPending && static_cast<int>(cands.size()) < s_.max_workers &&
      obs_.now - r().wait_since < kStartupGraceSeconds) {
    int starting = 0;
    for (const ObservedWorker& w : obs_.workers)
      if (w.rec.phase == WorkerPhase::kStarting && AgentAlive(w.agent)) ++starting;
    if (starting > 0) return;
  }
  Mesh mesh(1, 1, 1);
  const int n = ChooseWorldSize(static_cast<int>(cands.size()), s_, &mesh);
  if (n > 0) {
    cands.resize(n);
    const bool first = r().generation < 0;
    Plan p = MakePlan(cands, mesh);
    // A failure whose next generation restores from peers cost no disk restore: what
    // checkpoint_period=auto tells apart (cost/interval.h).
    if (state() == JobState::kRecovering && p.restore.kind == RestoreKind::kPeers) {
      p.covered_failures = ++r().covered_failures;
    }
    if (cooled) Emit(CooldownOverriddenEvent{.reason = "no other host can run min_workers"});
    r().generation = p.generation;
    r().world = n;
    if (!first) ++r().restarts;
    r().wait_since = 0;
    r().resize_requested_gen = -1;
    r().first_step_noted = false;
    r().planned_at = obs_.now;
    GenerationStartedEvent e;
    e.generation = p.generation;
    e.world = n;
    e.mesh = {p.data, p.fsdp, p.tensor};
    e.restore = RestoreEventOf(p.restore, r().latest_checkpoint_step);
    for (const PlanMember& m : p.members) e.members.push_back({m.rank, m.worker, m.host, m.pid});
    const std::string restore = DescribeRestore(nlohmann::json(e.restore));
    Emit(std::move(e));
    Transition(JobState::kRunning,
               fmt::format("generation {} with {} workers (restore from {})", p.generation, n, restore));
    d_.plan = std::move(p);
    return;
  }
  int capacity = 0;
  for (const AgentInfo& a : obs_.agents)
    if (!a.preempting) capacity += a.slots;
  std::string have = fmt::format("{} idle workers, {} worker slots on {} agents", cands.size(), capacity,
                                 obs_.agents.size());
  // Why workers do not become ready (a program missing on a host, a config it cannot
  // load): the newest failure an agent reported, so the wait's reason names it.
  const ObservedWorker* newest = nullptr;
  for (const ObservedWorker& w : obs_.workers)
    if (w.rec.phase == WorkerPhase::kExited && w.rec.exit_kind == ExitKind::kFailure &&
        (!newest || w.rec.exit_time > newest->rec.exit_time))
      newest = &w;
  if (newest && obs_.now - newest->rec.exit_time < s_.resource_wait_timeout)
    have += "; the last worker to fail: " + newest->rec.exit_desc;
  if (obs_.now - r().wait_since > s_.resource_wait_timeout) {
    Fail(fmt::format("fewer than min_workers={} workers for resource_wait_timeout={}s ({})", s_.min_workers,
                     s_.resource_wait_timeout, have));
    return;
  }
  if (capacity < s_.min_workers)
    Transition(JobState::kWaitingForResources,
               fmt::format("waiting for min_workers={}: {} (resource_wait_timeout={}s)", s_.min_workers, have,
                           s_.resource_wait_timeout));
}

Decision Decider::Run() {
  if (IsTerminal(state())) {
    d_.shutdown = true;
    return d_;
  }
  r().updated_at = obs_.now;
  if (r().started_at == 0) r().started_at = obs_.now;
  for (const ObservedWorker& w : obs_.workers)
    r().latest_checkpoint_step = std::max(r().latest_checkpoint_step, w.rec.checkpoint_step);
  health_ = ApplyHealthGate(obs_.agents, obs_.health, obs_.now, s_.job_id, &r(), &d_.events, &d_.commands);
  // A generation that ends here plans the next one itself (EndGeneration -> TryStart).
  if (state() == JobState::kRunning) EvaluateGeneration();
  else TryStart();
  return d_;
}

}  // namespace

Decision Decide(const JobRecord& record, const Observation& obs, const JobSettings& s) {
  return Decider(record, obs, s).Run();
}

RestoreChoice RestoreEventOf(const RestorePlan& p, int64_t latest_checkpoint_step) {
  RestoreChoice c;
  c.kind = Name(p.kind);
  if (p.kind == RestoreKind::kMemory) {
    c.source_rank = p.source_rank;
    c.step = p.step;
  } else if (p.kind == RestoreKind::kPeers) {
    c.step = p.step;
    c.old_generation = p.old_generation;
    c.sources.emplace();
    for (size_t s = 0; s < p.sources.size(); ++s) c.sources->push_back({static_cast<int64_t>(s), p.sources[s]});
  } else if (latest_checkpoint_step >= 0) {
    c.latest_checkpoint_step = latest_checkpoint_step;
  }
  if (!p.why.empty()) c.why = p.why;
  return c;
}

std::string DescribeRestore(const nlohmann::json& restore) {
  const auto integer = [&](const char* key) -> std::optional<int64_t> {
    if (!restore.is_object() || !restore.contains(key) || !restore[key].is_number_integer()) return std::nullopt;
    return restore[key].get<int64_t>();
  };
  const bool memory = restore.is_object() && restore.value("kind", nlohmann::json()) == Name(RestoreKind::kMemory);
  if (memory) return fmt::format("memory of rank {}, step {}", integer("source_rank").value_or(-1),
                                 integer("step").value_or(-1));
  if (restore.is_object() && restore.value("kind", nlohmann::json()) == Name(RestoreKind::kPeers))
    return fmt::format("peers' RAM, step {}", integer("step").value_or(-1));
  if (const auto latest = integer("latest_checkpoint_step"))
    return fmt::format("the latest checkpoint; the newest known is step {}", *latest);
  return "the latest checkpoint, if any";
}

}  // namespace elastrain
