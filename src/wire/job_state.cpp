#include "wire/job_state.h"

namespace elastrain {

const char* JobStateName(JobState s) { return ChoiceWord(kJobStateChoices, s).data(); }

Result<JobState> ParseJobState(const std::string& name) {
  if (const std::optional<JobState> s = ParseChoice(kJobStateChoices, name)) return *s;
  return Status::Corruption(ChoiceRefusal(kJobStateChoices, "job state '" + name + "'"));
}

}  // namespace elastrain
