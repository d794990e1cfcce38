// The FSDP unit hooks' contract (Transformer::UnitHooks) and the buffer they drive
// (ReleasableBuffer): TrainState maps a unit's gradient pages at grads_begin, so the
// model must not write a unit's gradients before it, and must have written them by
// grads_ready; mapping pages keeps what they hold.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "train/train_state.h"
#include "transformer/transformer.h"

namespace elastrain {
namespace {

struct UnitLog {
  std::vector<std::string> events;  // "begin 3", "ready 3", ...
  std::vector<std::string> errors;
};

void CheckGradientHooks(const char* preset, RematPolicy remat) {
  ModelConfig cfg = ModelPreset(preset).value();
  const int64_t B = 2, T = 8;
  Transformer<float> model(cfg, B, T, remat);
  const ParamLayout& lay = model.layout();
  int64_t shard_size = 0;
  const std::vector<FsdpUnit> units = FsdpUnits(lay, 1, 0, &shard_size);
  ASSERT_EQ(units.size(), static_cast<size_t>(cfg.num_layers + 2));
  std::vector<float> p(lay.total), g(lay.total, 0.f);
  InitParams(cfg, lay, 1, p.data());
  std::mt19937_64 rng(5);
  std::vector<int32_t> inputs(B * T), targets(B * T);
  for (auto& x : inputs) x = static_cast<int32_t>(rng() % cfg.vocab_size);
  for (auto& x : targets) x = static_cast<int32_t>(rng() % cfg.vocab_size);

  UnitLog log;
  auto zeros = [&](int u) {
    return std::all_of(g.begin() + units[u].begin, g.begin() + units[u].end, [](float x) { return x == 0.f; });
  };
  Transformer<float>::UnitHooks hooks;
  hooks.acquire = [](int) { return Status::OK(); };
  hooks.release = [](int) { return Status::OK(); };
  hooks.grads_begin = [&](int u) {
    log.events.push_back("begin " + std::to_string(u));
    if (!zeros(u)) log.errors.push_back("unit " + std::to_string(u) + " was written before grads_begin");
    return Status::OK();
  };
  hooks.grads_ready = [&](int u) {
    log.events.push_back("ready " + std::to_string(u));
    if (zeros(u)) log.errors.push_back("unit " + std::to_string(u) + " has no gradient at grads_ready");
    return Status::OK();
  };
  model.SetUnitHooks(hooks);
  model.ForwardBackward(p.data(), g.data(), inputs.data(), targets.data(), B, 1.0f);

  EXPECT_TRUE(log.errors.empty()) << preset << ": " << ::testing::PrintToString(log.errors);
  for (int u = 0; u < static_cast<int>(units.size()); ++u) {
    const auto begin = std::find(log.events.begin(), log.events.end(), "begin " + std::to_string(u));
    const auto ready = std::find(log.events.begin(), log.events.end(), "ready " + std::to_string(u));
    EXPECT_EQ(std::count(log.events.begin(), log.events.end(), "begin " + std::to_string(u)), 1) << preset << " unit " << u;
    ASSERT_NE(ready, log.events.end()) << preset << " unit " << u;
    EXPECT_LT(begin - log.events.begin(), ready - log.events.begin()) << preset << " unit " << u;
  }
}

TEST(FsdpHooks, LlamaBeginsEachUnitsGradientsBeforeWritingThem) { CheckGradientHooks("tiny", RematPolicy::kNone); }
TEST(FsdpHooks, TiedGpt2BeginsTheEmbeddingBeforeTheHead) { CheckGradientHooks("tiny-gpt2", RematPolicy::kNone); }
TEST(FsdpHooks, RematBeginsEachUnitsGradientsBeforeWritingThem) { CheckGradientHooks("tiny", RematPolicy::kFull); }

// How many of the pages of [p, p+bytes) are in memory (mincore).
size_t ResidentPages(const void* p, size_t bytes) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((bytes + page - 1) / page);
  EXPECT_EQ(::mincore(const_cast<void*>(p), bytes, in.data()), 0);
  return static_cast<size_t>(std::count_if(in.begin(), in.end(), [](unsigned char c) { return c & 1; }));
}

TEST(ReleasableBuffer, ReleasesWholeBlocksKeepsTheRestAndPopulateKeepsValues) {
  const int64_t block = static_cast<int64_t>(kReleaseBlockBytes / sizeof(float));
  const int64_t n = 3 * block;
  ReleasableBuffer buf(n);
  ASSERT_EQ(reinterpret_cast<uintptr_t>(buf.data()) % kReleaseBlockBytes, 0u) << "blocks are aligned";
  std::fill(buf.data(), buf.data() + n, 1.5f);
  // From inside block 0 to inside block 2: block 1 goes back to the kernel, the ends are zeroed.
  const int64_t begin = block / 2, end = 2 * block + block / 2;
  buf.ZeroAndRelease(begin, end - begin);
  EXPECT_EQ(ResidentPages(buf.data() + block, kReleaseBlockBytes), 0u) << "block 1 released";
  EXPECT_GT(ResidentPages(buf.data(), kReleaseBlockBytes), 0u) << "block 0 kept (partly in use)";
  buf.Populate(begin, end - begin);
  EXPECT_EQ(ResidentPages(buf.data() + block, kReleaseBlockBytes), kReleaseBlockBytes / ::sysconf(_SC_PAGESIZE))
      << "block 1 mapped again";
  for (int64_t i = 0; i < n; ++i) {
    const float want = i >= begin && i < end ? 0.f : 1.5f;
    ASSERT_EQ(buf.data()[i], want) << "element " << i;
  }
  buf.data()[block + 5] = 2.f;  // writable after Populate, and Populate keeps values
  buf.Populate(block, 10);
  EXPECT_EQ(buf.data()[block + 5], 2.f);
}

}  // namespace
}  // namespace elastrain
