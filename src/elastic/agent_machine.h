// The node agent's decisions, as a state machine: Step(input, now) -> actions. It owns
// what the agent knows of its slots and workers; it runs no process, reads no clock and
// touches no store (time is an input), so every path (a death, a hang, a preemption, a
// new plan, a chaos command) is unit-tested without processes (tests/unit/
// elastic_agent_test.cpp). elastic/agent.cpp is its executor: it polls the workers'
// channels, reaps exits, spawns, signals and talks to the store, feeds what it sees in
// as inputs and carries out the actions. The controller is built the same way
// (elastic/policy.h decides, elastic/controller.cpp executes).
//
// A worker, as the machine tracks it (WorkerRecord::phase, wire/worker_vocab.h):
//
//   (slot free) --Tick: respawn due--> SpawnWorker --WorkerSpawned--> starting
//   starting --ready--> idle --PlanSeen (a member): assign--> running --ended--> idle
//   running --ended, leaving (a notice)--> leaving
//   any --WorkerExited--> exited: the exit kind is the kill reason when the machine
//        killed it, else preempted (exit code 3), success (0) or failure
//   exited --> its slot respawns (at once if it had become ready, else with back-off),
//        unless the exit was a preemption (the slot is gone), the job is over, or the
//        agent is leaving
//
// What the machine kills, on a Tick (each kill records the exit kind it reports):
//   a worker not ready within kStartupTimeoutSeconds       SIGKILL, failure
//   a worker silent for worker_heartbeat_timeout           SIGKILL, hung
//   a worker still in an older generation than the plan    SIGKILL, hung (a member of the
//     collective_timeout + slack after the plan came         new plan) or ended (a straggler)
//   workers told to exit that are still there after        SIGKILL, ended
//     kShutdownGraceSeconds
//
// What it keeps of each worker's steps (issue 32): per generation, the compute and wait
// seconds of its last kAnatomyWindow timed step reports, their medians in its WorkerRecord
// (reset when it joins a new generation), and the collective its last progress tick
// named. A figure that cannot be a measurement (CheckStepAnatomy, CheckCollectiveMark)
// is refused with a warning naming the worker and the field, and changes nothing.
//
// The agent itself: serving -> (PreemptionNotice) preempting: SIGTERM to every worker,
// slots gone; once they all left, or preemption_notice_seconds passed (the rest are
// SIGKILLed, reported preempted), PutDeparture then Finish(kPreempted). UserStop: exit
// to every worker, SIGKILL after the grace, Finish(kStopped). With exit_when_job_ends,
// Finish(kJobEnded) once the job is over and its workers are gone.
//
// Thread-safety: none; the executor calls Step from one thread.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/process.h"
#include "common/status.h"
#include "elastic/admission.h"
#include "wire/protocol.h"
#include "wire/worker_messages.h"

