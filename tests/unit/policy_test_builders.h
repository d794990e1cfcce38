// Builders of the policy tests (elastic/policy.h without processes): job settings, a
// cluster as the store shows it (agents, their workers' records), hand-made plans and
// job records, and readers of a Decision's events. Shared by every *policy*_test.cpp so
// that a test states only what differs from the usual cluster.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "plan/mesh.h"
#include "elastic/policy.h"
#include "wire/events.h"
#include "wire/job_state.h"
#include "wire/protocol.h"
#include "wire/stop_reason.h"

namespace elastrain::policy_test {

inline constexpr double kT0 = 1'000'000;  // an arbitrary wall-clock origin

// ---- Settings ---------------------------------------------------------------------------

inline JobSettings Settings(int min_workers, int max_workers) {
  JobSettings s;
  s.job_id = "job-1";
  s.min_workers = min_workers;
  s.max_workers = max_workers;
  s.max_failures = 3;
  s.resource_wait_timeout = 300;
  s.heartbeat_timeout = 60;
  s.collective_timeout = 60;
  s.placement = PlacementStrategy::kPack;
  s.host_failure_threshold = 2;
  s.host_cooldown_seconds = 300;
  s.fail_at_step = 0;
  s.rendezvous = RendezvousAddress::File("/tmp/rdzv");
  // Any world size: pure data parallelism.
  s.mesh_for = [](int world) -> Result<Mesh> { return Mesh(world, 1, 1); };
  return s;
}

// Only even world sizes run.
inline Result<Mesh> EvenOnly(int world) {
  if (world % 2 != 0) return Status::InvalidArgument(fmt::format("world {} is odd", world));
  return Mesh(world, 1, 1);
}

// ---- The cluster as the store shows it ----------------------------------------------------

struct Cluster {
  std::vector<AgentInfo> agents;
  std::vector<ObservedWorker> workers;
  int next_pid = 100;

