// The launched worker's decisions (launch/launched_worker.h), as a state machine:
// Step(input, now) -> actions, built like the agent's (elastic/agent_machine.h). It owns
// what the worker knows of its generation, its program and its warm spare; it runs no
// process, reads no clock, no channel and no store (time is an input), so every path (a
// new generation, a resize, a stale abort, a spare, the hello grace, a stop's deadlines,
// a preemption, each way a program ends) is unit-tested without processes
// (tests/unit/launch_machine_test.cpp). launch/launched_worker.cpp is its executor: it
// polls the agent's and the programs' channels, reaps children, spawns, signals, talks
// to the rendezvous store and writes the run's logs, feeds what it sees in as inputs and
// carries out the actions, in order. An action that has an answer (StartProgram,
// ResolveMaster, PublishMaster, AssignSpare, ProbeListening) is answered with its input
// at once, before the actions after it run.
//
// The worker (LaunchState):
//
//   idle --Assign g--> awaiting_master: ResolveMaster (rank 0 picks a port; the others
//     wait for it, giving up (Cancelled) when the agent aborts g, plans a newer one, says
//     exit, or a preemption notice comes)
//   awaiting_master --resolved--> a warm spare is handed the rank (AssignSpare; a warm
//     rank 0 publishes once its port listens, up to kListenWaitSeconds) --> running
//                   --resolved, no spare--> starting: rank 0 publishes, StartProgram
//                   --failed or cancelled--> idle (ended: failed; cancelled: aborted, or
//                     stopped when preempted)
//   starting --ProgramStarted--> running   --ProgramStartFailed--> idle (ended: failed)
//   running --Stop g (resize, user)--> stopping: control message to the program; a
//     program that talks must exit by the deadline (preemption_notice_seconds): SIGTERM
//     then, SIGKILL kKillGraceSeconds later; one that does not talk gets SIGTERM once it
//     is kHelloGraceSeconds old (the hello grace) and SIGKILL at the deadline
//   running/stopping --Abort g' >= g--> SIGKILL (ended: aborted)
//   running/stopping --Assign g' > g--> replacing: SIGKILL; once it exited (or after
//     kReplaceWaitSeconds) the old one ends (aborted) and g' starts as above
//   running/stopping --the program exits--> idle, ended: aborted (killed for an abort or
//     a newer generation), stopped (a stop was asked: resize, user, preemption),
//     completed (exit 0) or failed (its exit code or signal); a warm spare that was
//     handed the rank and died without ever calling wait_for_assignment() is restarted
//     cold once instead (warm starts are then off for this worker)
//   any --PreemptionNotice--> the spare is killed, the program gets SIGTERM (to the whole
//     group when this worker leads it) and SIGKILL at the notice's end; no new rank is
//     taken; once no generation runs: Exit(kExitPreempted)
//   any --Exit from the agent, or the agent gone--> Exit(kExitSuccess)
//
// A program's step reports go to the agent as StepMessages with their anatomy: compute
// is the program's compute_seconds when it gives it, else the whole step; wait is the
// rest. The first step of a program that gives no step_seconds spans its start-up and is
// sent untimed; a program that sends no step reports gets no anatomy at all.
//
// The spare (warm_spares): started at Begin and again once a generation trains (its first
// step report), kSpareDelaySeconds after it started, or when it ends; one that dies
// before it is handed a rank turns warm starts off. On Tick the machine also sends the
// agent its liveness ticks (kTickSeconds; a program that said hello vouches for itself:
// silent for kProgramSilenceSeconds, no tick), and asks for what finished programs left
// behind to be swept (at most every kOrphanSweepSeconds).
//
// Thread-safety: none; the executor calls Step from one thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/process.h"
#include "common/status.h"
#include "cost/checkpoint_period.h"
#include "wire/events.h"
#include "wire/program_messages.h"
#include "wire/rendezvous.h"
#include "wire/worker_messages.h"

