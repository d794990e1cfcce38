// One shard's copy in a holder's RAM (the RAM tier, issue #18; plan/ram_tier.h decides
// who holds what), double-buffered: a snapshot in flight is written into the spare
// buffer and becomes the complete one only when Commit finds its checksum right, so a
// copy torn by its sender's death (no Commit, or a wrong checksum) is never used and
// never replaces the last complete one.
//
//   SnapshotSlot slot;
//   float* dst = slot.Begin(step, n);        // receive n floats into dst ...
//   Status st = slot.Commit(sender_checksum); // ... then flip if they hash right
//   if (auto c = slot.Complete()) use(c->step, c->data, c->size);
//
// Not thread-safe: one owner thread (the snapshot receiver) writes and reads it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "common/status.h"

namespace elastrain {

// The checksum a sender computes over its shard and a holder verifies (XXH3).
uint64_t SnapshotChecksum(const float* data, size_t size);
// The same checksum over the concatenation of three buffers of n floats each (a sender's
// params, adam_m and adam_v, which a holder stores back to back).
uint64_t SnapshotChecksum3(const float* a, const float* b, const float* c, size_t n);

class SnapshotSlot {
 public:
  struct View {
    int64_t step;
    const float* data;
    size_t size;
    uint64_t checksum;
  };

  // The spare buffer, sized `size` (the shard size the layout gives, never a count a peer
  // sent), for the snapshot of `step`; an earlier Begin without
  // Commit is abandoned. The complete snapshot is untouched.
  float* Begin(int64_t step, size_t size);
  // The spare becomes the complete snapshot if its contents hash to `checksum`; otherwise
  // it is discarded (Corruption naming the step), and the complete one stays.
  Status Commit(uint64_t checksum);
  // Forgets the snapshot in flight, if any (its sender died).
  void Abandon() { in_flight_ = false; }

  std::optional<View> Complete() const;
  // The complete snapshot before the current one, while its buffer has not been reused:
  // a commit keeps it until the next Begin. A restore may need it when a failure tore
  // another shard's newer copy (every shard of one step must survive).
  std::optional<View> Previous() const;
  bool in_flight() const { return in_flight_; }

 private:
  struct Buffer {
    std::vector<float> data;
    int64_t step = -1;
    uint64_t checksum = 0;
    bool verified = false;  // its contents hashed right at Commit and were not touched since
  };
  Buffer buffers_[2];
  int complete_ = -1;  // index of the complete buffer, -1: none yet
  bool in_flight_ = false;
  int spare() const { return complete_ == 0 ? 1 : 0; }
};

}  // namespace elastrain