  void AddAgent(const std::string& id, const std::string& host, int slots) {
    AgentInfo a;
    a.id = id;
    a.host = host;
    a.address = host + ":0";
    a.slots = slots;
    a.pid = 1;
    a.started_at = kT0 - 100;
    agents.push_back(a);
  }
  // An agent with `slots` idle workers, "<id>-w0" .. "<id>-w<slots-1>": a host ready to
  // run a generation.
  Cluster& AddHost(const std::string& id, const std::string& host, int slots) {
    AddAgent(id, host, slots);
    for (int i = 0; i < slots; ++i) AddWorker(fmt::format("{}-w{}", id, i), id);
    return *this;
  }
  const AgentInfo& AgentById(const std::string& id) const {
    for (const AgentInfo& a : agents)
      if (a.id == id) return a;
    ADD_FAILURE() << "no agent " << id;
    return agents.front();
  }
  // A worker in `phase` (idle by default: ready for a generation, never ran one).
  ObservedWorker& AddWorker(const std::string& id, const std::string& agent, const std::string& phase = "idle") {
    ObservedWorker w;
    w.rec.id = id;
    w.rec.slot = static_cast<int>(workers.size());
    w.rec.pid = next_pid++;
    w.rec.phase = Parse<WorkerPhase>(phase).value();
    w.rec.train_phase = w.rec.phase == WorkerPhase::kIdle ? TrainPhase::kIdle : TrainPhase::kSetup;
    w.agent = agent;
    w.host = AgentById(agent).host;
    workers.push_back(w);
    return workers.back();
  }
  ObservedWorker& W(const std::string& id) {
    for (ObservedWorker& w : workers)
      if (w.rec.id == id) return w;
    ADD_FAILURE() << "no worker " << id;
    return workers.front();
  }
  void RemoveAgent(const std::string& id) {
    agents.erase(std::remove_if(agents.begin(), agents.end(), [&](const AgentInfo& a) { return a.id == id; }),
                 agents.end());
    workers.erase(
        std::remove_if(workers.begin(), workers.end(), [&](const ObservedWorker& w) { return w.agent == id; }),
        workers.end());
  }
  // Every live agent has reported.
  Observation Obs(double now, const std::optional<Plan>& plan, bool stop = false) const {
    Observation o;
    o.now = now;
    o.agents = agents;
    for (const AgentInfo& a : agents) o.reported.push_back(a.id);
    o.workers = workers;
    o.plan = plan;
    o.stop_requested = stop;
    return o;
  }
};

// The members of `plan` are in its training loop at `step`.
inline void MarkRunning(Cluster& c, const Plan& plan, int64_t step, double now) {
  for (const PlanMember& m : plan.members) {
    WorkerRecord& r = c.W(m.worker).rec;
    r.phase = WorkerPhase::kRunning;
    r.generation = plan.generation;
    r.rank = m.rank;
    r.start_step = plan.restore.step;
    r.step = step;
    r.train_phase = TrainPhase::kTrain;
    r.first_step_time = now;
    r.last_step_time = now;
    r.last_progress = now;
    r.outcome = GenerationOutcome::kNone;
    r.stop_reasons = 0;
    r.error.clear();
  }
}

// A member ended its generation and waits for the next (keeps generation and rank).
inline void MarkIdle(Cluster& c, const std::string& id, const std::string& outcome, int64_t state_step = -1,
              int stop_reasons = 0) {
  WorkerRecord& r = c.W(id).rec;
  r.phase = WorkerPhase::kIdle;
  r.train_phase = TrainPhase::kIdle;
  r.outcome = Parse<GenerationOutcome>(outcome).value();
  r.state_step = state_step;
  r.stop_reasons = stop_reasons;
  if (outcome == "failed") r.error = "allreduce failed: connection reset by peer";
}

// The agent saw the worker's process end (keeps generation and rank).
inline std::string MarkExited(Cluster& c, const std::string& id, const std::string& kind, double when,
                       const std::string& what = "was killed by signal 9 (SIGKILL)") {
  ObservedWorker& w = c.W(id);
  WorkerRecord& r = w.rec;
  r.phase = WorkerPhase::kExited;
  r.exit_kind = Parse<ExitKind>(kind).value();
  r.exit_signal = kind == "failure" ? 9 : 0;
  r.exit_time = when;
  // As the agent writes it (Agent::Impl::OnExit): who, then what happened.
  r.exit_desc = fmt::format("worker rank {} (pid {}) on host {} {}", r.rank, r.pid, w.host, what);
  return r.exit_desc;
}

// A plan for `gen` with ranks in the order given.
inline Plan HandPlan(Cluster& c, int64_t gen, const std::vector<std::string>& ids) {
  Plan p;
  p.job_id = "job-1";
  p.generation = gen;
  p.world = static_cast<int>(ids.size());
  p.data = p.world;
  p.rendezvous = RendezvousAddress::File("/tmp/rdzv");
  for (size_t i = 0; i < ids.size(); ++i) {
    const ObservedWorker& w = c.W(ids[i]);
    p.members.push_back({static_cast<int>(i), w.rec.id, w.agent, w.host, w.rec.pid});
  }
  return p;
}

// The record of a job whose generation `plan` is running.
inline JobRecord RunningRecord(const Plan& plan, double now) {
  JobRecord r;
  r.job_id = "job-1";
  r.state = JobState::kRunning;
  r.generation = plan.generation;
  r.world = plan.world;
  r.started_at = now - 100;
  r.updated_at = now;
  return r;
}

// The plan of generation `gen` of the workers `ids` (ranks in that order), its members
// in their training loop at `step` since `now`.
inline Plan RunningPlan(Cluster& c, int64_t gen, const std::vector<std::string>& ids, int64_t step, double now) {
  Plan p = HandPlan(c, gen, ids);
  MarkRunning(c, p, step, now);
  return p;
}

// The same plan and the job's record of it: the usual start of a test.
struct RunningGeneration {
  Plan plan;
  JobRecord rec;
};
inline RunningGeneration StartGeneration(Cluster& c, int64_t gen, const std::vector<std::string>& ids, int64_t step,
                                         double now) {
  RunningGeneration g;
  g.plan = RunningPlan(c, gen, ids, step, now);
  g.rec = RunningRecord(g.plan, now);
  return g;
}

// ---- Decisions --------------------------------------------------------------------------

// An event of a decision as events.jsonl has it: its name and its line.
struct EventFields {
  std::string name;
  nlohmann::json fields;
};
inline int CountEvents(const Decision& d, std::string_view name) {
  return static_cast<int>(
      std::count_if(d.events.begin(), d.events.end(), [&](const AnyEvent& e) { return EventName(e) == name; }));
}
inline std::optional<EventFields> FindEvent(const Decision& d, std::string_view name) {
  for (const AnyEvent& e : d.events)
    if (EventName(e) == name) return EventFields{std::string(name), EncodeEvent(e, 0)};
  return std::nullopt;
}
inline std::vector<std::string> EventNames(const Decision& d) {
  std::vector<std::string> out;
  for (const AnyEvent& e : d.events) out.emplace_back(EventName(e));
  return out;
}
// The job_state transitions of a decision, as "FROM->TO".
inline std::vector<std::string> Transitions(const Decision& d) {
  std::vector<std::string> out;
  for (const AnyEvent& e : d.events)
    if (const auto* s = std::get_if<JobStateEvent>(&e)) out.push_back(s->from + "->" + s->to);
  return out;
}
inline std::vector<std::string> MemberIds(const Plan& p) {
  std::vector<std::string> out;
  for (const PlanMember& m : p.members) out.push_back(m.worker);
  return out;
}
inline std::vector<std::string> MemberHosts(const Plan& p) {
  std::vector<std::string> out;
  for (const PlanMember& m : p.members) out.push_back(m.host);
  return out;
}
inline std::string Names(const Decision& d) {
  std::string out = "events:";
  for (const std::string& n : EventNames(d)) out += " " + n;
  return out;
}

}  // namespace elastrain::policy_test