// In a namespace of its own: the agent's machine has inputs of the same names (Tick,
// PreemptionNotice), and both are linked into one binary.
namespace elastrain::launch {

inline constexpr double kTickSeconds = 0.25;         // liveness ticks to the agent, as elastrain workers send
inline constexpr double kProgramSilenceSeconds = 3;  // a program that talks: no tick once it is this silent
inline constexpr double kKillGraceSeconds = 5;       // after the SIGTERM of a stop's deadline, before SIGKILL
inline constexpr double kHelloGraceSeconds = 2;      // a program that has not said hello by this age does not talk
inline constexpr double kSpareDelaySeconds = 10;     // longest wait before the next spare starts
inline constexpr double kListenWaitSeconds = 3;      // how long a warm rank 0 gets to listen before its address is published
inline constexpr double kListenProbeSeconds = 0.01;  // how often it is looked at meanwhile
inline constexpr double kOrphanSweepSeconds = 1;
inline constexpr double kReplaceWaitSeconds = 1;     // a SIGKILLed program of an older generation: gone within this

struct LaunchMachineOptions {
  std::string worker_id;
  std::string program;                // the program's name (argv[0]), for messages
  std::string run_dir;                // ELASTRAIN_RUN_DIR; metrics.jsonl and events.jsonl from rank 0
  std::string run_id;                 // TORCHELASTIC_RUN_ID (run_name)
  int threads = 1;                    // OMP_NUM_THREADS
  bool warm_spares = false;
  bool leads_process_group = true;    // a preemption's SIGTERM goes to the whole group
  double preemption_notice_seconds = 30;
  double collective_timeout = 60;     // how long a rank waits for rank 0's address
  int64_t log_period = 1;             // rank 0 writes every log_period-th step to metrics.jsonl
  int64_t max_failures = 0, min_workers = 1, max_workers = 1;
  int64_t checkpoint_period = 0;      // the fixed period (checkpoint_period_auto off)
  bool checkpoint_period_auto = false;
  double checkpoint_mtti_prior_seconds = 0;
  int64_t checkpoint_period_min = 1, checkpoint_period_max = 1;
};

enum class LaunchState {
  kIdle,            // no generation (a spare may wait)
  kAwaitingMaster,  // a generation's MASTER_ADDR:MASTER_PORT is being resolved
  kStarting,        // its program is being started
  kRunning,         // its program runs
  kStopping,        // its program runs and was asked to stop (resize, user, preemption)
  kReplacing,       // a newer generation came: the old program was killed, its exit awaited
  kExited,          // Exit was returned; the machine takes no more input
};
const char* Name(LaunchState s);

// ---------------------------------------------------------------- inputs
struct Begin { int pid = 0; };                      // the worker runs: ready, and the first spare
struct AgentSaid { AgentMessage message; };
struct AgentGone {};                                // the agent's channel closed
struct PreemptionNotice {};                         // SIGTERM to the worker
// The answer to ResolveMaster (rank 0: the port it picked; the others: rank 0's address).
// status: Cancelled when the wait gave up (see KeepAwaitingMaster), DeadlineExceeded
// after collective_timeout, anything else a fault.
struct MasterResolved { int64_t generation = 0; Status status; std::string address; int port = 0; };
struct MasterPublished { int64_t generation = 0; Status status; };
struct ProgramStarted { int program = 0; int pid = 0; };
struct ProgramStartFailed { int program = 0; Status status; };
struct SpareAssigned { int program = 0; Status status; };   // the answer to AssignSpare
struct ListenProbed { int64_t generation = 0; bool listening = false; bool runs = true; };
struct ProgramSaid { int program = 0; ProgramMessage message; };
struct ProgramChannelClosed { int program = 0; };   // end of file or garbage: no longer read
// Any child (a program's last words were read first). stderr_tail: a program's last
// lines on stderr, printable, joined by " | " (common/output_tail.h); quoted by the error
// of a generation it fails.
struct ProcessReaped { int pid = 0; ProcessExit exit; std::string stderr_tail; };
struct Tick {};                                     // time passed: deadlines, ticks, spares, sweeps

using LaunchInput = std::variant<Begin, AgentSaid, AgentGone, PreemptionNotice, MasterResolved, MasterPublished,
                                 ProgramStarted, ProgramStartFailed, SpareAssigned, ListenProbed, ProgramSaid,
                                 ProgramChannelClosed, ProcessReaped, Tick>;

// ---------------------------------------------------------------- actions
struct SendToAgent { WorkerMessage message; };
// Spawn the program in this worker's process group, with `env` plus ELASTRAIN_CHANNEL_FD
// and ELASTRAIN_WARM; answer ProgramStarted or ProgramStartFailed.
struct StartProgram { int program = 0; bool spare = false; std::map<std::string, std::string> env; };
// Hand the rank's environment to a waiting spare (an `assign` line); answer SpareAssigned.
struct AssignSpare { int program = 0; std::map<std::string, std::string> env; };
struct TellProgram { int program = 0; ProgramControl control; };
struct SignalProgram { int program = 0; int pid = 0; int signal = 0; std::string why; };
struct SignalGroup { int signal = 0; std::string why; };   // this worker's whole process group
// Open the generation's rendezvous; rank 0 picks a free port on `address`, the others
// wait (up to `timeout_seconds`, asking KeepAwaitingMaster between looks); answer
// MasterResolved.
struct ResolveMaster {
  int64_t generation = 0;
  int rank = 0;
  std::string address;
  RendezvousAddress rendezvous;
  double timeout_seconds = 0;
};
struct PublishMaster { int64_t generation = 0; };           // answer MasterPublished
struct ProbeListening { int64_t generation = 0; int port = 0; int pid = 0; };  // answer ListenProbed
struct OpenRunLogs {};                                     // metrics.jsonl and events.jsonl (rank 0)
struct WriteMetrics { nlohmann::json record; };
// Every event of the launched worker goes through this one action (one place to type them).
using LaunchEvent = std::variant<CheckpointSavedEvent, CheckpointPeriodChangedEvent>;  // wire/events.h
struct EmitEvent { LaunchEvent event; };
struct SweepOrphans { std::vector<int> keep; };             // kill children but these
struct Exit { int code = 0; };                              // wire/exit_codes.h

using LaunchAction = std::variant<SendToAgent, StartProgram, AssignSpare, TellProgram, SignalProgram, SignalGroup,
                                  ResolveMaster, PublishMaster, ProbeListening, OpenRunLogs, WriteMetrics, EmitEvent,
                                  SweepOrphans, Exit>;

// Whether `m` makes waiting for generation `generation`'s rank 0 pointless: an exit, an
// abort of it or later, or a newer plan.
bool SupersedesGeneration(const AgentMessage& m, int64_t generation);

class LaunchMachine {
 public:
  explicit LaunchMachine(LaunchMachineOptions opt);

