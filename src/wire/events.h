// The events of <run>/events.jsonl as types: one struct per event, its name in `kName`,
// its JSON through ELASTRAIN_JSON_RECORD (common/json.h). Writers build the struct
// and call EventLog::Emit (common/events.h); readers decode a line with DecodeEvent into
// AnyEvent and take the alternatives they need, so a name or a field is spelled once.
//
// One shape per event, whoever writes it: a field a kind of writer does not know stays at
// its default (the launched worker's checkpoint_saved has no `dir`). One meaning per field
// name across events.jsonl and metrics.jsonl: `step_time` is a duration (metrics.jsonl);
// the wall time of a generation's first step is `first_step_time` (runs before it wrote
// `step_time`, which DecodeEvent still reads). Every line also has `time` (wall seconds)
// and `event` (the name), written by EventLog.
//
// Who writes what (docs/observability.md has the table, checked against these structs by
// tests/unit/events_test.cpp):
//   the controller (elastic/policy.cpp, controller.cpp)   `source` = "controller"
//   the chief rank (train/)                               checkpoints, restores, redone steps
//   the launched worker (launch/launched_worker.cpp)      checkpoint_saved, checkpoint_period_changed
//
// events.jsonl is read as hostile input: DecodeEvent never throws; an unknown event, or a
// field of another type, is a non-ok Result the reader skips.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "common/json.h"
#include "wire/worker_vocab.h"

