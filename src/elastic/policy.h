// The controller's decisions as a pure function: (persisted state, what the store shows
// now, the job's settings) -> (next state, actions, events). No I/O, no clock: the
// executor (elastic/controller.h) gathers the Observation, calls Decide and carries out
// the Decision, so every rule here is unit-tested without processes (tests/unit/
// elastic_policy_test.cpp).
//
// The rules, in words:
//   - A generation ends when any member exits, is lost with its host (lease expiry),
//     fails, or stops at a step boundary; the controller waits for the other members to
//     end too (they notice through their collectives), killing stragglers after
//     collective_timeout + kEndingGraceSeconds.
//   - It ended by a *failure* if a member exited with a failure, hung, was lost, or
//     reported an error; one failure is counted per generation, however many members it
//     took. Preemptions and resizes are not failures. max_failures >= 0 bounds the count.
//   - A host with host_failure_threshold failures within host_cooldown_seconds is avoided
//     for host_cooldown_seconds, unless nothing else can run min_workers.
//   - The next generation takes every idle worker (up to max_workers, as many as make a
//     valid mesh, at least min_workers), placed PACK or SPREAD. It restores from memory
//     when both meshes are purely data parallel and an idle worker holds a replica at
//     least as new as the latest checkpoint; from peers (the RAM tier) when the last
//     generation was sharded and the chosen workers hold every one of its shards at one
//     step at least that new (plan/ram_tier.h, ChoosePeerRestore); otherwise from the
//     latest checkpoint, with the reason.
//   - Fewer than min_workers idle: wait (WAITING_FOR_RESOURCES when the live slots are
//     fewer than min_workers), failing after resource_wait_timeout.
//   - While a generation runs below max_workers and more workers are idle, it is asked to
//     stop at its next checkpoint boundary (a resize, not a failure).
//   - A generation whose every member is in its training loop but none has completed a
//     step for 2 x worker_heartbeat_timeout is hung as a whole: its members are killed.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/mesh.h"
#include "config/config.h"
#include "elastic/straggler.h"
#include "wire/events.h"
#include "wire/job_state.h"
#include "wire/protocol.h"

namespace elastrain {

// Extra wait, beyond collective_timeout, for members of an ending generation to stop.
inline constexpr double kEndingGraceSeconds = 5;
// How long the first generation waits for workers that are still starting.
inline constexpr double kStartupGraceSeconds = 30;

struct JobSettings {
  std::string job_id;
  int min_workers = 1, max_workers = 1;
  int64_t max_failures = 0;
  double resource_wait_timeout = 300;
  double heartbeat_timeout = 60;
  double collective_timeout = 60;
  PlacementStrategy placement = PlacementStrategy::kPack;
  int64_t host_failure_threshold = 2;
  double host_cooldown_seconds = 300;
  int64_t fail_at_step = 0;
  bool ram_tier = false;  // memory_snapshot_period > 0: sharded generations keep peer copies
  int64_t steps = 0;      // the job's total steps (what an exclusion's gain is weighed over)
  StragglerSettings straggler;
  RendezvousAddress rendezvous;  // copied into every plan
  // The mesh for a world size, or an error when that size cannot run (a tensor degree
  // that does not divide, an axis that does not fill).
  std::function<Result<Mesh>(int world)> mesh_for;
};
JobSettings SettingsFromConfig(const TrainConfig& cfg, const std::string& job_id,
                               const RendezvousAddress& rendezvous);

// A worker as the store shows it, with where it runs.
struct ObservedWorker {
  WorkerRecord rec;
  std::string agent, host;
  bool departed = false;  // from the last report of an agent that left (preemption)
};

struct Observation {
  double now = 0;                        // wall-clock seconds
  std::vector<AgentInfo> agents;         // live (leased) agents
  std::vector<std::string> reported;     // agents whose report exists
  std::vector<ObservedWorker> workers;   // from live agents' reports and departed agents
  std::optional<Plan> plan;
  bool stop_requested = false;           // elastrain stop
  std::vector<HealthRecord> health;      // hosts' last health checks (elastrain/health/), loaded ones only
};

struct Decision {
  JobRecord record;                      // the next persisted state
  std::optional<Plan> plan;              // a new generation to write
  std::optional<GenerationStop> stop;    // a stop request to write
  std::vector<std::pair<std::string, AgentCommand>> commands;  // agent id -> command
  std::vector<AnyEvent> events;          // for events.jsonl (wire/events.h)
  std::vector<std::string> warnings;     // for the log: records refused, exclusions that did not pay
  bool shutdown = false;                 // the job is over: agents stop their workers
};

Decision Decide(const JobRecord& record, const Observation& obs, const JobSettings& s);

// The `restore` of a generation_started event: the plan's choice, not what was restored.
// A memory plan names its source rank and step; a checkpoint plan names no step, because
// the workers restore the newest committed checkpoint they find (a rerun's controller
// knows none), only the newest one this controller heard of (`latest_checkpoint_step`)
// when there is one. The chief's state_restored event names the step restored.
RestoreChoice RestoreEventOf(const RestorePlan& p, int64_t latest_checkpoint_step);
// "memory of rank 1, step 40", "the latest checkpoint; the newest known is step 40", or
// "the latest checkpoint, if any", from RestoreEventOf's JSON (any field may be
// missing or of another type).
std::string DescribeRestore(const nlohmann::json& restore);

// The largest world size in [min_workers, min(max_workers, available)] that has a valid
// mesh, or 0 when there is none.
int ChooseWorldSize(int available, const JobSettings& s, Mesh* mesh);

}  // namespace elastrain
