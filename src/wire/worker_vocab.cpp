#include "wire/worker_vocab.h"

namespace elastrain {

namespace {

template <typename E, size_t N>
Result<E> ParseIn(const std::array<Choice<E>, N>& table, const char* what, const std::string& name) {
  if (const std::optional<E> v = ParseChoice(table, name)) return *v;
  return Status::InvalidArgument(ChoiceRefusal(table, std::string(what) + " '" + name + "'"));
}

}  // namespace

const char* Name(WorkerPhase v) { return ChoiceWord(kWorkerPhaseChoices, v).data(); }
const char* Name(TrainPhase v) { return ChoiceWord(kTrainPhaseChoices, v).data(); }
const char* Name(GenerationOutcome v) { return ChoiceWord(kGenerationOutcomeChoices, v).data(); }
const char* Name(ExitKind v) { return ChoiceWord(kExitKindChoices, v).data(); }
const char* Name(RestoreKind v) { return ChoiceWord(kRestoreKindChoices, v).data(); }
const char* Name(CommandAction v) { return ChoiceWord(kCommandActionChoices, v).data(); }

template <>
Result<WorkerPhase> Parse<WorkerPhase>(const std::string& n) { return ParseIn(kWorkerPhaseChoices, "worker phase", n); }
template <>
Result<TrainPhase> Parse<TrainPhase>(const std::string& n) { return ParseIn(kTrainPhaseChoices, "train phase", n); }
template <>
Result<GenerationOutcome> Parse<GenerationOutcome>(const std::string& n) {
  return ParseIn(kGenerationOutcomeChoices, "outcome", n);
}
template <>
Result<ExitKind> Parse<ExitKind>(const std::string& n) { return ParseIn(kExitKindChoices, "exit kind", n); }
template <>
Result<RestoreKind> Parse<RestoreKind>(const std::string& n) { return ParseIn(kRestoreKindChoices, "restore kind", n); }
template <>
Result<CommandAction> Parse<CommandAction>(const std::string& n) {
  return ParseIn(kCommandActionChoices, "command action", n);
}

const char* ExitEventName(ExitKind k) {
  switch (k) {
    case ExitKind::kPreempted: return "worker_preempted";
    case ExitKind::kHung: return "worker_hung";
    case ExitKind::kEnded: return "worker_terminated";
    default: return "worker_failed";
  }
}

}  // namespace elastrain
