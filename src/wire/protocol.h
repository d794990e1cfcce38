// What the controller, the agents and the workers tell each other, and where it lives in
// the store (store/store.h). One job at a time per store. Every record is JSON.
//
//   elastrain/head              the controller's leader lock (leased)
//   elastrain/job/spec          JobSpec: the submitted job (config YAML, run directory)
//   elastrain/job/state         JobRecord: the controller's whole state, so a restarted
//                               head resumes the job where the last one left it
//   elastrain/job/plan          Plan: the current generation, written with compare-and-swap
//   elastrain/job/control       JobControl: a user's stop request
//   elastrain/job/gen_stop      GenerationStop: the controller asks a generation to stop
//   elastrain/departed/<id>     AgentReport of an agent that left (preemption), not leased
//   elastrain/agents/<id>       AgentInfo (leased: it vanishes when the agent is lost)
//   elastrain/reports/<id>      AgentReport: the agent's workers (leased likewise)
//   elastrain/commands/<id>/<n> AgentCommand for agent <id> (deleted once carried out)
//   elastrain/rdzv/<job>/...    Gloo rendezvous keys of the workers (cluster mode)
//   elastrain/health/<host>     HealthRecord: the host's last health check (not leased:
//                               it outlives the agent and a head restart; it expires)
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <optional>

#include "common/status.h"
#include "store/store.h"
#include "wire/job_state.h"
#include "wire/rendezvous.h"
#include "wire/stop_reason.h"
#include "wire/worker_vocab.h"

