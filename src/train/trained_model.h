// A trained model in one process, for `elastrain generate` and `elastrain eval`: the
// config saved with a checkpoint (or given) and the checkpoint's parameters, read as a
// one-rank mesh reads them from the pieces of whatever mesh (data, FSDP, tensor) saved
// them (ckpt::ReadTensorSlice does the resharding, checksums included).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "config/config.h"

namespace elastrain {

// Where the model comes from. Exactly one of run_dir (its latest committed checkpoint)
// and checkpoint_dir (a step_N directory, e.g. load_parameters_path's value).
struct TrainedModelSource {
  std::string run_dir;
  std::string checkpoint_dir;
  // The config: config_path when set (a YAML file, as train takes it), else the
  // resolved config the checkpoint's manifest carries; then the key=value overrides.
  std::string config_path;
  std::vector<std::string> overrides;
};

struct TrainedModel {
  TrainConfig config;
  std::string checkpoint_dir;
  int64_t step = 0;           // the checkpoint's step
  std::vector<float> params;  // BuildParamLayout(config.model), every tensor whole
};

// NotFound for a run without a committed checkpoint or a missing directory;
// FailedPrecondition for an uncommitted checkpoint; Corruption for a damaged one (a
// checksum, a missing piece); InvalidArgument when a tensor's shape is not the config's
// model (the message names the tensor and both shapes) or the config does not load.
Result<TrainedModel> LoadTrainedModel(const TrainedModelSource& src);

}  // namespace elastrain
