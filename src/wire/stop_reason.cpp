#include "wire/stop_reason.h"

namespace elastrain {

std::string DescribeStopReasons(int bits) {
  std::string out;
  for (int bit : kAllStopReasons) {
    if (!(bits & bit)) continue;
    out += out.empty() ? "" : ", ";
    out += bit == kStopPreemption ? "preemption" : bit == kStopResize ? "resize" : "user stop";
  }
  return out.empty() ? "none" : out;
}

}  // namespace elastrain