namespace elastrain {

// How the agent's Run (elastic/agent.h) ended: the machine decides it (Finish below).
// Defined here so that this header stands alone, free of the executor's.
enum class AgentEnd { kStopped, kJobEnded, kPreempted };

// A fresh worker must report ready within this (config load and its SGEMM probe).
inline constexpr double kStartupTimeoutSeconds = 120;
// Slack on top of collective_timeout before a straggler of an old generation is killed.
inline constexpr double kStragglerSlackSeconds = 5;
// The longest step a step report may time (a day): a larger figure is no measurement.
inline constexpr double kMaxTimedStepSeconds = 86400;
// How far compute_seconds + wait_seconds may exceed step_seconds (the worker measures
// them within the step, so only rounding): this fraction of it, plus a nanosecond.
inline constexpr double kAnatomyRounding = 1e-6;
// How long workers get to leave after an `exit` message before they are killed.
inline constexpr double kShutdownGraceSeconds = 10;
// Reports that carry only progress are put at most this often; state changes (ready,
// started, first step, ended, exit) at once.
inline constexpr double kProgressReportSeconds = 0.25;
// Exit records stay in the report this long (and at most this many), for the controller.
inline constexpr double kExitRecordSeconds = 600;
inline constexpr size_t kMaxExitRecords = 64;
// Longest back-off between respawns of a slot whose workers die before becoming ready.
inline constexpr double kMaxRespawnBackoffSeconds = 30;
// Wait before retrying a slot whose worker could not be started at all.
inline constexpr double kSpawnRetrySeconds = 5;

struct AgentMachineOptions {
  std::string id;                  // the agent's id (worker ids are "<id>-w<serial>")
  std::string host;
  std::string address = "127.0.0.1";
  int slots = 1;
  int cores = 1;                   // this host's cores, shared among the slots by default
  bool exit_when_job_ends = false;
  std::string store_url;           // the store's URL: a plan's rendezvous must be the job's there
  std::string head_public_key;     // PEM, handed to the workers (they verify the plan they read)
  std::optional<Admission> admission;  // handed to the workers (elastic/admission.h); none: not confined
};

// The settings of the job that the agent needs (from its config).
struct AgentJobSettings {
  double heartbeat_timeout = 60;   // worker_heartbeat_timeout
  double collective_timeout = 60;
  double preemption_notice = 30;   // preemption_notice_seconds
  int64_t threads_per_worker = 0;  // 0: the host's cores shared among the slots
};

// ---------------------------------------------------------------- inputs
// What the store says of the job: its spec (none: no job), whether it reached a
// terminal state, and its settings (nullopt when its config does not load: `error`).
struct JobObserved {
  std::optional<JobSpec> spec;
  bool terminal = false;
  std::optional<AgentJobSettings> settings;
  std::string error;
};
struct PlanSeen { Plan plan; };
struct StopSeen { GenerationStop stop; };
struct CommandSeen { AgentCommand command; };
struct PreemptionNotice {};       // SIGTERM or SIGINT to the agent: the host goes away
struct UserStop {};               // the agent is asked to stop (not a preemption)
struct WorkerSpawned { std::string worker; int pid = 0; };
struct SpawnFailed { std::string worker; std::string error; };
struct WorkerSaid { std::string worker; WorkerMessage message; };
struct WorkerExited { std::string worker; ProcessExit exit; };
struct ReportWritten {};          // the last PutReport reached the store
struct Registered {};             // the agent (re)registered: its report must be put again
struct Tick {};                   // time passed: health checks, respawns, deadlines, reports

using AgentInput = std::variant<JobObserved, PlanSeen, StopSeen, CommandSeen, PreemptionNotice, UserStop,
                                WorkerSpawned, SpawnFailed, WorkerSaid, WorkerExited, ReportWritten, Registered, Tick>;

// ---------------------------------------------------------------- actions
// What a worker process is. Only kElastrainWorker exists: `elastrain worker
// --channel-fd 3`, which speaks the channel (wire/worker_messages.h). Room is left for a
// second kind, an arbitrary command (a user's own training script): its launch would
// carry the command line in `args`, and since it sends no messages the machine would
// take its liveness from the process alone (no ready/progress heartbeat, no assign).
enum class WorkerKind { kElastrainWorker };

struct WorkerLaunch {
  WorkerKind kind = WorkerKind::kElastrainWorker;
  std::vector<std::string> args;               // after the program name
  std::map<std::string, std::string> env;
  std::string log_path;                        // stdout + stderr, appended
  int threads = 1;
};

// Start a worker process for `slot`; answer with WorkerSpawned or SpawnFailed.
struct SpawnWorker { int slot = 0; std::string worker; WorkerLaunch launch; };
struct SendToWorker { std::string worker; AgentMessage message; };
// Signal a worker process (SIGKILL, SIGTERM, SIGSTOP); `reason` is for the log.
struct SignalWorker { std::string worker; int pid = 0; int signal = 0; std::string reason; };
// Put this agent's registration again (its slots or its preempting flag changed).
struct UpdateRegistration { int slots = 0; bool preempting = false; };
// Put the report under the agent's lease; answer ReportWritten when it is stored.
struct PutReport { AgentReport report; };
// Put the departing agent's last report where no lease removes it (keys::Departed).
struct PutDeparture { AgentReport report; };
// Chaos: the whole host goes (the agent SIGKILLs itself; its workers die with it).
struct KillHost {};
// Chaos slow/unslow (issue 32): throttle the worker's processes to `threads` / `factor`
// CPUs (elastic/cpu_throttle.h), for `seconds` (0: until an UnslowWorker); the executor
// also unslows a worker when it exits and every worker when the agent ends.
struct SlowWorker { std::string worker; int pid = 0; double factor = 0; double seconds = 0; int threads = 1; };
struct UnslowWorker { std::string worker; };
// The controller asks for this host's health check now (check_health).
struct CheckHostHealth {};
// The agent is done: revoke the lease and return `end` from Run.
struct Finish { AgentEnd end = AgentEnd::kStopped; };

using AgentAction = std::variant<SpawnWorker, SendToWorker, SignalWorker, UpdateRegistration, PutReport, PutDeparture,
                                 KillHost, SlowWorker, UnslowWorker, CheckHostHealth, Finish>;

// Whether a step report's anatomy (compute_seconds, wait_seconds of step_seconds) can be
// a measurement: each finite, >= 0 and <= kMaxTimedStepSeconds, and compute + wait <=
// step_seconds up to rounding. InvalidArgument naming the field and its value otherwise.
Status CheckStepAnatomy(const StepMessage& m);
// Whether a progress tick's collective mark can be true: collective_seq >= -1,
// collective_kind one of the words (common/collective_kind.h, "" only while seq is -1),
// in_collective only once one was entered.
Status CheckCollectiveMark(const ProgressMessage& m);

class AgentMachine {
 public:
  explicit AgentMachine(AgentMachineOptions opt);

