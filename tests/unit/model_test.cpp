// Whole-model tests: finite-difference gradient checks of the tiny llama and gpt2 models
// in float64, remat equivalence, parameter counts of the public presets.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "model/model_config.h"
#include "transformer/transformer.h"

namespace elastrain {
namespace {

ModelConfig Tiny(const char* name) {
  auto m = ModelPreset(name);
  EXPECT_TRUE(m.ok());
  ModelConfig c = m.value();
  c.vocab_size = 32;  // small head keeps the finite differences fast
  c.max_seq_len = 8;
  return c;
}

struct Batch {
  std::vector<int32_t> inputs, targets;
};
Batch MakeBatch(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Batch b;
  for (int64_t i = 0; i < B * T; ++i) {
    b.inputs.push_back(static_cast<int32_t>(rng() % V));
    b.targets.push_back(static_cast<int32_t>(rng() % V));
  }
  b.targets[1] = -1;  // a masked position
  return b;
}

void CheckModelGradient(const char* preset, RematPolicy remat) {
  ModelConfig cfg = Tiny(preset);
  const int64_t B = 2, T = 6;
  Transformer<double> model(cfg, B, T, remat);
  const ParamLayout& lay = model.layout();
  std::vector<double> p(lay.total), g(lay.total, 0.0);
  InitParams(cfg, lay, 7, p.data());
  // Larger weights than the 0.02 init so every term matters in the loss.
  std::mt19937_64 rng(3);
  std::normal_distribution<double> nd(0.0, 0.3);
  for (auto& x : p) x += nd(rng);
  Batch b = MakeBatch(B, T, cfg.vocab_size, 11);
  model.ForwardBackward(p.data(), g.data(), b.inputs.data(), b.targets.data(), B, 1.0);
  // Check a few entries of every tensor (first, last and some in between).
  for (const ParamTensor& t : lay.tensors) {
    std::vector<int64_t> idx = {0, t.size - 1, t.size / 2, t.size / 3};
    for (int64_t j : idx) {
      int64_t i = t.offset + j;
      const double h = 1e-5, old = p[i];
      p[i] = old + h;
      double lp = model.Forward(p.data(), b.inputs.data(), b.targets.data(), B);
      p[i] = old - h;
      double lm = model.Forward(p.data(), b.inputs.data(), b.targets.data(), B);
      p[i] = old;
      double num = (lp - lm) / (2 * h);
      double err = std::abs(num - g[i]) / std::max(1e-3, std::abs(num));
      ASSERT_LT(err, 1e-5) << preset << " " << t.name << "[" << j << "]: analytic " << g[i] << " numeric " << num;
    }
  }
}

TEST(ModelTest, TinyLlamaGradientMatchesFiniteDifferences) { CheckModelGradient("tiny", RematPolicy::kNone); }
TEST(ModelTest, TinyGpt2GradientMatchesFiniteDifferences) { CheckModelGradient("tiny-gpt2", RematPolicy::kNone); }
TEST(ModelTest, RematGradientMatchesFiniteDifferences) { CheckModelGradient("tiny", RematPolicy::kFull); }

TEST(ModelTest, RematGivesBitIdenticalGradientsAndLessMemory) {
  for (const char* preset : {"tiny", "tiny-gpt2"}) {
    ModelConfig cfg = Tiny(preset);
    const int64_t B = 2, T = 8;
    Transformer<float> a(cfg, B, T, RematPolicy::kNone), b(cfg, B, T, RematPolicy::kFull);
    std::vector<float> p(a.layout().total), ga(a.layout().total, 0.f), gb(a.layout().total, 0.f);
    InitParams(cfg, a.layout(), 1, p.data());
    Batch batch = MakeBatch(B, T, cfg.vocab_size, 5);
    double la = a.ForwardBackward(p.data(), ga.data(), batch.inputs.data(), batch.targets.data(), B, 0.01f);
    double lb = b.ForwardBackward(p.data(), gb.data(), batch.inputs.data(), batch.targets.data(), B, 0.01f);
    EXPECT_EQ(la, lb);
    EXPECT_EQ(ga, gb);
    EXPECT_LT(b.ActivationBytes(), a.ActivationBytes());
  }
}

TEST(ModelTest, InitialLossIsNearLogVocab) {
  ModelConfig cfg = ModelPreset("tiny").value();
  Transformer<float> m(cfg, 2, 16, RematPolicy::kNone);
  std::vector<float> p(m.layout().total);
  InitParams(cfg, m.layout(), 0, p.data());
  Batch b = MakeBatch(2, 16, cfg.vocab_size, 1);
  double mean = m.Forward(p.data(), b.inputs.data(), b.targets.data(), 2) / 31.0;  // one target masked
  EXPECT_NEAR(mean, std::log(static_cast<double>(cfg.vocab_size)), 0.05);
}

TEST(ModelTest, PresetParameterCountsMatchPublishedModels) {
  // GPT-2 small: 124,439,808 parameters with tied embeddings (the published count).
  EXPECT_EQ(ModelPreset("gpt2-124m").value().NumParams(), 124439808);
  // Llama 2 7B: 6,738,415,616; Llama 3 8B: 8,030,261,248 (Meta's model cards / HF configs).
  EXPECT_EQ(ModelPreset("llama2-7b").value().NumParams(), 6738415616);
  EXPECT_EQ(ModelPreset("llama3-8b").value().NumParams(), 8030261248);
  int64_t small = ModelPreset("small").value().NumParams();
  EXPECT_GT(small, 10'000'000);
  EXPECT_LT(small, 20'000'000);
}

TEST(ModelTest, PresetsValidateAndBadShapesAreNamed) {
  for (auto& name : ModelPresetNames()) EXPECT_TRUE(ModelPreset(name)->Validate().ok()) << name;
  ModelConfig c = ModelPreset("tiny-gpt2").value();
  c.head_dim = 7;
  Status st = c.Validate();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("head_dim=7"), std::string::npos) << st.message();
  c = ModelPreset("tiny").value();
  c.num_kv_heads = 3;
  EXPECT_NE(c.Validate().message().find("base_num_kv_heads=3"), std::string::npos);
}

}  // namespace
}  // namespace elastrain
