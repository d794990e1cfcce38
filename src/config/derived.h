// What follows from a TrainConfig alone, computed in one place for the controller, the
// trainer and the CLI alike.
#pragma once

#include <cstdint>

#include "comm/mesh.h"
#include "common/status.h"
#include "config/config.h"
#include "data/dataset.h"

namespace elastrain {

// The mesh of `workers` ranks from the ici_* keys (or the automatic rule with this
// machine's memory shared among the workers).
Result<Mesh> ResolveMeshForConfig(const TrainConfig& cfg, int64_t workers);
inline Result<Mesh> ResolveMeshForConfig(const TrainConfig& cfg) { return ResolveMeshForConfig(cfg, cfg.num_workers); }

// The global batch, fixed for the whole job whatever the world size: global_batch_size,
// or (MaxText's rule) per_device_batch_size * max_workers * gradient_accumulation_steps
// when it is 0.
int64_t GlobalBatchSize(const TrainConfig& cfg);

// The dataset the config names (dataset_type, dataset_path, tokenizer, the token cache
// under <base_output_directory>/.cache, the resolved max_target_length, the split and
// the shuffle seed), for the trainer and for the CLI that warms the token cache.
DatasetOptions DatasetOptionsForConfig(const TrainConfig& cfg);

}  // namespace elastrain
