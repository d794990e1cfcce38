// What follows from a TrainConfig alone, computed in one place for the controller, the
// trainer and the CLI alike. Only what needs nothing beyond the config: the mesh for a
// config is planned in plan/mesh_for_config.h, the dataset a config names opened with
// train/dataset_for_config.h, so that config/ depends on common/ and model/ alone.
#pragma once

#include <cstdint>

#include "config/config.h"

namespace elastrain {

// The global batch, fixed for the whole job whatever the world size: global_batch_size,
// or (MaxText's rule) per_device_batch_size * max_workers * gradient_accumulation_steps
// when it is 0.
int64_t GlobalBatchSize(const TrainConfig& cfg);

}  // namespace elastrain
