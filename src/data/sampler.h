// The exactly-once sampler: a pure function from (seed, step) to the sample indices of
// a global batch, and from (rank, dp) to a rank's share of it.
//
// The training stream is infinite: sample position p = step * GB + j (j < GB) lies in
// epoch p / N and reads index perm(epoch)[p % N], where perm(epoch) is a permutation of
// [0, N) seeded by (seed, epoch). So every index is used exactly once per epoch, and the
// data state is just (seed, step): a resized job that resumes at `step` with any dp
// reads exactly the samples the old one would have. GB stays fixed across resizes.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace elastrain {

// The permutation of [0, n) for `epoch`: Fisher-Yates over std::mt19937_64 seeded from
// (seed, epoch), with our own uniform draw so no standard-library distribution is
// involved; identical on every platform and compiler.
std::vector<int64_t> EpochPermutation(int64_t n, uint64_t seed, int64_t epoch);

class Sampler {
 public:
  // Preconditions (abort otherwise; callers validate the config): num_samples >= 1,
  // global_batch_size >= 1. GB may exceed N; a batch then spans epochs.
  Sampler(int64_t num_samples, int64_t global_batch_size, uint64_t seed);
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // The GB sample indices of `step` (>= 0), in batch-row order.
  std::vector<int64_t> GlobalBatch(int64_t step) const;
  // Rows ShareRange(GB, rank, dp) of GlobalBatch(step). Requires 0 <= rank < dp.
  std::vector<int64_t> RankShare(int64_t step, int rank, int dp) const;
  // [begin, end) rows of a global batch that `rank` of `dp` takes; the first GB % dp
  // ranks take one row more. Contiguous, disjoint, covering [0, GB).
  static std::pair<int64_t, int64_t> ShareRange(int64_t global_batch, int rank, int dp);
  // The epoch of the first sample of `step`.
  int64_t Epoch(int64_t step) const;

  int64_t num_samples() const { return num_samples_; }
  int64_t global_batch_size() const { return global_batch_size_; }
  uint64_t seed() const { return seed_; }

 private:
  using Perm = std::shared_ptr<const std::vector<int64_t>>;
  // Thread-safe; builds the permutation on first use under mu_ (once per epoch).
  Perm PermutationFor(int64_t epoch) const;
  // out[i] = index at stream position first + i, for i < count.
  void IndicesAt(int64_t first, int64_t count, int64_t* out) const;

  const int64_t num_samples_;
  const int64_t global_batch_size_;
  const uint64_t seed_;
  // Two slots, epoch % 2: a batch spans at most the current and next epoch when GB <= N.
  mutable std::mutex mu_;
  mutable int64_t cached_epoch_[2] = {-1, -1};  // GUARDED_BY(mu_)
  mutable Perm cached_[2];                      // GUARDED_BY(mu_)
};

}  // namespace elastrain