  // Takes one input at time `now` (wall seconds) and returns what to do, in order.
  std::vector<AgentAction> Step(const AgentInput& in, double now);

  int LiveSlots() const;                          // slots not reclaimed by a preemption
  bool preempting() const { return preempting_; }
  bool finished() const { return finished_; }
  // The worker `id` (live or recently exited), or null.
  const WorkerRecord* Worker(const std::string& id) const;
  std::vector<std::string> WorkerIds() const;

 private:
  struct LocalWorker {
    WorkerRecord rec;
    double spawned_at = 0;
    double last_msg = 0;
    bool ready_seen = false;
    ExitKind kill_kind = ExitKind::kNone;  // set when the machine killed it
    std::string kill_desc;
    int64_t assigned_gen = -1;
    int64_t stop_sent_gen = -1;
    int stop_sent_reasons = 0;
    int64_t abort_sent_gen = -1;
    bool exited = false;
    // Step anatomy of its generation's last timed steps (compute, wait), oldest first:
    // at most kAnatomyWindow; their medians are in rec (compute_seconds, wait_seconds).
    std::deque<std::pair<double, double>> timed;
    int64_t refused = 0;  // figures refused in its generation (logged: the first 3, then every 100th)
    // chaos preempt: killed if still here then; its slot returns this long after it left
    // (0: never).
    double leave_by = 0;
    double slot_returns_after = 0;
  };
  struct Slot {
    bool gone = false;  // its capacity was reclaimed (preemption)
    double returns_at = 0;  // a gone slot's capacity comes back then (chaos preempt; 0: never)
    std::string worker;
    double respawn_at = 0;
    double backoff = 0;
  };
  using Actions = std::vector<AgentAction>;

