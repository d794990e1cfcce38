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
// Parses memory_snapshot_period ("N" steps, 0 for off, or "auto") into
// memory_snapshot_period and memory_snapshot_period_auto (auto: memory_snapshot_period = 1,
// the tier kept; the trainer chooses the period).
Status ResolveMemorySnapshotPeriod(TrainConfig* c);
// Resolves steps=-1 (learning_rate_schedule_steps) and learning_rate_schedule_steps=-1
// (steps) into positive counts, as MaxText does; both -1 is an error.
Status ResolveSchedule(TrainConfig* c);
// Resolves per_device_batch_size_spec into per_device_batch_size (whole rows, rounded up)
// and, for a fraction with global_batch_size=0, global_batch_size = floor(spec * max
// workers * gradient_accumulation_steps) (MaxText's); after ResolveWorkerRange. Leaves
// the spec equal to the resolved rows, so that ConfigToYaml loads back to the same batch.
Status ResolveBatch(TrainConfig* c);

}  // namespace elastrain
