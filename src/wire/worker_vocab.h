// The words the controller, the agents and the workers use about a worker: each one an
// enum with one table of words (Choice, common/choice.h) behind its Name() and Parse<E>(),
// translated only at the JSON edge (wire/vocab_json.h, used by wire/protocol.cpp and
// wire/worker_messages.cpp); the strings on the wire are the words of these tables.
//
// A worker process's lifecycle (WorkerRecord::phase, set by its agent):
//
//   starting --ready--> idle --assign--> running --ended--> idle (or leaving)
//                                                            |
//   any phase --process exit--> exited                       leaving: it got a
//                                                            preemption notice, reported
//                                                            its generation and exits
//
// How a worker ended: one table for the five sets that describe it. A generation's
// outcome is what the worker says of one generation (it lives on); an exit kind is what
// its agent says of the process. A chaos or controller command is how it was made to
// end; the controller's Fate (elastic/policy.cpp) and the event it emits follow.
//
//   what happened                          outcome    exit kind  command    Fate        event
//   ran the generation to the end          completed  -          -          kCompleted  -
//   stopped at a step boundary (saved)     stopped    -          -          kStopped    worker_preempted if leaving
//   the generation failed on it            failed     -          -          kFailed     worker_error
//   aborted: the generation lost a member  aborted    -          -          kAborted    worker_aborted
//   the process died (crash, chaos kill)   -          failure    kill       kExited     worker_failed
//   no message for worker_heartbeat_timeout, -        hung       hang, hung kExited     worker_hung
//     or no step progress (controller)
//   left after a preemption notice (3)     -          preempted  -          kExited     worker_preempted
//   killed by its agent: shutdown, or a    -          ended      terminate  kExited     worker_terminated
//     straggler of an old generation
//   exited 0 (told to exit)                -          success    -          kExited     worker_failed (if a member)
//   its host vanished (lease expired)      -          -          host       kLost       host_lost
//
// Failures counted against max_failures: exit kinds failure, hung and success of a
// member (IsFailureExit), a lost host, an outcome of failed; never preempted or ended.
#pragma once

#include <array>
#include <string>

#include "common/choice.h"
#include "common/status.h"