namespace elastrain {

namespace keys {
inline const std::string kRoot = "elastrain/";
inline std::string Head() { return kRoot + "head"; }
inline std::string JobSpec() { return kRoot + "job/spec"; }
inline std::string JobRecord() { return kRoot + "job/state"; }
inline std::string JobPlan() { return kRoot + "job/plan"; }
inline std::string JobControl() { return kRoot + "job/control"; }
inline std::string GenerationStop() { return kRoot + "job/gen_stop"; }
inline std::string DepartedPrefix() { return kRoot + "departed/"; }
inline std::string Departed(const std::string& id) { return DepartedPrefix() + id; }
inline std::string AgentsPrefix() { return kRoot + "agents/"; }
inline std::string Agent(const std::string& id) { return AgentsPrefix() + id; }
inline std::string ReportsPrefix() { return kRoot + "reports/"; }
inline std::string Report(const std::string& id) { return ReportsPrefix() + id; }
inline std::string CommandPrefix(const std::string& agent) { return kRoot + "commands/" + agent + "/"; }
// The records that make agents act, which only the head writes and signs (issue 33,
// store/signed_records.h): the job spec, the plan, the generation's stop, the commands.
inline bool HeadSigned(const std::string& key) {
  return key == JobSpec() || key == JobPlan() || key == GenerationStop() || key.rfind(kRoot + "commands/", 0) == 0;
}
inline std::string Rendezvous(const std::string& job_id) { return kRoot + "rdzv/" + job_id; }
inline std::string HealthPrefix() { return kRoot + "health/"; }
inline std::string Health(const std::string& host) { return HealthPrefix() + host; }
}  // namespace keys


struct JobSpec {
  std::string job_id;
  std::string config_yaml;   // the resolved config (ConfigToYaml), num_workers as MIN:MAX
  std::string run_dir;       // <base_output_directory>/<run_name>, absolute
  double submitted_at = 0;
};

// Where the workers of `spec` meet: a folder of the run directory when the job runs over
// an in-memory store (embedded `elastrain train`), else a key prefix of the job in the
// cluster's store. The controller puts it in each plan; an agent accepts no other.
RendezvousAddress RendezvousForJob(const JobSpec& spec, const std::string& store_url);

struct AgentInfo {
  std::string id;            // unique among live agents, e.g. "host1" or "host1-2"
  std::string host;          // the host's name (for placement, cool-down and messages)
  std::string address;       // where its workers bind and are reached (Gloo)
  int slots = 0;             // worker processes it runs now (preempted slots are gone)
  int pid = 0;
  double started_at = 0;
  bool preempting = false;   // got a preemption notice: its workers are leaving
  bool health_checks = false;  // writes HealthRecords: planned only on a passing one (elastic/health_gate.h)
};

// A host's last health check (issue 32), written by its agent at registration, before
// re-admission after a cool-down, and periodically while it is idle. The controller never
// plans a host whose record says unhealthy and has not expired; an expired record counts
// as no check at all. Read as hostile input: a record that does not load is refused with
// a logged reason (and the host is treated as unchecked, not as healthy).
struct HealthRecord {
  std::string host;
  std::string agent;          // the agent that ran the check
  bool healthy = false;
  std::string check;          // "builtin" or the --health-check command
  std::string reason;         // why it failed (the command's output), "" when healthy
  double checked_at = 0;      // wall seconds
  double expires_at = 0;      // wall seconds; after it the record means nothing
  double gemm_gflops = 0;     // the built-in probe's figures (0: not measured)
  double memory_gbps = 0;
};

// A copy of one shard of a sharded generation's state that a worker holds in RAM (its
// own shard, or a buddy's copy: the RAM tier, plan/ram_tier.h). `shard` numbers the
// distinct shards of that generation's mesh: fsdp coordinate * tensor + tensor coordinate
// (the rank at data coordinate 0).
struct HeldCopy {
  int shard = -1;
  int64_t step = -1;  // the state after this step's update
  bool operator==(const HeldCopy&) const = default;
};

// One worker process as its agent reports it.
struct WorkerRecord {
  std::string id;            // "<agent>-w<serial>", unique over the job
  int slot = 0;
  int pid = 0;
  WorkerPhase phase = WorkerPhase::kNone;  // starting | idle | running | leaving | exited
  int64_t generation = -1;   // running: the generation; idle: the last one it ran
  int rank = -1;             // its rank in `generation`
  int64_t start_step = -1;   // the step `generation` started from
  int64_t step = -1;         // steps done (the last completed step)
  double first_step_time = 0;  // when its first step of `generation` completed (0: not yet)
  double first_step_start = 0; // when that first step began (its completion less its duration)
  int64_t state_step = -1;   // the step of the full replica it holds in memory (-1: none)
  int64_t copies_generation = -1;  // the generation whose shards `copies` are (-1: none)
  std::vector<HeldCopy> copies;    // sharded state it holds in RAM, its own and buddies'
  TrainPhase train_phase = TrainPhase::kNone;  // setup | restore | train | eval | checkpoint | idle
  double last_progress = 0;  // when it last reported anything
  double last_step_time = 0; // when its last step completed
  int64_t checkpoint_step = -1;  // the newest checkpoint it committed as chief
  // Step anatomy (issue 32): medians over its last timed steps of `generation` (at most
  // kAnatomyWindow of them), as the worker measured them. 0 when none is timed yet.
  double compute_seconds = 0;  // per step: forward, backward, update, its own I/O
  double wait_seconds = 0;     // per step: blocked in collectives (waiting for peers)
  int64_t timed_steps = 0;     // how many steps those medians cover
  int64_t timed_until_step = -1;  // the last step they cover
  // The collective it entered last in `generation` (any of its groups), from its last
  // progress tick: a hang names the rank behind by these.
  int64_t collective_seq = -1;   // collectives entered in `generation`, counted from 0
  std::string collective_kind;   // allreduce | allgather | reduce_scatter | broadcast | barrier | exchange | connect
  bool in_collective = false;    // it was still inside that collective
  // After a generation (idle) or at exit:
  GenerationOutcome outcome = GenerationOutcome::kNone;  // completed | stopped | failed | aborted
  int stop_reasons = 0;      // StopReason bits when stopped
  std::string error;         // why it failed
  bool timed_out = false;    // it failed on a timeout (a collective nobody completed), not a peer's error
  // phase == exited (wire/worker_vocab.h maps the exit kinds to outcomes, commands and events):
  ExitKind exit_kind = ExitKind::kNone;  // failure | preempted | hung | ended (killed by its agent) | success
  int exit_code = 0;
  int exit_signal = 0;
  double exit_time = 0;      // when the agent saw the exit
  std::string exit_desc;     // "worker rank 1 (pid 123) on host h was killed by signal 9 (SIGKILL)"
};

// How many steps a worker's reported step anatomy averages over.
inline constexpr int kAnatomyWindow = 5;

struct AgentReport {
  std::string agent;
  double time = 0;
  std::vector<WorkerRecord> workers;  // live ones, then recent exits
};

struct PlanMember {
  int rank = 0;
  std::string worker;        // WorkerRecord::id
  std::string agent;
  std::string host;
  int pid = 0;
};

struct RestorePlan {
  // memory: the replica of `source_rank` at `step` (pure data parallel both before and
  // after); peers: every shard of generation `old_generation` (mesh fsdp x tensor
  // `old_fsdp` x `old_tensor`) at `step` from the RAM of the new rank sources[shard],
  // resharded onto this plan's mesh; checkpoint: the run's latest committed checkpoint
  // (or a fresh start).
  RestoreKind kind = RestoreKind::kCheckpoint;
  int source_rank = 0;
  int64_t step = 0;
  int64_t old_generation = -1;
  int old_fsdp = 1, old_tensor = 1;
  std::vector<int> sources;
  std::string why;  // why peers, or why not (events.jsonl)
};

struct Plan {
  std::string job_id;
  int64_t generation = -1;
  int world = 0;
  int data = 1, fsdp = 1, tensor = 1;  // the mesh
  std::vector<PlanMember> members;     // by rank
  RestorePlan restore;
  RendezvousAddress rendezvous;        // on the wire "file:<dir>" or "etcd://host:port/<prefix>"
  bool inject_failure = false;         // fail_at_step armed for this generation
  double created_at = 0;
  // What checkpoint_period=auto estimates the MTTI from (JobRecord's failures and
  // started_at when the plan was made).
  int64_t failures = 0;
  double job_started_at = 0;
  int64_t covered_failures = 0;        // of `failures`, those the RAM tier restored from peers
};

// The controller asks the members of `generation` to stop at a step boundary: resize at
// the next checkpoint boundary, or the user's stop after the current step.
struct GenerationStop {
  int64_t generation = -1;
  int reasons = 0;      // StopReason bits
  bool abort = false;   // end at once: the generation lost a member (rendezvous included)
  std::string job_id;   // stamped by the controller; an agent ignores another job's
};

struct JobControl {
  bool stop = false;
  double requested_at = 0;
};

// Something an agent must do to one of its workers, or to itself.
struct AgentCommand {
  CommandAction action = CommandAction::kKill;  // kill | hang | host | terminate | hung | slow | unslow | check_health (wire/worker_vocab.h)
  std::string worker;        // empty for host and check_health
  double requested_at = 0;
  std::string job_id;        // the job it is meant for; an agent ignores another job's
  double factor = 0;         // slow: the worker runs `factor` x slower, in (1, kMaxSlowFactor]
  double seconds = 0;        // slow: for this long, then unslowed by its agent (0: until unslow), <= kMaxSlowSeconds
};
inline constexpr double kMaxSlowFactor = 100;
inline constexpr double kMaxSlowSeconds = 7 * 24 * 3600;  // one week

// One rank's straggler tracking (elastic/straggler.h), persisted in the JobRecord.
struct StragglerTrack {
  int64_t generation = -1;
  int64_t slow_since_step = -1;  // first step of the window where it turned slow (-1: not slow)
  int64_t last_step = -1;        // the last window end it was judged at
  bool detected = false;         // straggler_detected written, straggler_cleared not yet
  double slowdown = 0;           // the last measured
  int rank = -1;                 // where it ran (for straggler_cleared once it is gone)
  std::string host;
  double slow_since_time = 0;    // when it was first judged slow (with slow_since_step)
};

// The controller's state, persisted after every decision (elastic/policy.h).
struct JobRecord {
  std::string job_id;
  JobState state = JobState::kPending;
  std::string reason;                  // why it is in `state`
  int64_t generation = -1;
  int world = 0;
  int64_t failures = 0;                // counted against max_failures
  int64_t covered_failures = 0;        // failures whose next generation restored from peers' RAM
  int64_t restarts = 0;                // generations started after the first
  int64_t step = 0;                    // newest completed step seen
  int64_t latest_checkpoint_step = -1;
  double started_at = 0, updated_at = 0, ended_at = 0;
  double wait_since = 0;               // when the current wait for workers began (0: not waiting)
  double ending_since = 0;             // when the current generation began to end
  int64_t resize_requested_gen = -1;   // generation asked to stop at a checkpoint boundary
  int64_t stop_sent_gen = -1;          // generation asked to stop for the user
  int64_t kill_sent_gen = -1;          // generation whose stragglers were killed
  bool inject_armed = true;            // fail_at_step not yet fired
  bool first_step_noted = false;       // the current generation's first step was logged
  // Recovery accounting (monitor/goodput.h defines the same spans from events.jsonl):
  double state_since = 0;              // when the job entered `state`
  double trained_until = 0;            // when the last generation that trained stopped RUNNING
  double waited_since_trained = 0;     // seconds WAITING_FOR_RESOURCES since trained_until
  std::vector<std::string> noted;      // workers whose loss was logged in this generation
  std::map<std::string, std::vector<double>> host_failures;  // host -> failure times
  std::map<std::string, double> cooldown_until;              // host -> end of its cool-down
  // Gray failures (elastic/straggler.h): per worker id, the straggler tracking of the
  // current generation; hosts excluded for a gray failure wait in cooldown_until and are
  // re-admitted only after a health check newer than their exclusion passes.
  std::map<std::string, StragglerTrack> stragglers;
  std::map<std::string, double> excluded_at;                 // host -> when it was excluded
  std::map<std::string, double> excluded_workers;            // worker id -> end of its exclusion (a slow rank on a shared host)
  std::map<std::string, bool> host_healthy;                  // host -> last health seen (for host_health events)
  std::map<std::string, double> health_asked_at;             // host -> when check_health was last sent to it
  std::map<std::string, std::string> host_unplanned;         // host -> why its health keeps it out of plans (status)
  int64_t hang_diagnosed_gen = -1;     // generation whose hang was diagnosed (once each)
  double last_recovery_seconds = 0;    // the newest generation's recovery (a re-plan's measured cost)
  double planned_at = 0;               // when the current generation was planned
  double start_seconds = 0;            // the job's first generation: planned to its first step began
  std::string leader;                  // HeadRecord::id of the head that wrote it (several heads)
};

// keys::Head(): the leading head, put with its lease (elastic/leadership.h). Standbys wait
// for the key to go with that lease; status shows who leads.
struct HeadRecord {
  std::string id;   // "<hostname>:<pid>", unique among the heads of a cluster
  std::string host;
  int64_t pid = 0;
  std::string url;  // its API ("" for an embedded controller)
  double since = 0;  // when it took the lead (wall seconds)
};

// JSON text <-> records. Parse errors name the record and what is wrong.
std::string ToJson(const JobSpec& v);
std::string ToJson(const AgentInfo& v);
std::string ToJson(const HealthRecord& v);
std::string ToJson(const AgentReport& v);
std::string ToJson(const Plan& v);
std::string ToJson(const JobControl& v);
std::string ToJson(const GenerationStop& v);
std::string ToJson(const AgentCommand& v);
std::string ToJson(const JobRecord& v);
std::string ToJson(const HeadRecord& v);
Status FromJson(const std::string& text, JobSpec* v);
Status FromJson(const std::string& text, AgentInfo* v);
Status FromJson(const std::string& text, HealthRecord* v);
Status FromJson(const std::string& text, AgentReport* v);
Status FromJson(const std::string& text, Plan* v);
Status FromJson(const std::string& text, JobControl* v);
Status FromJson(const std::string& text, GenerationStop* v);
Status FromJson(const std::string& text, AgentCommand* v);
Status FromJson(const std::string& text, JobRecord* v);
Status FromJson(const std::string& text, HeadRecord* v);

// Reads and parses the record at `key`: nullopt when the key does not exist; Corruption
// naming the key when it does not parse. `mod_revision` (optional) receives the key's
// revision, for a later CompareAndSwap.
template <typename T>
Result<std::optional<T>> ReadRecord(Store& store, const std::string& key, int64_t* mod_revision = nullptr) {
  ELASTRAIN_ASSIGN_OR_RETURN(std::optional<KeyValue> kv, store.Get(key));
  if (mod_revision) *mod_revision = kv ? kv->mod_revision : 0;
  if (!kv) return std::optional<T>();
  T v;
  Status st = FromJson(kv->value, &v);
  if (!st.ok()) return Status::Corruption(key + " in " + store.url() + ": " + st.message());
  return std::optional<T>(std::move(v));
}

}  // namespace elastrain
