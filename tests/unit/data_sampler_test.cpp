#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "data/sampler.h"

namespace elastrain {
namespace {

// Flattens GlobalBatch over `steps` steps: the sample stream in position order.
std::vector<int64_t> Stream(const Sampler& s, int64_t steps) {
  std::vector<int64_t> out;
  for (int64_t step = 0; step < steps; ++step) {
    auto b = s.GlobalBatch(step);
    out.insert(out.end(), b.begin(), b.end());
  }
  return out;
}

void ExpectExactlyOncePerEpoch(int64_t n, int64_t gb, int64_t steps) {
  Sampler s(n, gb, 1234);
  std::vector<int64_t> stream = Stream(s, steps);
  const int64_t full_epochs = static_cast<int64_t>(stream.size()) / n;
  ASSERT_GE(full_epochs, 3);
  std::vector<std::vector<int64_t>> epochs;
  for (int64_t e = 0; e < full_epochs; ++e) {
    std::vector<int64_t> chunk(stream.begin() + e * n, stream.begin() + (e + 1) * n);
    epochs.push_back(chunk);
    std::sort(chunk.begin(), chunk.end());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(chunk[i], i) << "epoch " << e << " n=" << n << " gb=" << gb;
  }
  EXPECT_NE(epochs[0], epochs[1]) << "each epoch is shuffled afresh";
}

TEST(SamplerTest, ExactlyOncePerEpochWhenBatchDoesNotDivide) {
  ExpectExactlyOncePerEpoch(10, 3, 20);
  ExpectExactlyOncePerEpoch(97, 8, 60);
  ExpectExactlyOncePerEpoch(1000, 64, 80);
}

TEST(SamplerTest, BatchLargerThanDataset) { ExpectExactlyOncePerEpoch(5, 12, 5); }

TEST(SamplerTest, DeterministicAcrossInstances) {
  Sampler a(1000, 32, 7), b(1000, 32, 7);
  for (int64_t step : {0, 1, 30, 31, 32, 500}) EXPECT_EQ(a.GlobalBatch(step), b.GlobalBatch(step)) << step;
  // Asking out of order gives the same answer as asking in order.
  Sampler c(1000, 32, 7);
  EXPECT_EQ(c.GlobalBatch(500), a.GlobalBatch(500));
  EXPECT_EQ(c.GlobalBatch(0), a.GlobalBatch(0));
}

TEST(SamplerTest, DifferentSeedsDiffer) {
  Sampler a(1000, 32, 1), b(1000, 32, 2);
  EXPECT_NE(a.GlobalBatch(0), b.GlobalBatch(0));
  EXPECT_NE(EpochPermutation(100, 1, 0), EpochPermutation(100, 1, 1));
  EXPECT_EQ(EpochPermutation(100, 1, 3), EpochPermutation(100, 1, 3));
}

TEST(SamplerTest, RankSharesUnionEqualsGlobalBatch) {
  for (int64_t gb : {1, 7, 8, 13}) {
    Sampler s(20, gb, 99);
    for (int dp = 1; dp <= 4; ++dp) {
      for (int64_t step : {0, 2, 3, 11}) {
        std::vector<int64_t> joined;
        for (int r = 0; r < dp; ++r) {
          auto share = s.RankShare(step, r, dp);
          joined.insert(joined.end(), share.begin(), share.end());
        }
        EXPECT_EQ(joined, s.GlobalBatch(step)) << "gb=" << gb << " dp=" << dp << " step=" << step;
      }
    }
  }
}

TEST(SamplerTest, ShareRangeUnevenShares) {
  using R = std::pair<int64_t, int64_t>;
  EXPECT_EQ(Sampler::ShareRange(10, 0, 4), R(0, 3));
  EXPECT_EQ(Sampler::ShareRange(10, 1, 4), R(3, 6));
  EXPECT_EQ(Sampler::ShareRange(10, 2, 4), R(6, 8));
  EXPECT_EQ(Sampler::ShareRange(10, 3, 4), R(8, 10));
  EXPECT_EQ(Sampler::ShareRange(8, 3, 4), R(6, 8));
  EXPECT_EQ(Sampler::ShareRange(2, 3, 4), R(2, 2));  // more ranks than rows: empty share
  for (int64_t gb = 0; gb < 20; ++gb)
    for (int dp = 1; dp <= 6; ++dp) {
      int64_t next = 0;
      for (int r = 0; r < dp; ++r) {
        auto [b, e] = Sampler::ShareRange(gb, r, dp);
        EXPECT_EQ(b, next);
        EXPECT_LE(e - b, gb / dp + 1);
        EXPECT_GE(e - b, gb / dp);
        next = e;
      }
      EXPECT_EQ(next, gb);
    }
}

TEST(SamplerTest, Epoch) {
  Sampler s(10, 3, 0);
  EXPECT_EQ(s.Epoch(0), 0);
  EXPECT_EQ(s.Epoch(3), 0);  // positions 9..11 start in epoch 0
  EXPECT_EQ(s.Epoch(4), 1);
  EXPECT_EQ(s.Epoch(10), 3);
}

TEST(SamplerTest, ConcurrentCallersAgree) {
  Sampler shared(5000, 48, 3), serial(5000, 48, 3);
  std::vector<std::vector<int64_t>> got(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int64_t step = t; step < 400; step += 8) {
        auto b = shared.GlobalBatch(step);
        got[t].insert(got[t].end(), b.begin(), b.end());
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) {
    std::vector<int64_t> want;
    for (int64_t step = t; step < 400; step += 8) {
      auto b = serial.GlobalBatch(step);
      want.insert(want.end(), b.begin(), b.end());
    }
    EXPECT_EQ(got[t], want);
  }
}

}  // namespace
}  // namespace elastrain
