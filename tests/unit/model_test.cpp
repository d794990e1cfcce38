// Whole-model tests: finite-difference gradient checks of the tiny llama and gpt2 models
// in float64, remat equivalence, parameter counts of the public presets.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
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

void CheckModelGradient(const ModelConfig& cfg, RematPolicy remat) {
  const char* preset = cfg.name.c_str();
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
void CheckModelGradient(const char* preset, RematPolicy remat) { CheckModelGradient(Tiny(preset), remat); }

// The output options that do not depend on the block, on the gpt2 family too.
TEST(ModelTest, Gpt2NormalizedCappedZLossGradientMatchesFiniteDifferences) {
  ModelConfig cfg = Tiny("tiny-gpt2");
  cfg.normalize_embedding_logits = true;
  cfg.final_logits_soft_cap = 0.5;
  cfg.z_loss = 0.1;
  ASSERT_TRUE(cfg.Validate().ok()) << cfg.Validate().message();
  CheckModelGradient(cfg, RematPolicy::kNone);
}

TEST(ModelTest, TinyLlamaGradientMatchesFiniteDifferences) { CheckModelGradient("tiny", RematPolicy::kNone); }
TEST(ModelTest, TinyGpt2GradientMatchesFiniteDifferences) { CheckModelGradient("tiny-gpt2", RematPolicy::kNone); }
TEST(ModelTest, RematGradientMatchesFiniteDifferences) { CheckModelGradient("tiny", RematPolicy::kFull); }

// The decoder families MaxText ships: every new tensor and option (llama3.1 RoPE scaling,
// sliding windows, QKV biases, QK norm, GeGLU, tied and scaled logits, embedding scale,
// soft caps, post norms, z-loss) in forward and backward, in float64.
class FamilyGradientTest : public ::testing::TestWithParam<const char*> {};
TEST_P(FamilyGradientTest, GradientMatchesFiniteDifferences) { CheckModelGradient(GetParam(), RematPolicy::kNone); }
INSTANTIATE_TEST_SUITE_P(Families, FamilyGradientTest,
                         ::testing::Values("tiny-llama31", "tiny-mistral", "tiny-qwen2", "tiny-qwen3", "tiny-gemma",
                                           "tiny-gemma2", "tiny-zloss", "tiny-gpt3", "tiny-olmo3"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });
TEST(ModelTest, Gemma2RematGradientMatchesFiniteDifferences) { CheckModelGradient("tiny-gemma2", RematPolicy::kFull); }
TEST(ModelTest, Olmo3RematGradientMatchesFiniteDifferences) { CheckModelGradient("tiny-olmo3", RematPolicy::kFull); }

// Each option changes the loss: a test of a family whose option were silently dropped
// would otherwise still pass its gradient check.
TEST(ModelTest, EveryFamilyOptionChangesTheLoss) {
  ModelConfig base = Tiny("tiny");
  base.rope_theta = 500000;  // rope_scaling below then changes only the scaling
  auto loss = [](const ModelConfig& cfg) {
    const int64_t B = 2, T = 8;
    Transformer<double> model(cfg, B, T, RematPolicy::kNone);
    std::vector<double> p(model.layout().total);
    InitParams(cfg, model.layout(), 7, p.data());
    std::mt19937_64 rng(3);
    std::normal_distribution<double> nd(0.0, 0.3);
    for (auto& x : p) x += nd(rng);
    Batch b = MakeBatch(B, T, cfg.vocab_size, 11);
    return model.Forward(p.data(), b.inputs.data(), b.targets.data(), B);
  };
  const double l0 = loss(base);
  std::vector<std::pair<const char*, std::function<void(ModelConfig&)>>> options = {
      {"rope_scaling", [](ModelConfig& m) { m.rope_scaling = RopeScaling::kLlama31; }},
      {"sliding_window", [](ModelConfig& m) { m.sliding_window = 3; m.attention_layout = AttentionLayout::kAllLocal; }},
      {"attn_logits_soft_cap", [](ModelConfig& m) { m.attn_logits_soft_cap = 0.5; }},
      {"mlp_activation", [](ModelConfig& m) { m.mlp_activation = MlpActivation::kGeGlu; }},
      {"embedding_scale", [](ModelConfig& m) { m.embedding_scale = 3; }},
      {"z_loss", [](ModelConfig& m) { m.z_loss = 0.1; }},
      {"tied+normalized+capped", [](ModelConfig& m) {
         m.tie_embeddings = true;
         m.normalize_embedding_logits = true;
         m.final_logits_soft_cap = 0.5;
       }},
  };
  for (auto& [name, set] : options) {
    ModelConfig m = base;
    set(m);
    ASSERT_TRUE(m.Validate().ok()) << name << ": " << m.Validate().message();
    // float64 and deterministic: any difference above rounding is the option's effect.
    EXPECT_GT(std::abs(loss(m) - l0), 1e-9) << name << " did not change the loss";
  }
  // Alternating layers: layer 0 local, layer 1 global, differs from both all-local and all-global.
  ModelConfig local = base, alt = base;
  local.sliding_window = alt.sliding_window = 3;
  local.attention_layout = AttentionLayout::kAllLocal;
  alt.attention_layout = AttentionLayout::kAlternating;
  const double ll = loss(local), la = loss(alt);
  EXPECT_GT(std::abs(la - ll), 1e-9);
  EXPECT_GT(std::abs(la - l0), 1e-9);
}

TEST(ModelTest, FamilyOptionsRefusedWhereNotImplemented) {
  ModelConfig gpt = Tiny("tiny-gpt2");
  gpt.qk_norm = true;
  EXPECT_NE(gpt.Validate().message().find("use_qk_norm"), std::string::npos);
  ModelConfig untied_cap = Tiny("tiny");
  untied_cap.final_logits_soft_cap = 30;
  EXPECT_NE(untied_cap.Validate().message().find("final_logits_soft_cap=30"), std::string::npos);
  ModelConfig no_window = Tiny("tiny");
  no_window.attention_layout = AttentionLayout::kAlternating;
  EXPECT_FALSE(no_window.Validate().ok());
  ModelConfig yarn = Tiny("tiny");
  yarn.rope_scaling = RopeScaling::kYarn;
  EXPECT_NE(yarn.Validate().message().find("rope_type=yarn"), std::string::npos);
  ModelConfig no_norms = Tiny("tiny");
  no_norms.pre_norm = false;
  EXPECT_FALSE(no_norms.Validate().ok());
  ModelConfig plain_gelu = Tiny("tiny");
  plain_gelu.mlp_activation = MlpActivation::kGelu;
  EXPECT_NE(plain_gelu.Validate().message().find("mlp_activations=[gelu]"), std::string::npos);
  // The tied llama has no lm_head, and its parameter count says so.
  ModelConfig tied = Tiny("tiny");
  tied.tie_embeddings = true;
  EXPECT_EQ(BuildParamLayout(tied).Find("lm_head.w"), nullptr);
  EXPECT_EQ(tied.NumParams() + tied.vocab_size * tied.emb_dim, Tiny("tiny").NumParams());
}

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
