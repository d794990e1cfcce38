// Range and consistency checks of a loaded TrainConfig (the model shapes are checked by
// ModelConfig::Validate during resolution). Internal to src/config.
#pragma once

#include "config/config.h"

namespace elastrain {

// The first problem found, one line naming the key and its value, e.g.
// "steps=-3: expected a positive integer".
Status ValidateTrainConfig(const TrainConfig& c);
// Parses num_workers ("N" or "MIN:MAX") into min_workers, max_workers and num_workers
// (= max_workers).
Status ResolveWorkerRange(TrainConfig* c);
// Parses checkpoint_period ("N" steps or "auto") into checkpoint_period and
// checkpoint_period_auto (auto: checkpoint_period = checkpoint_period_min).
Status ResolveCheckpointPeriod(TrainConfig* c);

}  // namespace elastrain
