// The mesh a TrainConfig asks for (its ici_* keys), for the controller's plan, the
// trainer and `elastrain plan` alike. Here, in plan/, rather than in config/: the config
// module knows nothing of meshes (it depends on common/ and model/ alone).
#pragma once

#include <cstdint>

#include "common/status.h"
#include "config/config.h"
#include "plan/mesh.h"

namespace elastrain {

// The mesh of `workers` ranks from the ici_* keys (or the automatic rule with this
// machine's memory shared among the workers).
Result<Mesh> ResolveMeshForConfig(const TrainConfig& cfg, int64_t workers);
inline Result<Mesh> ResolveMeshForConfig(const TrainConfig& cfg) { return ResolveMeshForConfig(cfg, cfg.num_workers); }

}  // namespace elastrain
