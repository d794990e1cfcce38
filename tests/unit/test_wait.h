// Waiting in tests for something another thread or process does: poll a condition
// until it holds or a generous deadline passes, never sleep a fixed time and hope.
// The deadline only catches a hang; a loaded machine (CI, parallel builds) may take
// many times longer than an idle one, so tests never assert how fast a wait ended.
#pragma once

#include <chrono>
#include <thread>

namespace elastrain {

inline constexpr std::chrono::milliseconds kTestWaitDeadline{10000};

// Milliseconds since `t`, for printing how long something took (and for hang guards).
inline long long MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t).count();
}

// Polls `condition` every `poll` until it returns true (then true) or `deadline`
// passes (then false, after one last look).
template <typename Condition>
bool WaitUntil(Condition condition, std::chrono::milliseconds deadline = kTestWaitDeadline,
               std::chrono::milliseconds poll = std::chrono::milliseconds(5)) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < end) {
    if (condition()) return true;
    std::this_thread::sleep_for(poll);
  }
  return condition();
}

}  // namespace elastrain
