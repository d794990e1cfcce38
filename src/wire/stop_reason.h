// Why a generation stops at a step boundary without failing. Bits, since several ranks
// may ask for different reasons in the same step (their requests are OR-ed).
#pragma once

#include <string>

namespace elastrain {

enum StopReason : int {
  kStopPreemption = 1,  // a worker got a preemption notice (SIGTERM): save and shrink
  kStopResize = 2,      // the controller wants a larger world: stop at a checkpoint boundary
  kStopUser = 4,        // `elastrain stop`: save and end the job
};
inline constexpr int kAllStopReasons[] = {kStopPreemption, kStopResize, kStopUser};

// "preemption, resize"; "none" for 0.
std::string DescribeStopReasons(int bits);

}  // namespace elastrain
