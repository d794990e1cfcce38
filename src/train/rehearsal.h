// The config keys fail_at_step, fail_rank and fail_mode: a front-end of the fault points
// (common/fault.h, docs/faults.md). fail_mode picks the point, fail_at_step and fail_rank
// its conditions; the scaling policy arms the rehearsal for the generations before it
// first fires (once per job: RunPlan::inject_failure).
#pragma once

#include <vector>

#include "common/fault.h"
#include "config/config.h"

namespace elastrain {

// fail_mode=kill -> kill_after_step@rank=<fail_rank>:step=<fail_at_step>, and so on; none
// when fail_at_step is 0.
std::vector<fault::Fault> RehearsalFaults(const TrainConfig& cfg);

// Arms RehearsalFaults(cfg) in this process when `armed` (this generation's
// inject_failure), and disarms them otherwise.
void ArmRehearsal(const TrainConfig& cfg, bool armed);

}  // namespace elastrain
