// Before anything starts: a run directory whose checkpoint is of another model (or
// another sequence length or dataset) is refused once, as a configuration error naming
// both, instead of failing every worker's restore until max_failures is spent.
#pragma once

#include "common/status.h"
#include "config/config.h"

namespace elastrain {

// OK when nothing would be restored (no committed checkpoint in the run directory and no
// load_full_state_path / load_parameters_path), or what would be restored has every
// tensor of cfg's model at its shape, and (a full state) the same max_target_length,
// dataset_type and dataset_path. Otherwise InvalidArgument naming the checkpoint, the
// first difference (both values) and the ways out. An unreadable checkpoint is left to
// the restore, which falls back or reports it.
Status CheckResumeMatchesConfig(const TrainConfig& cfg);

}  // namespace elastrain