  void On(const JobObserved& in, double now, Actions* out);
  void On(const PlanSeen& in, double now, Actions* out);
  void On(const StopSeen& in, double now, Actions* out);
  void On(const CommandSeen& in, double now, Actions* out);
  void On(const PreemptionNotice& in, double now, Actions* out);
  void On(const UserStop& in, double now, Actions* out);
  void On(const WorkerSpawned& in, double now, Actions* out);
  void On(const SpawnFailed& in, double now, Actions* out);
  void On(const WorkerSaid& in, double now, Actions* out);
  void On(const WorkerExited& in, double now, Actions* out);
  void On(const ReportWritten& in, double now, Actions* out);
  void On(const Registered&, double, Actions*) { Urgent(); }
  void On(const Tick& in, double now, Actions* out);

  // Worker messages.
  void Take(LocalWorker& w, const ReadyMessage& m, double now);
  void Take(LocalWorker& w, const StartedMessage& m, double now);
  void Take(LocalWorker& w, const StepMessage& m, double now);
  void Take(LocalWorker& w, const CheckpointMessage& m, double now);
  void Take(LocalWorker& w, const ProgressMessage& m, double now);
  void Take(LocalWorker& w, const EndedMessage& m, double now);
  void Take(LocalWorker& w, const FatalMessage& m, double now);
  // Step anatomy and the collective mark (issue 32).
  void TimeStep(LocalWorker& w, const StepMessage& m);
  void ResetAnatomy(LocalWorker& w);  // a new generation: nothing timed, no collective yet
  void Refuse(LocalWorker& w, const char* what, const Status& why);

  void StartJob(const JobSpec& spec, const AgentJobSettings& settings, double now, Actions* out);
  void EndJob(double now, Actions* out);
  void Spawn(int slot, double now, Actions* out);
  void ApplyPlan(const Plan& plan, double now, Actions* out);
  void AbortOlderGenerations(const Plan& plan, Actions* out);
  void ApplyStop(const GenerationStop& stop, Actions* out);
  void Kill(LocalWorker& w, int sig, ExitKind kind, const std::string& desc, Actions* out);
  void CheckHealth(double now, Actions* out);
  void CheckDeadlines(double now, Actions* out);
  void RespawnDue(double now, Actions* out);
  void ReturnSlots(double now, Actions* out);
  // Whatever completes once workers are gone: a drain, a departure, the end of Run.
  void Settle(double now, Actions* out);
  void ReportIfDue(double now, Actions* out);
  AgentReport Report(double now);
  void Registration(Actions* out) const;

  std::string Describe(const LocalWorker& w) const;
  int WorkerThreads() const;
  JobMessage JobMessageFor(const std::string& worker_id) const;
  bool AllExited() const;
  void Urgent() { dirty_ = urgent_ = true; }

  AgentMachineOptions opt_;
  std::string job_id_;            // the job whose workers run here ("" none)
  JobSpec spec_;
  AgentJobSettings settings_;
  bool job_over_ = false;         // the job reached a terminal state (or cannot run here)
  std::optional<std::pair<JobSpec, AgentJobSettings>> next_job_;  // starts once the drain ends
  Plan plan_;
  int64_t applied_gen_ = -1;
  int64_t refused_gen_ = -1;   // the last generation whose plan CheckPlan refused (logged once)
  GenerationStop gen_stop_;
  std::vector<Slot> slots_;
  std::map<std::string, LocalWorker> workers_;  // live and recently exited, by id
  int serial_ = 0;
  double drain_deadline_ = 0;     // > 0: workers were told to exit; SIGKILL after it
  bool drain_killed_ = false;     // the drain's deadline passed and its workers were killed
  bool preempting_ = false;
  double preempt_deadline_ = 0;
  bool leave_killed_ = false;     // the workers left over after the notice were killed
  bool stopping_ = false;         // UserStop
  bool finished_ = false;
  double last_report_ = 0;
  double host_peak_flops_ = 0;    // the SGEMM ceiling a worker of this host measured (ReadyMessage)
  bool dirty_ = true, urgent_ = true;
};

}  // namespace elastrain
