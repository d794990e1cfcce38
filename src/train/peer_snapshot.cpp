#include "train/peer_snapshot.h"

#include <xxhash.h>

#include <new>

#include <fmt/format.h>

#include "common/files.h"

namespace elastrain {

uint64_t SnapshotChecksum(const float* data, size_t size) { return Hash64(data, size * sizeof(float)); }

uint64_t SnapshotChecksum3(const float* a, const float* b, const float* c, size_t n) {
  XXH3_state_t* st = XXH3_createState();
  if (st == nullptr) throw std::bad_alloc();
  XXH3_64bits_reset(st);
  for (const float* p : {a, b, c}) XXH3_64bits_update(st, p, n * sizeof(float));
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

float* SnapshotSlot::Begin(int64_t step, size_t size) {
  Buffer& b = buffers_[spare()];
  b.data.resize(size);
  b.step = step;
  b.checksum = 0;
  b.verified = false;
  in_flight_ = true;
  return b.data.data();
}

Status SnapshotSlot::Commit(uint64_t checksum) {
  if (!in_flight_) return Status::FailedPrecondition("no snapshot in flight to commit");
  in_flight_ = false;
  Buffer& b = buffers_[spare()];
  const uint64_t got = SnapshotChecksum(b.data.data(), b.data.size());
  if (got != checksum)
    return Status::Corruption(fmt::format("the snapshot of step {} ({} floats) hashes to {:016x}, not the sender's "
                                        "{:016x}: torn or corrupt, discarded (step {} stays)",
                                        b.step, b.data.size(), got, checksum,
                                        complete_ < 0 ? int64_t{-1} : buffers_[complete_].step));
  b.checksum = checksum;
  b.verified = true;
  complete_ = spare();
  return Status::OK();
}

std::optional<SnapshotSlot::View> SnapshotSlot::Complete() const {
  if (complete_ < 0) return std::nullopt;
  const Buffer& b = buffers_[complete_];
  return View{b.step, b.data.data(), b.data.size(), b.checksum};
}

std::optional<SnapshotSlot::View> SnapshotSlot::Previous() const {
  if (complete_ < 0) return std::nullopt;
  const Buffer& b = buffers_[spare()];
  if (!b.verified) return std::nullopt;
  return View{b.step, b.data.data(), b.data.size(), b.checksum};
}

}  // namespace elastrain