namespace elastrain {

// ------------------------------------------------------------------ parts of events
struct MeshShape {  // generation_started.mesh
  int data = 0, fsdp = 0, tensor = 0;
  bool operator==(const MeshShape&) const = default;
};
ELASTRAIN_JSON_RECORD(MeshShape, data, fsdp, tensor)

struct ShardMesh {  // memory_restored.old_mesh: the mesh the shards were cut for
  int fsdp = 0, tensor = 0;
  bool operator==(const ShardMesh&) const = default;
};
ELASTRAIN_JSON_RECORD(ShardMesh, fsdp, tensor)

struct ShardSource {  // which rank served a shard from its RAM
  int64_t shard = 0;
  int rank = -1;
  bool operator==(const ShardSource&) const = default;
};
ELASTRAIN_JSON_RECORD(ShardSource, shard, rank)

struct EventMember {  // generation_started.members
  int rank = -1;
  std::string worker, host;
  int64_t pid = 0;
  bool operator==(const EventMember&) const = default;
};
ELASTRAIN_JSON_RECORD(EventMember, rank, worker, host, pid)

// generation_started.restore: the plan's choice (elastic/policy.h RestoreEventOf). A
// memory plan names source_rank and step; a peers plan step, old_generation and sources;
// a checkpoint plan the newest checkpoint the controller heard of, when it heard of one.
struct RestoreChoice {
  std::string kind;  // memory | peers | checkpoint
  std::optional<int> source_rank;
  std::optional<int64_t> step;
  std::optional<int64_t> old_generation;
  std::optional<std::vector<ShardSource>> sources;
  std::optional<int64_t> latest_checkpoint_step;
  std::optional<std::string> why;
  bool operator==(const RestoreChoice&) const = default;
};
ELASTRAIN_JSON_RECORD(RestoreChoice, kind, source_rank, step, old_generation, sources, latest_checkpoint_step, why)

// ------------------------------------------------------------------ the controller
struct JobSubmittedEvent {
  static constexpr std::string_view kName = "job_submitted";
  std::string source = "controller";
  std::string job, run_dir;
  std::string num_workers;  // "N" or "MIN:MAX"
  int64_t max_failures = 0;
  int64_t global_batch_size = 0;
  bool operator==(const JobSubmittedEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(JobSubmittedEvent, source, job, run_dir, num_workers, max_failures, global_batch_size)

struct ControllerResumedEvent {
  static constexpr std::string_view kName = "controller_resumed";
  std::string source = "controller";
  std::string job, state;
  int64_t generation = -1;
  int64_t step = 0;
  bool operator==(const ControllerResumedEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(ControllerResumedEvent, source, job, state, generation, step)

// Several heads (elastic/leadership.h): a head took the lead of the job. `previous` is
// the head whose record it found ("" for the first), `waited_seconds` how long it stood
// by for the lead.
struct HeadElectedEvent {
  static constexpr std::string_view kName = "head_elected";
  std::string source = "controller";
  std::string head, url, previous;
  double waited_seconds = 0;
  bool operator==(const HeadElectedEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(HeadElectedEvent, source, head, url, previous, waited_seconds)

// The head that led the job lost the lead (written by the one that took it over: the
// one that lost it is fenced out and writes nothing more).
struct HeadLostEvent {
  static constexpr std::string_view kName = "head_lost";
  std::string source = "controller";
  std::string head, reason;
  bool operator==(const HeadLostEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(HeadLostEvent, source, head, reason)

struct JobStateEvent {  // a transition of wire/job_state.h
  static constexpr std::string_view kName = "job_state";
  std::string source = "controller";
  std::string from, to, reason;  // JobStateName words
  int64_t generation = -1;
  int64_t step = 0;
  int64_t failures = 0;
  bool operator==(const JobStateEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(JobStateEvent, source, from, to, reason, generation, step, failures)

struct GenerationStartedEvent {
  static constexpr std::string_view kName = "generation_started";
  std::string source = "controller";
  int64_t generation = -1;
  int world = 0;
  MeshShape mesh;
  RestoreChoice restore;
  std::vector<EventMember> members;
  bool operator==(const GenerationStartedEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(GenerationStartedEvent, source, generation, world, mesh, restore, members)

struct GenerationFirstStepEvent {  // the earliest rank's first completed step
  static constexpr std::string_view kName = "generation_first_step";
  std::string source = "controller";
  int64_t generation = -1;
  double first_step_time = 0;  // wall time it completed (before: `step_time`)
  double step_started = 0;     // wall time it began
  int64_t step = -1;
  int64_t start_step = -1;
  int world = 0;
  std::optional<double> recovery_seconds;  // none for the first generation that trains
  bool operator==(const GenerationFirstStepEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(GenerationFirstStepEvent, source, generation, first_step_time, step_started, step, start_step,
                      world, recovery_seconds)

struct GenerationStalledEvent {
  static constexpr std::string_view kName = "generation_stalled";
  std::string source = "controller";
  int64_t generation = -1;
  double seconds = 0;
  int64_t step = 0;
  std::string reason;
  bool operator==(const GenerationStalledEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(GenerationStalledEvent, source, generation, seconds, step, reason)

struct GenerationFailedEvent {
  static constexpr std::string_view kName = "generation_failed";
  std::string source = "controller";
  int64_t generation = -1;
  std::string reason;
  int64_t failures = 0;
  int64_t max_failures = 0;
  int64_t step = 0;
  bool operator==(const GenerationFailedEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(GenerationFailedEvent, source, generation, reason, failures, max_failures, step)

struct ResizeRequestedEvent {
  static constexpr std::string_view kName = "resize_requested";
  std::string source = "controller";
  int64_t generation = -1;
  int world = 0;
  int target = 0;
  std::string reason;
  bool operator==(const ResizeRequestedEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(ResizeRequestedEvent, source, generation, world, target, reason)

struct StopRequestedEvent {
  static constexpr std::string_view kName = "stop_requested";
  std::string source = "controller";
  int64_t generation = -1;
  int64_t step = 0;
  bool operator==(const StopRequestedEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(StopRequestedEvent, source, generation, step)

struct StragglersKilledEvent {
  static constexpr std::string_view kName = "stragglers_killed";
  std::string source = "controller";
  int64_t generation = -1;
  int64_t count = 0;
  std::string reason;
  bool operator==(const StragglersKilledEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(StragglersKilledEvent, source, generation, count, reason)

struct HostCooldownEvent {
  static constexpr std::string_view kName = "host_cooldown";
  std::string source = "controller";
  std::string host;
  int64_t failures = 0;
  double until = 0;  // wall time
  std::string reason;
  bool operator==(const HostCooldownEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(HostCooldownEvent, source, host, failures, until, reason)

struct CooldownOverriddenEvent {
  static constexpr std::string_view kName = "cooldown_overridden";
  std::string source = "controller";
  std::string reason;
  bool operator==(const CooldownOverriddenEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(CooldownOverriddenEvent, source, reason)

// ------------------------------------------------------------------ gray failures (issue 32)
// A rank whose compute time per step stayed above straggler_threshold x the median
// rank's for straggler_persistence windows of straggler_window_steps steps.
struct StragglerDetectedEvent {
  static constexpr std::string_view kName = "straggler_detected";
  std::string source = "controller";
  int64_t generation = -1;
  int rank = -1;
  std::string worker, host;
  double slowdown = 0;                // its compute seconds per step / the median rank's
  double compute_seconds = 0;         // its, per step
  double median_compute_seconds = 0;  // the median rank's, per step
  int64_t since_step = -1;            // the first step of the window where it turned slow
  int64_t step = -1;                  // the step the controller had seen when it decided
  std::string policy;                 // straggler_policy: alert | exclude
  bool operator==(const StragglerDetectedEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(StragglerDetectedEvent, source, generation, rank, worker, host, slowdown, compute_seconds,
                      median_compute_seconds, since_step, step, policy)

struct StragglerClearedEvent {
  static constexpr std::string_view kName = "straggler_cleared";
  std::string source = "controller";
  int64_t generation = -1;
  int rank = -1;
  std::string worker, host;
  double slowdown = 0;  // the last measured
  int64_t step = -1;
  std::string reason;   // back to pace | generation ended | excluded
  bool operator==(const StragglerClearedEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(StragglerClearedEvent, source, generation, rank, worker, host, slowdown, step, reason)

// A host taken out of planning for a gray failure (a straggler under straggler_policy
// exclude): it cools down until `until` and is re-admitted only after a passing check.
struct HostExcludedEvent {
  static constexpr std::string_view kName = "host_excluded";
  std::string source = "controller";
  std::string host;
  std::string reason;
  double until = 0;                  // wall time
  int64_t generation = -1;
  int64_t step = -1;
  double slowdown = 0;
  double expected_gain_seconds = 0;  // remaining steps x the step time saved
  double replan_cost_seconds = 0;    // the measured cost of a re-plan (recovery)
  bool operator==(const HostExcludedEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(HostExcludedEvent, source, host, reason, until, generation, step, slowdown,
                      expected_gain_seconds, replan_cost_seconds)

// A host's health as the controller saw it change (its HealthRecord, wire/protocol.h).
struct HostHealthEvent {
  static constexpr std::string_view kName = "host_health";
  std::string source = "controller";
  std::string host, agent;
  bool healthy = false;
  std::string check;   // builtin | the command
  std::string reason;  // why it failed; "" when healthy
  double gemm_gflops = 0, memory_gbps = 0;
  bool operator==(const HostHealthEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(HostHealthEvent, source, host, agent, healthy, check, reason, gemm_gflops, memory_gbps)

struct HangRank {  // hang_diagnosed.ranks: where each member was
  int rank = -1;
  std::string worker, host;
  int64_t collective_seq = -1;  // the collective it entered last (-1: none yet)
  std::string collective_kind;
  bool in_collective = false;
  double silent_seconds = 0;    // since its last progress report
  bool operator==(const HangRank&) const = default;
};
ELASTRAIN_JSON_RECORD(HangRank, rank, worker, host, collective_seq, collective_kind, in_collective, silent_seconds)

// A generation declared hung, or a member reporting a collective timeout: the ranks by
// the last collective each entered, and the one(s) behind (silent, or at an earlier
// collective than the rest) with their hosts.
struct HangDiagnosedEvent {
  static constexpr std::string_view kName = "hang_diagnosed";
  std::string source = "controller";
  int64_t generation = -1;
  std::string trigger;              // silent_rank | collective_timeout | stalled
  std::vector<int> behind;          // ranks
  std::vector<std::string> hosts;   // their hosts, in the same order
  std::vector<HangRank> ranks;      // every member, by rank
  std::string reason;
  bool operator==(const HangDiagnosedEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(HangDiagnosedEvent, source, generation, trigger, behind, hosts, ranks, reason)

// A member of a generation that ended other than by completing or stopping: the fields
// of every worker_* and host_lost event. The exit fields are there when its process
// exited (worker_failed, worker_hung, worker_terminated, and worker_preempted by exit).
struct WorkerEndFields {
  std::string source = "controller";
  int64_t generation = -1;
  int rank = -1;
  std::string worker, host;
  int64_t pid = 0;
  std::string reason;
  int64_t step = 0;
  std::optional<double> detected_at;  // when the agent saw it exit
  std::optional<int> exit_code;
  std::optional<int> signal;
  bool operator==(const WorkerEndFields&) const = default;
};
#define ELASTRAIN_WORKER_END_EVENT(Type, name)                                                              \
  struct Type : WorkerEndFields {                                                                         \
    static constexpr std::string_view kName = name;                                                       \
    bool operator==(const Type&) const = default;                                                         \
  };                                                                                                      \
  ELASTRAIN_JSON_RECORD(Type, source, generation, rank, worker, host, pid, reason, step, detected_at, exit_code, \
                        signal)
ELASTRAIN_WORKER_END_EVENT(WorkerErrorEvent, "worker_error")          // an error report, still running
ELASTRAIN_WORKER_END_EVENT(WorkerAbortedEvent, "worker_aborted")      // gave up on the generation
ELASTRAIN_WORKER_END_EVENT(WorkerPreemptedEvent, "worker_preempted")  // saved and left on a notice
ELASTRAIN_WORKER_END_EVENT(WorkerHungEvent, "worker_hung")            // killed as hung
ELASTRAIN_WORKER_END_EVENT(WorkerTerminatedEvent, "worker_terminated")  // ended by its agent
ELASTRAIN_WORKER_END_EVENT(WorkerFailedEvent, "worker_failed")        // exited on a failure
ELASTRAIN_WORKER_END_EVENT(HostLostEvent, "host_lost")                // its agent's lease expired
#undef ELASTRAIN_WORKER_END_EVENT

// ------------------------------------------------------------------ the chief rank
struct StateRestoredEvent {
  static constexpr std::string_view kName = "state_restored";
  int64_t generation = -1;
  int64_t step = 0;  // the step restored (the generation trains from it)
  int world = 0;
  std::string kind;  // memory | peers | checkpoint | fresh
  double seconds = 0;
  bool operator==(const StateRestoredEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(StateRestoredEvent, generation, step, world, kind, seconds)

// Restored from RAM: from one rank's snapshot (kind memory: source_rank, ranks_sent) or
// from the shards peers kept (kind peers: old_generation, old_mesh, sources).
struct MemoryRestoredEvent {
  static constexpr std::string_view kName = "memory_restored";
  int64_t generation = -1;
  int64_t step = 0;
  std::string kind = "memory";
  int source_rank = -1;
  int64_t ranks_sent = 0;
  int64_t old_generation = -1;
  ShardMesh old_mesh;
  std::vector<ShardSource> sources;
  double seconds = 0;
  bool operator==(const MemoryRestoredEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(MemoryRestoredEvent, generation, step, kind, source_rank, ranks_sent, old_generation, old_mesh,
                      sources, seconds)

struct PeerRestoreAbandonedEvent {
  static constexpr std::string_view kName = "peer_restore_abandoned";
  int64_t generation = -1;
  std::string why;
  bool operator==(const PeerRestoreAbandonedEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(PeerRestoreAbandonedEvent, generation, why)

struct StepLineRecoveredEvent {
  static constexpr std::string_view kName = "step_line_recovered";
  int64_t generation = -1;
  int64_t step = 0;
  int64_t line_generation = -1;
  int rank = -1;
  bool operator==(const StepLineRecoveredEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(StepLineRecoveredEvent, generation, step, line_generation, rank)

struct StepsRedoneEvent {  // the generation caught up with the steps done before
  static constexpr std::string_view kName = "steps_redone";
  int64_t generation = -1;
  int64_t from = 0, to = 0;
  bool operator==(const StepsRedoneEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(StepsRedoneEvent, generation, from, to)

// A committed checkpoint. The trainer knows every field; the launched worker (whose
// program saves) knows step, generation and one duration, given as write and stall.
struct CheckpointSavedEvent {
  static constexpr std::string_view kName = "checkpoint_saved";
  int64_t step = 0;
  int64_t generation = -1;
  std::string dir;
  double write_seconds = 0;     // writing and committing it
  double prune_seconds = 0;     // removing old checkpoints
  double stall_seconds = 0;     // training blocked by the save
  double snapshot_seconds = 0;  // of the stall, taking the snapshot
  double wait_seconds = 0;      // of the stall, waiting for the previous save
  double save_seconds = 0;
  bool operator==(const CheckpointSavedEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(CheckpointSavedEvent, step, generation, dir, write_seconds, prune_seconds, stall_seconds,
                      snapshot_seconds, wait_seconds, save_seconds)

struct CheckpointFailedEvent {
  static constexpr std::string_view kName = "checkpoint_failed";
  int64_t step = 0;
  std::string error;
  bool operator==(const CheckpointFailedEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(CheckpointFailedEvent, step, error)

struct CheckpointRestoredEvent {
  static constexpr std::string_view kName = "checkpoint_restored";
  int64_t step = 0;
  std::string dir;
  double seconds = 0;
  bool full_state = false;
  bool operator==(const CheckpointRestoredEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(CheckpointRestoredEvent, step, dir, seconds, full_state)

struct CheckpointRestoreFallbackEvent {
  static constexpr std::string_view kName = "checkpoint_restore_fallback";
  std::string dir, error, next;
  bool operator==(const CheckpointRestoreFallbackEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(CheckpointRestoreFallbackEvent, dir, error, next)

// checkpoint_period=auto chose a new period (train/checkpoint_period.h), in the trainer
// or the launched worker alike.
struct CheckpointPeriodChangedEvent {
  static constexpr std::string_view kName = "checkpoint_period_changed";
  int64_t from = 0, to = 0;
  int64_t failures = 0;
  int64_t covered_failures = 0;
  double mtti_seconds = 0;
  double stall_seconds = 0;
  double step_seconds = 0;
  std::string reason;  // generation_start | save_measured
  int64_t generation = -1;
  int64_t step = 0;
  bool operator==(const CheckpointPeriodChangedEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(CheckpointPeriodChangedEvent, from, to, failures, covered_failures, mtti_seconds, stall_seconds,
                      step_seconds, reason, generation, step)

// memory_snapshot_period=auto chose the RAM tier's period, or turned it off (to 0), in the
// chief rank (cost/snapshot_period.h).
struct MemorySnapshotPeriodChangedEvent {
  static constexpr std::string_view kName = "memory_snapshot_period_changed";
  int64_t from = -1, to = 0;  // steps between copies; 0: off; from -1: the first choice
  int64_t failures = 0;
  double mtti_seconds = 0;           // the estimated mean time between failures the tier covers
  double copy_seconds = 0;           // what a copy adds to a step (0: still calibrating)
  double step_seconds = 0;           // a step without a copy
  double disk_interval_seconds = 0;  // the disk checkpoint's period in seconds (0: none)
  std::string reason;                // calibrating | generation_start | copy_measured
  int64_t generation = -1;
  int64_t step = 0;
  bool operator==(const MemorySnapshotPeriodChangedEvent&) const = default;
};
ELASTRAIN_JSON_RECORD(MemorySnapshotPeriodChangedEvent, from, to, failures, mtti_seconds, copy_seconds, step_seconds,
                      disk_interval_seconds, reason, generation, step)

// ------------------------------------------------------------------ any event
using AnyEvent =
    std::variant<JobSubmittedEvent, ControllerResumedEvent, HeadElectedEvent, HeadLostEvent, JobStateEvent, GenerationStartedEvent,
                 GenerationFirstStepEvent, GenerationStalledEvent, GenerationFailedEvent, ResizeRequestedEvent,
                 StopRequestedEvent, StragglersKilledEvent, HostCooldownEvent, CooldownOverriddenEvent,
                 StragglerDetectedEvent, StragglerClearedEvent, HostExcludedEvent, HostHealthEvent,
                 HangDiagnosedEvent,
                 WorkerErrorEvent, WorkerAbortedEvent, WorkerPreemptedEvent, WorkerHungEvent, WorkerTerminatedEvent,
                 WorkerFailedEvent, HostLostEvent, StateRestoredEvent, MemoryRestoredEvent, PeerRestoreAbandonedEvent,
                 StepLineRecoveredEvent, StepsRedoneEvent, CheckpointSavedEvent, CheckpointFailedEvent,
                 CheckpointRestoredEvent, CheckpointRestoreFallbackEvent, CheckpointPeriodChangedEvent,
                 MemorySnapshotPeriodChangedEvent>;

std::string_view EventName(const AnyEvent& e);
// The event of a member whose process exited as `kind` (named as ExitEventName names it).
AnyEvent WorkerExitEvent(ExitKind kind, WorkerEndFields f);
// Every event's name, in AnyEvent's order.
std::vector<std::string_view> AllEventNames();

// A line of events.jsonl, decoded.
struct EventRecord {
  double time = 0;  // wall seconds when it was written (0: the line had none)
  AnyEvent event;
};

// The line events.jsonl holds for `e` at wall time `time` (EventLog writes the same).
nlohmann::json EncodeEvent(const AnyEvent& e, double time);
// One line, parsed or not. NotFound: an event this version does not know (a newer
// writer's); Corruption: not a JSON object, no `event` name, or a field of another type
// than its struct's (the message names the line's event and field). Never throws.
Result<EventRecord> DecodeEvent(const nlohmann::json& line);
Result<EventRecord> DecodeEventLine(std::string_view text);

// The alternative T of a decoded record, or null (a typed `event == "name"`).
template <typename T>
const T* EventAs(const EventRecord& r) {
  return std::get_if<T>(&r.event);
}

}  // namespace elastrain
