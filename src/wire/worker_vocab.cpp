#include "wire/worker_vocab.h"

#include <utility>

namespace elastrain {

namespace {

template <typename E>
struct Entry {
  E value;
  const char* name;
};

// One table per enum: the names on the wire, and what a parse error lists.
constexpr Entry<WorkerPhase> kWorkerPhases[] = {{WorkerPhase::kNone, ""},          {WorkerPhase::kStarting, "starting"},
                                               {WorkerPhase::kIdle, "idle"},       {WorkerPhase::kRunning, "running"},
                                               {WorkerPhase::kLeaving, "leaving"}, {WorkerPhase::kExited, "exited"}};
constexpr Entry<TrainPhase> kTrainPhases[] = {{TrainPhase::kNone, ""},         {TrainPhase::kSetup, "setup"},
                                             {TrainPhase::kRestore, "restore"}, {TrainPhase::kTrain, "train"},
                                             {TrainPhase::kEval, "eval"},       {TrainPhase::kCheckpoint, "checkpoint"},
                                             {TrainPhase::kIdle, "idle"}};
constexpr Entry<GenerationOutcome> kOutcomes[] = {{GenerationOutcome::kNone, ""},
                                                  {GenerationOutcome::kCompleted, "completed"},
                                                  {GenerationOutcome::kStopped, "stopped"},
                                                  {GenerationOutcome::kFailed, "failed"},
                                                  {GenerationOutcome::kAborted, "aborted"}};
constexpr Entry<ExitKind> kExitKinds[] = {{ExitKind::kNone, ""},          {ExitKind::kFailure, "failure"},
                                          {ExitKind::kPreempted, "preempted"}, {ExitKind::kHung, "hung"},
                                          {ExitKind::kEnded, "ended"},    {ExitKind::kSuccess, "success"}};
constexpr Entry<RestoreKind> kRestoreKinds[] = {{RestoreKind::kCheckpoint, "checkpoint"},
                                                {RestoreKind::kMemory, "memory"},
                                                {RestoreKind::kPeers, "peers"}};
constexpr Entry<CommandAction> kActions[] = {{CommandAction::kKill, "kill"},
                                             {CommandAction::kHang, "hang"},
                                             {CommandAction::kHost, "host"},
                                             {CommandAction::kTerminate, "terminate"},
                                             {CommandAction::kHung, "hung"}};

template <typename E, size_t N>
const char* NameIn(const Entry<E> (&table)[N], E v) {
  for (const auto& e : table)
    if (e.value == v) return e.name;
  return "unknown";
}

template <typename E, size_t N>
Result<E> ParseIn(const Entry<E> (&table)[N], const char* what, const std::string& name) {
  std::string names;
  for (const auto& e : table) {
    if (name == e.name) return e.value;
    if (e.name[0] != '\0') names += std::string(names.empty() ? "" : ", ") + e.name;
  }
  return Status::InvalidArgument(std::string(what) + " '" + name + "': expected one of " + names);
}

}  // namespace

const char* Name(WorkerPhase v) { return NameIn(kWorkerPhases, v); }
const char* Name(TrainPhase v) { return NameIn(kTrainPhases, v); }
const char* Name(GenerationOutcome v) { return NameIn(kOutcomes, v); }
const char* Name(ExitKind v) { return NameIn(kExitKinds, v); }
const char* Name(RestoreKind v) { return NameIn(kRestoreKinds, v); }
const char* Name(CommandAction v) { return NameIn(kActions, v); }

template <>
Result<WorkerPhase> Parse<WorkerPhase>(const std::string& n) { return ParseIn(kWorkerPhases, "worker phase", n); }
template <>
Result<TrainPhase> Parse<TrainPhase>(const std::string& n) { return ParseIn(kTrainPhases, "train phase", n); }
template <>
Result<GenerationOutcome> Parse<GenerationOutcome>(const std::string& n) { return ParseIn(kOutcomes, "outcome", n); }
template <>
Result<ExitKind> Parse<ExitKind>(const std::string& n) { return ParseIn(kExitKinds, "exit kind", n); }
template <>
Result<RestoreKind> Parse<RestoreKind>(const std::string& n) { return ParseIn(kRestoreKinds, "restore kind", n); }
template <>
Result<CommandAction> Parse<CommandAction>(const std::string& n) { return ParseIn(kActions, "command action", n); }

const char* ExitEventName(ExitKind k) {
  switch (k) {
    case ExitKind::kPreempted: return "worker_preempted";
    case ExitKind::kHung: return "worker_hung";
    case ExitKind::kEnded: return "worker_terminated";
    default: return "worker_failed";
  }
}

}  // namespace elastrain
