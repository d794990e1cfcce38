// Failing a Gloo TCP pair from outside the collective that waits on it.
#pragma once

#include <string>

namespace gloo::transport {
class Pair;
}  // namespace gloo::transport

namespace elastrain {

// Marks `pair` failed with `why`: every operation pending on it wakes (a thread blocked in
// a Gloo collective on that peer throws IoException at once) and its socket is closed,
// which the peer sees too. Thread-safe (the pair's own lock). A pair of another transport
// is left alone; returns whether it was failed.
bool FailGlooPair(gloo::transport::Pair* pair, const std::string& why);

}  // namespace elastrain
