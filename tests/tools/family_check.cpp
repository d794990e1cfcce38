// family_check PRESET OUT_DIR: one training step of a model preset in float64, written
// out for an independent implementation to repeat (tests/reference/families.py,
// tests/integration/test_family_reference.sh).
//
// Builds Transformer<double> for the preset, initialises its parameters (InitParams,
// seed 1234) and perturbs every one by a fixed pseudo-random amount in [-0.05, 0.05] (so
// that norm gains are not all 1 and biases not all 0, and a term that ignored them would
// show), runs ForwardBackward on a fixed batch (B=2 rows of T=16 tokens, one target
// masked) for the mean token loss, and applies one AdamW step (step 1, the update of
// optim/optim.h written in double: weight decay on tensors of 2 or more dimensions).
// Writes to OUT_DIR:
//   model.json        the config (every field the reference needs), the AdamW settings,
//                     the batch and the loss; tensors: name, shape, offset, decay
//   params_before.f64 params_after.f64 grads.f64   raw little-endian float64, the layout's order
// Exit codes: 0 written, 1 an I/O error, 2 bad arguments (unknown preset).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/model_config.h"
#include "transformer/transformer.h"

namespace fs = std::filesystem;
using elastrain::ModelConfig;

namespace {
constexpr int64_t kRows = 2, kSeq = 16;
constexpr uint64_t kSeed = 1234;
constexpr double kLr = 1e-2, kB1 = 0.9, kB2 = 0.95, kEps = 1e-6, kWeightDecay = 0.1;

bool WriteDoubles(const fs::path& path, const std::vector<double>& v) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(double)));
  return static_cast<bool>(out);
}

