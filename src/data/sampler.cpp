#include "data/sampler.h"

#include <cstdlib>
#include <numeric>
#include <random>

#include "common/files.h"
#include "common/log.h"

namespace elastrain {

namespace {

// Uniform in [0, bound) by rejection: drop the low values that make x % bound biased.
uint64_t UniformBelow(std::mt19937_64& rng, uint64_t bound) {
  const uint64_t threshold = (0 - bound) % bound;
  for (;;) {
    const uint64_t x = rng();
    if (x >= threshold) return x % bound;
  }
}

[[noreturn]] void Fail(const char* what) {
  LOG_ERROR("Sampler: broken precondition: {}", what);
  std::abort();
}

}  // namespace

std::vector<int64_t> EpochPermutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  std::mt19937_64 rng(SplitMix64(seed ^ SplitMix64(static_cast<uint64_t>(epoch) + 0x5eed)));
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(UniformBelow(rng, static_cast<uint64_t>(i + 1)));
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

Sampler::Sampler(int64_t num_samples, int64_t global_batch_size, uint64_t seed)
    : num_samples_(num_samples), global_batch_size_(global_batch_size), seed_(seed) {
  if (num_samples < 1) Fail("num_samples >= 1");
  if (global_batch_size < 1) Fail("global_batch_size >= 1");
}

Sampler::Perm Sampler::PermutationFor(int64_t epoch) const {
  std::lock_guard<std::mutex> lock(mu_);
  const int slot = static_cast<int>(epoch % 2);
  if (cached_epoch_[slot] != epoch) {
    cached_[slot] = std::make_shared<const std::vector<int64_t>>(EpochPermutation(num_samples_, seed_, epoch));
    cached_epoch_[slot] = epoch;
  }
  return cached_[slot];
}

void Sampler::IndicesAt(int64_t first, int64_t count, int64_t* out) const {
  int64_t i = 0;
  while (i < count) {
    const int64_t p = first + i;
    const int64_t epoch = p / num_samples_;
    Perm perm = PermutationFor(epoch);
    // Take every position of this epoch in one go.
    const int64_t epoch_end = (epoch + 1) * num_samples_;
    for (; i < count && first + i < epoch_end; ++i) out[i] = (*perm)[(first + i) % num_samples_];
  }
}

std::vector<int64_t> Sampler::GlobalBatch(int64_t step) const {
  if (step < 0) Fail("step >= 0");
  std::vector<int64_t> out(static_cast<size_t>(global_batch_size_));
  IndicesAt(step * global_batch_size_, global_batch_size_, out.data());
  return out;
}

std::vector<int64_t> Sampler::RankShare(int64_t step, int rank, int dp) const {
  if (step < 0) Fail("step >= 0");
  auto [begin, end] = ShareRange(global_batch_size_, rank, dp);
  std::vector<int64_t> out(static_cast<size_t>(end - begin));
  IndicesAt(step * global_batch_size_ + begin, end - begin, out.data());
  return out;
}

std::pair<int64_t, int64_t> Sampler::ShareRange(int64_t global_batch, int rank, int dp) {
  if (dp < 1 || rank < 0 || rank >= dp) Fail("0 <= rank < dp");
  if (global_batch < 0) Fail("global_batch >= 0");
  const int64_t base = global_batch / dp, extra = global_batch % dp;
  const int64_t begin = rank * base + std::min<int64_t>(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

int64_t Sampler::Epoch(int64_t step) const { return step * global_batch_size_ / num_samples_; }

}  // namespace elastrain
