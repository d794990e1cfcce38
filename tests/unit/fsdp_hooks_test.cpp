// The FSDP unit hooks' contract (Transformer::UnitHooks) and the buffer they drive
// (ReleasableBuffer): TrainState maps a unit's gradient pages at grads_begin, so the
// model must not write a unit's gradients before it, and must have written them by
// grads_ready; mapping pages keeps what they hold.
#include <gtest/gtest.h>

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

TEST(ReleasableBuffer, PopulateKeepsValuesAndReleasedPagesReadZero) {
  const int64_t n = 5 * 4096;  // 20 pages of floats
  ReleasableBuffer buf(n);
  std::fill(buf.data(), buf.data() + n, 1.5f);
  buf.ZeroAndRelease(1000, 9000);  // whole pages inside are returned, the edges zeroed
  buf.Populate(0, n);
  for (int64_t i = 0; i < n; ++i) {
    const float want = i >= 1000 && i < 10000 ? 0.f : 1.5f;
    ASSERT_EQ(buf.data()[i], want) << "element " << i;
  }
  buf.data()[5000] = 2.f;  // writable after Populate
  buf.Populate(4000, 2000);
  EXPECT_EQ(buf.data()[5000], 2.f);
}

}  // namespace
}  // namespace elastrain