const char* ActivationName(elastrain::MlpActivation a) {
  switch (a) {
    case elastrain::MlpActivation::kSwiGlu: return "swiglu";
    case elastrain::MlpActivation::kGeGlu: return "geglu";
    case elastrain::MlpActivation::kGelu: return "gelu";
  }
  return "?";
}
const char* LayoutName(elastrain::AttentionLayout l) {
  switch (l) {
    case elastrain::AttentionLayout::kGlobal: return "global";
    case elastrain::AttentionLayout::kAllLocal: return "all_local";
    case elastrain::AttentionLayout::kAlternating: return "alternating";
    case elastrain::AttentionLayout::kOlmo3: return "olmo3";
  }
  return "?";
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: family_check PRESET OUT_DIR\n");
    return 2;
  }
  elastrain::Result<ModelConfig> preset = elastrain::ModelPreset(argv[1]);
  if (!preset.ok()) {
    std::fprintf(stderr, "family_check: %s\n", preset.status().message().c_str());
    return 2;
  }
  const ModelConfig cfg = preset.value();
  if (elastrain::Status st = cfg.Validate(); !st.ok()) {
    std::fprintf(stderr, "family_check: %s\n", st.message().c_str());
    return 2;
  }
  const fs::path out_dir = argv[2];
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) {
    std::fprintf(stderr, "family_check: cannot create %s: %s\n", out_dir.c_str(), ec.message().c_str());
    return 1;
  }

  elastrain::Transformer<double> model(cfg, kRows, kSeq, elastrain::RematPolicy::kNone);
  const elastrain::ParamLayout& lay = model.layout();
  std::vector<double> params(lay.total), grads(lay.total, 0.0);
  elastrain::InitParams(cfg, lay, kSeed, params.data());
  std::mt19937_64 rng(kSeed);
  for (double& p : params) p += 0.05 * (2.0 * static_cast<double>(rng() >> 11) / 9007199254740992.0 - 1.0);

  std::vector<int32_t> inputs(kRows * kSeq), targets(kRows * kSeq);
  for (int64_t i = 0; i < kRows * kSeq; ++i) {
    inputs[i] = static_cast<int32_t>((i * 37 + 11) % cfg.vocab_size);
    targets[i] = static_cast<int32_t>((i * 53 + 7) % cfg.vocab_size);
  }
  targets[3] = -1;  // a masked position
  int64_t counted = 0;
  for (int32_t t : targets) counted += t >= 0;

  const double loss_sum = model.ForwardBackward(params.data(), grads.data(), inputs.data(), targets.data(), kRows,
                                                1.0 / static_cast<double>(counted));
  const double loss = loss_sum / static_cast<double>(counted);

  // AdamW step 1 from zero moments (optim/optim.h's update, in double).
  std::vector<double> after = params;
  nlohmann::json tensors = nlohmann::json::array();
  for (const elastrain::ParamTensor& t : lay.tensors) {
    const bool decay = t.shape.size() >= 2;
    tensors.push_back({{"name", t.name}, {"shape", t.shape}, {"offset", t.offset}, {"decay", decay}});
    for (int64_t i = t.offset; i < t.offset + t.size; ++i) {
      const double g = grads[i];
      const double m = (1 - kB1) * g, v = (1 - kB2) * g * g;
      const double mhat = m / (1 - kB1), vhat = v / (1 - kB2);
      after[i] -= kLr * (mhat / (std::sqrt(vhat) + kEps) + (decay ? kWeightDecay * params[i] : 0.0));
    }
  }

  nlohmann::json j;
  j["preset"] = cfg.name;
  j["config"] = {
      {"family", elastrain::FamilyName(cfg.family)},
      {"vocab_size", cfg.vocab_size},
      {"emb_dim", cfg.emb_dim},
      {"num_layers", cfg.num_layers},
      {"num_heads", cfg.num_heads},
      {"num_kv_heads", cfg.num_kv_heads},
      {"head_dim", cfg.head_dim},
      {"mlp_dim", cfg.mlp_dim},
      {"max_seq_len", cfg.max_seq_len},
      {"norm_eps", cfg.norm_eps},
      {"rope_theta", cfg.rope_theta},
      {"rope_scaling", cfg.rope_scaling == elastrain::RopeScaling::kLlama31 ? "llama3.1" : "none"},
      {"mlp_activation", ActivationName(cfg.mlp_activation)},
      {"tie_embeddings", cfg.tie_embeddings},
      {"normalize_embedding_logits", cfg.normalize_embedding_logits},
      {"embedding_scale", cfg.embedding_scale},
      {"attention_bias", cfg.attention_bias},
      {"qk_norm", cfg.qk_norm},
      {"qk_norm_global", cfg.qk_norm_global},
      {"pre_norm", cfg.pre_norm},
      {"sliding_window", cfg.sliding_window},
      {"attention_layout", LayoutName(cfg.attention_layout)},
      {"attn_logits_soft_cap", cfg.attn_logits_soft_cap},
      {"final_logits_soft_cap", cfg.final_logits_soft_cap},
      {"post_attn_norm", cfg.post_attn_norm},
      {"post_ffw_norm", cfg.post_ffw_norm},
      {"z_loss", cfg.z_loss},
  };
  j["adamw"] = {{"lr", kLr}, {"b1", kB1}, {"b2", kB2}, {"eps", kEps}, {"weight_decay", kWeightDecay}};
  j["batch"] = {{"rows", kRows}, {"seq_len", kSeq}, {"inputs", inputs}, {"targets", targets}};
  j["loss"] = loss;
  j["total"] = lay.total;
  j["tensors"] = tensors;
  std::ofstream meta(out_dir / "model.json", std::ios::trunc);
  meta << j.dump(1) << "\n";
  if (!meta || !WriteDoubles(out_dir / "params_before.f64", params) || !WriteDoubles(out_dir / "grads.f64", grads) ||
      !WriteDoubles(out_dir / "params_after.f64", after)) {
    std::fprintf(stderr, "family_check: cannot write to %s\n", out_dir.c_str());
    return 1;
  }
  std::printf("%s: %lld parameters, loss %.12f\n", cfg.name.c_str(), static_cast<long long>(lay.total), loss);
  return 0;
}