  // Takes one input at time `now` (wall seconds) and returns what to do, in order.
  std::vector<LaunchAction> Step(const LaunchInput& in, double now);

  LaunchState state() const;
  // While a rank waits for rank 0's address: false once a preemption notice came or one
  // of `queued` (what the agent sent meanwhile, not yet stepped) supersedes the wait.
  bool KeepAwaitingMaster(const std::deque<AgentMessage>& queued) const;
  // Whether agent messages are taken now (not while replacing: they wait, in order).
  bool TakesAgentMessages() const { return !replace_; }
  // When the next Tick has something to do (wall seconds).
  double NextDeadline(double now) const;
  bool preempted() const { return preempted_; }
  bool warm_starts_off() const { return warm_failed_; }
  int64_t period() const { return tuner_.period(); }

 private:
  struct Program {
    int id = 0;
    int pid = -1;
    double started = 0;       // for a spare handed a rank: when it got it
    double last_msg = 0;
    bool connected = false;   // said hello
    bool ch_open = true;      // its channel is read
    bool from_spare = false;  // a spare that was handed a rank
    bool waited = false;      // it said "waiting": it calls wait_for_assignment()
    bool killed = false;      // this worker sent it SIGKILL
    bool exited = false;
    ProcessExit exit;
    std::string stderr_tail;  // once exited
  };
  enum class Phase { kAwaitingMaster, kStarting, kRunning };
  struct Generation {
    AssignMessage a;
    Phase phase = Phase::kAwaitingMaster;
    std::map<std::string, std::string> env;
    std::optional<Program> prog;
    int master_port = 0;
    double listen_until = 0;   // > 0: a warm rank 0's address is published once it listens or then
    int64_t first_step = -1, last_step = -1;
    double last_step_time = 0, started = 0;
    // The collective the program said it entered last (its channel's collective
    // messages): the liveness ticks carry it, and a hang's diagnosis reads it.
    int64_t collective_seq = -1;
    std::string collective_kind;
    bool in_collective = false;
    int stop_reasons = 0;      // kStop* bits asked for
    double stop_deadline = 0;  // > 0: the stop must be done by then (the program is told)
    double term_at = 0;        // > 0: SIGTERM then (unless sent)
    double kill_at = 0;        // > 0: SIGKILL then (unless sent)
    bool term_sent = false, kill_sent = false;
    bool aborted = false;
    int restarting = 0;        // the id of the cold restart being started (0: none)
    int64_t StartStep() const { return first_step >= 0 ? std::max<int64_t>(first_step - 1, 0) : -1; }
  };
  struct Replace { AssignMessage next; double until = 0; };
  enum class Pending { kNone, kSpare };
  using Actions = std::vector<LaunchAction>;

