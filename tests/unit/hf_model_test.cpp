// Hugging Face layout (convert/hf_model.h): config.json to model keys and back, the
// tensor forms both ways, and the refusals naming the field.
#include "convert/hf_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "config/config.h"

namespace elastrain::convert {
namespace {

using ::testing::HasSubstr;

std::vector<float> Iota(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0.0f);
  return v;
}

TEST(HfModel, RotateHalfRowsBecomeInterleavedPairs) {
  // One head of 4 dims, 1 column: HF rows (x0, x1 | y0, y1) are the pairs (x0,y0), (x1,y1).
  const HfTensorRule rule{"q", {4}, {"attn.bq"}, HfForm::kRopeHalves, 1};
  EXPECT_EQ(OursFromHf(rule, 0, {10, 11, 20, 21}, {4}), (std::vector<float>{10, 20, 11, 21}));
  EXPECT_EQ(HfFromOurs(rule, {{10, 20, 11, 21}}, {{4}}), (std::vector<float>{10, 11, 20, 21}));
}

TEST(HfModel, Gpt2FusedConv1DSplitsIntoTransposedQKV) {
  // c_attn [C=2, 3C=6]: row c of HF holds (q[0][c], q[1][c], k[0][c], k[1][c], v...).
  const HfTensorRule rule{"c_attn", {2, 6}, {"wq", "wk", "wv"}, HfForm::kFusedTransposed, 1};
  const std::vector<float> hf = Iota(12);
  EXPECT_EQ(OursFromHf(rule, 0, hf, {2, 2}), (std::vector<float>{0, 6, 1, 7}));
  EXPECT_EQ(OursFromHf(rule, 2, hf, {2, 2}), (std::vector<float>{4, 10, 5, 11}));
}

TEST(HfModel, EveryFormRoundTrips) {
  std::mt19937 rng(3);
  std::normal_distribution<float> n;
  auto random = [&](int64_t k) {
    std::vector<float> v(static_cast<size_t>(k));
    for (float& x : v) x = n(rng);
    return v;
  };
  struct Case {
    HfTensorRule rule;
    std::vector<int64_t> ours;
  };
  const Case cases[] = {
      {{"a", {6, 4}, {"x"}, HfForm::kSame, 1}, {6, 4}},
      {{"b", {4, 6}, {"x"}, HfForm::kTransposed, 1}, {6, 4}},
      {{"c", {4, 9}, {"q", "k", "v"}, HfForm::kFusedTransposed, 1}, {3, 4}},
      {{"d", {9}, {"q", "k", "v"}, HfForm::kFused, 1}, {3}},
      {{"e", {12, 5}, {"x"}, HfForm::kRopeHalves, 3}, {12, 5}},
  };
  for (const Case& c : cases) {
    std::vector<std::vector<float>> ours;
    std::vector<std::vector<int64_t>> shapes;
    for (size_t p = 0; p < c.rule.ours.size(); ++p) {
      int64_t k = 1;
      for (int64_t d : c.ours) k *= d;
      ours.push_back(random(k));
      shapes.push_back(c.ours);
    }
    const std::vector<float> hf = HfFromOurs(c.rule, ours, shapes);
    for (size_t p = 0; p < ours.size(); ++p) EXPECT_EQ(OursFromHf(c.rule, p, hf, c.ours), ours[p]) << c.rule.hf;
  }
}

constexpr const char* kLlama = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 300,
  "hidden_size": 64, "intermediate_size": 96, "num_attention_heads": 4, "num_key_value_heads": 2,
  "num_hidden_layers": 2, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
  "hidden_act": "silu", "tie_word_embeddings": false})";

TEST(HfModel, ALlamaConfigLoadsAsTheSameModelAndGoesBack) {
  auto yaml = ModelYamlFromHfConfig(kLlama, "config.json");
  ASSERT_TRUE(yaml.ok()) << yaml.status().message();
  auto cfg = LoadConfigText(*yaml, "model.yml");
  ASSERT_TRUE(cfg.ok()) << cfg.status().message() << "\n" << *yaml;
  const ModelConfig& m = cfg->model;
  EXPECT_EQ(m.num_kv_heads, 2);
  EXPECT_EQ(m.head_dim, 16);
  EXPECT_EQ(m.rope_theta, 500000.0);
  EXPECT_EQ(m.norm_eps, 1e-5);
  EXPECT_EQ(cfg->max_target_length, 2048) << "the context (4096), capped";
  EXPECT_EQ(m.max_seq_len, 2048) << "a RoPE model's longest T is max_target_length";
  auto back = HfConfigFromModel(m, *cfg->decoder_block);
  ASSERT_TRUE(back.ok()) << back.status().message();
  auto again = ModelYamlFromHfConfig(*back, "exported config.json");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(LoadConfigText(*again, "x")->model.NumParams(), m.NumParams());
  // Its tensors: 2 per-layer norms, q k v o, gate up down; embedding, final norm, head.
  EXPECT_EQ(HfTensorRules(m, DecoderBlock::kLlama).size(), 3u + 2 * 9);
}

TEST(HfModel, WhatElastrainDoesNotImplementIsRefusedByName) {
  auto refused = [](std::string text, const std::string& from, const std::string& to) {
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    auto r = ModelYamlFromHfConfig(text, "config.json");
    return r.ok() ? std::string("accepted") : r.status().message();
  };
  EXPECT_THAT(refused(kLlama, "LlamaForCausalLM", "MixtralForCausalLM"), HasSubstr("[MixtralForCausalLM]"));
  EXPECT_THAT(refused(kLlama, "\"silu\"", "\"gelu\""), HasSubstr("hidden_act: \"gelu\" is not implemented"));
  EXPECT_THAT(refused(kLlama, "\"tie_word_embeddings\": false", "\"mlp_bias\": true"), HasSubstr("mlp_bias"));
  EXPECT_THAT(refused(kLlama, "\"tie_word_embeddings\": false", "\"attention_bias\": true"),
              HasSubstr("attention_bias"));
  EXPECT_THAT(refused(kLlama, "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 2.5"),
              HasSubstr("num_key_value_heads: 2.5: expected an integer"));
  EXPECT_THAT(refused(kLlama, "\"hidden_size\": 64", "\"hidden_size\": -64"), HasSubstr("hidden_size: -64"));
  EXPECT_THAT(refused(kLlama, "\"rope_theta\": 500000.0",
                      R"("rope_scaling": {"rope_type": "yarn", "factor": 4.0})"),
              HasSubstr("rope_scaling"));
  EXPECT_THAT(refused(kLlama, "\"hidden_size\": 64,", ""), HasSubstr("hidden_size: missing"));
  auto bad = ModelYamlFromHfConfig("[1, 2]", "config.json");
  EXPECT_THAT(bad.status().message(), HasSubstr("expected a JSON object"));
  bad = ModelYamlFromHfConfig("{\"a\": ", "config.json");
  EXPECT_THAT(bad.status().message(), HasSubstr("not JSON"));
}

TEST(HfModel, ModelsWithoutAnHfFormAreNotExported) {
  auto gemma = LoadConfigText("model_name: tiny-gemma\n", "x");
  ASSERT_TRUE(gemma.ok()) << gemma.status().message();
  auto r = HfConfigFromModel(gemma->model, *gemma->decoder_block);
  EXPECT_THAT(r.status().message(), HasSubstr("decoder_block=gemma"));
}

}  // namespace
}  // namespace elastrain::convert
