// The project's clocks. Wall time (seconds since the epoch) is the time base of every
// record, event and report, so that a restarted controller or another host reads the
// same instants; intervals inside one process use std::chrono::steady_clock.
#pragma once

#include <chrono>

namespace elastrain {

inline double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Seconds of steady time since t0.
inline double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace elastrain