  void On(const Begin& in, double now, Actions* out);
  void On(const AgentSaid& in, double now, Actions* out);
  void On(const AgentGone& in, double now, Actions* out);
  void On(const PreemptionNotice& in, double now, Actions* out);
  void On(const MasterResolved& in, double now, Actions* out);
  void On(const MasterPublished& in, double now, Actions* out);
  void On(const ProgramStarted& in, double now, Actions* out);
  void On(const ProgramStartFailed& in, double now, Actions* out);
  void On(const SpareAssigned& in, double now, Actions* out);
  void On(const ListenProbed& in, double now, Actions* out);
  void On(const ProgramSaid& in, double now, Actions* out);
  void On(const ProgramChannelClosed& in, double now, Actions* out);
  void On(const ProcessReaped& in, double now, Actions* out);
  void On(const Tick& in, double now, Actions* out);

  void Take(const AssignMessage& m, double now, Actions* out);
  void Take(const StopMessage& m, double now, Actions* out);
  void Take(const AbortMessage& m, double now, Actions* out);
  void Take(const ExitMessage&, double, Actions*) { exit_ = true; }
  void Take(const JobMessage&, double, Actions*) {}

  void StartGeneration(const AssignMessage& a, double now, Actions* out);
  void StartCold(double now, Actions* out);
  void Trains(double now, Actions* out);  // the generation's program runs: logs, period, control
  void Publish(Actions* out);
  void Failed(const Status& st, Actions* out);
  void StartSpare(Actions* out);
  void RequestStop(int reason, double now, Actions* out);
  void Signal(Program& p, int sig, const std::string& why, Actions* out);
  void OnProgramMessage(Program& p, const ProgramMessage& m, double now, Actions* out);
  void OnStep(const ProgramStep& s, double now, Actions* out);
  void OnCheckpoint(const ProgramCheckpoint& c, double now, Actions* out);
  bool RestartCold(Actions* out);
  void EndGeneration(double now, Actions* out);
  void CheckDeadlines(double now, Actions* out);
  void TickIfDue(double now, Actions* out);
  void SendControl(Actions* out);
  bool NotePeriodChange(const std::optional<CheckpointPeriodChange>& change, Actions* out);
  void Settle(Actions* out);
  Program* Find(int id);
  Program NewProgram(int pid, double now);

  LaunchMachineOptions opt_;
  CheckpointPeriodTuner tuner_;
  std::optional<Program> spare_;
  std::optional<Generation> gen_;
  std::optional<Replace> replace_;
  int next_id_ = 1;
  int pending_spare_ = 0;         // the id of the spare being started (0: none)
  int64_t last_generation_ = -1;  // the newest generation this worker took part in
  bool warm_failed_ = false;      // a spare died before taking a rank: later generations start cold
  bool exit_ = false, preempted_ = false, exited_ = false;
  bool logs_open_ = false;
  double last_tick_ = 0, last_sweep_ = 0, sweep_due_ = 0;
  double spare_due_ = 0;          // > 0: start the next spare then
};

}  // namespace elastrain::launch