namespace elastrain {

// WorkerRecord::phase. kNone ("") only in a default-constructed record.
enum class WorkerPhase { kNone, kStarting, kIdle, kRunning, kLeaving, kExited };

// WorkerRecord::train_phase: what a running worker is doing (train/trainer.h on_phase).
enum class TrainPhase { kNone, kSetup, kRestore, kTrain, kEval, kCheckpoint, kIdle };

// How one generation ended on a worker (WorkerRecord::outcome, the worker's `ended`).
enum class GenerationOutcome { kNone, kCompleted, kStopped, kFailed, kAborted };

// How a worker process ended, as its agent saw it (WorkerRecord::exit_kind).
enum class ExitKind { kNone, kFailure, kPreempted, kHung, kEnded, kSuccess };

// Where a generation's state comes from (RestorePlan::kind).
enum class RestoreKind { kCheckpoint, kMemory, kPeers };

// What an agent must do (AgentCommand::action). kill, hang and host are chaos (from
// `elastrain chaos`); terminate and hung come from the controller.
//   kill:      SIGKILL the worker (its exit is a failure)
//   hang:      SIGSTOP the worker (its agent then finds it hung)
//   host:      the agent SIGKILLs itself, and so its workers (a lost host)
//   terminate: SIGKILL a straggler the controller gave up on (exit kind ended)
//   hung:      SIGKILL a worker that made no step progress (exit kind hung)
// slow/unslow: throttle a worker's CPU by AgentCommand::factor (chaos slow, issue 32);
// preempt:   a preemption notice to one worker (SIGTERM: it saves and leaves within
//            preemption_notice_seconds); its slot is gone, and comes back after
//            AgentCommand::seconds (0: never) -- spot capacity reclaimed, then returned;
// check_health: run the host's health check now and write its HealthRecord (before a
// host excluded for a gray failure is re-admitted).
enum class CommandAction { kKill, kHang, kHost, kTerminate, kHung, kSlow, kUnslow, kCheckHealth, kPreempt };

// kill, hang, host, slow, unslow and preempt: what `elastrain chaos` may ask for.
inline bool IsChaosAction(CommandAction a) {
  return a == CommandAction::kKill || a == CommandAction::kHang || a == CommandAction::kHost ||
         a == CommandAction::kSlow || a == CommandAction::kUnslow || a == CommandAction::kPreempt;
}

// One table per enum: the words on the wire, and what a parse error lists. kNone's word
// is "" (a record that has not set the field); it parses, and is not listed.
inline constexpr std::array<Choice<WorkerPhase>, 6> kWorkerPhaseChoices = {{
    {"", WorkerPhase::kNone},
    {"starting", WorkerPhase::kStarting},
    {"idle", WorkerPhase::kIdle},
    {"running", WorkerPhase::kRunning},
    {"leaving", WorkerPhase::kLeaving},
    {"exited", WorkerPhase::kExited},
}};
inline constexpr std::array<Choice<TrainPhase>, 7> kTrainPhaseChoices = {{
    {"", TrainPhase::kNone},
    {"setup", TrainPhase::kSetup},
    {"restore", TrainPhase::kRestore},
    {"train", TrainPhase::kTrain},
    {"eval", TrainPhase::kEval},
    {"checkpoint", TrainPhase::kCheckpoint},
    {"idle", TrainPhase::kIdle},
}};
inline constexpr std::array<Choice<GenerationOutcome>, 5> kGenerationOutcomeChoices = {{
    {"", GenerationOutcome::kNone},
    {"completed", GenerationOutcome::kCompleted},
    {"stopped", GenerationOutcome::kStopped},
    {"failed", GenerationOutcome::kFailed},
    {"aborted", GenerationOutcome::kAborted},
}};
inline constexpr std::array<Choice<ExitKind>, 6> kExitKindChoices = {{
    {"", ExitKind::kNone},
    {"failure", ExitKind::kFailure},
    {"preempted", ExitKind::kPreempted},
    {"hung", ExitKind::kHung},
    {"ended", ExitKind::kEnded},
    {"success", ExitKind::kSuccess},
}};
inline constexpr std::array<Choice<RestoreKind>, 3> kRestoreKindChoices = {{
    {"checkpoint", RestoreKind::kCheckpoint},
    {"memory", RestoreKind::kMemory},
    {"peers", RestoreKind::kPeers},
}};
inline constexpr std::array<Choice<CommandAction>, 9> kCommandActionChoices = {{
    {"kill", CommandAction::kKill},
    {"hang", CommandAction::kHang},
    {"host", CommandAction::kHost},
    {"terminate", CommandAction::kTerminate},
    {"hung", CommandAction::kHung},
    {"slow", CommandAction::kSlow},
    {"unslow", CommandAction::kUnslow},
    {"check_health", CommandAction::kCheckHealth},
    {"preempt", CommandAction::kPreempt},
}};

// The word of a value (its table's).
const char* Name(WorkerPhase v);
const char* Name(TrainPhase v);
const char* Name(GenerationOutcome v);
const char* Name(ExitKind v);
const char* Name(RestoreKind v);
const char* Name(CommandAction v);

// The enum value named `name`; InvalidArgument "exit kind 'x': expected one of failure,
// preempted, ..." when there is none (words come from other processes: any string).
template <typename E>
Result<E> Parse(const std::string& name);
template <> Result<WorkerPhase> Parse<WorkerPhase>(const std::string& name);
template <> Result<TrainPhase> Parse<TrainPhase>(const std::string& name);
template <> Result<GenerationOutcome> Parse<GenerationOutcome>(const std::string& name);
template <> Result<ExitKind> Parse<ExitKind>(const std::string& name);
template <> Result<RestoreKind> Parse<RestoreKind>(const std::string& name);
template <> Result<CommandAction> Parse<CommandAction>(const std::string& name);

// The event the controller emits when a member exits this way (the table above).
const char* ExitEventName(ExitKind k);
// Whether a member's exit of this kind is a failure of its generation (the cause of a
// recovery, counted against max_failures): a crash, a hang, or an exit nobody asked for.
inline bool IsFailureExit(ExitKind k) {
  return k == ExitKind::kFailure || k == ExitKind::kHung || k == ExitKind::kSuccess;
}

}  // namespace elastrain
