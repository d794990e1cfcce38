// The dataset a TrainConfig names, for the trainer and for the CLI that warms the token
// cache. Here, in train/, rather than in config/: the config module knows nothing of
// datasets (it depends on common/ and model/ alone).
#pragma once

#include "config/config.h"
#include "data/dataset.h"

namespace elastrain {

// dataset_type, dataset_path, tokenizer, the token cache under
// <base_output_directory>/.cache, the resolved max_target_length, the split and the
// shuffle seed.
DatasetOptions DatasetOptionsForConfig(const TrainConfig& cfg);

}  // namespace elastrain
