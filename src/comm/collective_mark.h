// Which collective a worker is in, and how long its collectives have blocked it: one
// CollectiveTracker per worker process, shared by all of its groups of a generation
// (GroupOptions::tracker). Issue 32:
//   - a hang names the rank behind: every rank counts the collectives it entered, so the
//     rank whose count is lowest, or that is not inside the collective the others wait
//     in, is the one holding them up (WorkerRecord::collective_seq, _kind, in_collective);
//   - step anatomy: the seconds a step spent blocked in collectives (waiting for peers,
//     and the transfers themselves) against the rest of it (compute).
// The counts of two ranks are comparable because every rank of a generation enters the
// same collectives in the same order (process_group.h); a group of only some of the ranks
// (the restore-from-memory transfer) and a group driven by a thread of its own (the RAM
// tier's copies) are connected without the tracker for that reason.
//
// Cheap enough to stay on always: one relaxed atomic store on entering, one store and
// one add on leaving; no lock, no allocation. Thread-safety: one thread at a time enters
// and leaves collectives (the trainer's); Mark() and wait_seconds() may be read from any
// thread at any time (the worker's progress tick reads Mark() while the trainer is
// blocked inside a collective), and see a consistent (seq, kind, inside) triple.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "common/collective_kind.h"  // CollectiveKind and its words

namespace elastrain {

// Where a worker stands: the collective it entered last.
struct CollectiveMark {
  int64_t seq = -1;  // collectives entered since Reset, counted from 0 (-1: none)
  CollectiveKind kind = CollectiveKind::kNone;
  bool inside = false;  // it has not left that collective yet
};

class CollectiveTracker {
 public:
  CollectiveTracker() = default;
  CollectiveTracker(const CollectiveTracker&) = delete;
  CollectiveTracker& operator=(const CollectiveTracker&) = delete;

  // Counts from 0 again: a new generation. Call when no group is inside a collective.
  void Reset() {
    word_.store(0, std::memory_order_relaxed);
    wait_ns_.store(0, std::memory_order_relaxed);
  }
  // A group enters a collective of `kind`: the next sequence number, inside.
  void Enter(CollectiveKind kind) {
    const uint64_t next = (word_.load(std::memory_order_relaxed) >> kSeqShift) + 1;
    word_.store(next << kSeqShift | static_cast<uint64_t>(kind) << 1 | 1, std::memory_order_relaxed);
  }
  // It left that collective (completed or failed) after `blocked`.
  void Leave(std::chrono::nanoseconds blocked) {
    word_.store(word_.load(std::memory_order_relaxed) & ~uint64_t{1}, std::memory_order_relaxed);
    wait_ns_.store(wait_ns_.load(std::memory_order_relaxed) + blocked.count(), std::memory_order_relaxed);
  }
  CollectiveMark Mark() const {
    const uint64_t w = word_.load(std::memory_order_relaxed);
    return {static_cast<int64_t>(w >> kSeqShift) - 1, static_cast<CollectiveKind>((w >> 1) & 0x7F), (w & 1) != 0};
  }
  // Seconds spent inside collectives since Reset (the one in progress not included).
  double wait_seconds() const { return static_cast<double>(wait_ns_.load(std::memory_order_relaxed)) * 1e-9; }

 private:
  // One word, so that a reader never pairs one collective's number with another's kind:
  // bit 0 inside, bits 1..7 the kind, bits 8..63 the sequence number + 1 (0: none).
  static constexpr int kSeqShift = 8;
  std::atomic<uint64_t> word_{0};
  std::atomic<int64_t> wait_ns_{0};
};

}  // namespace elastrain
