// ckpt_logits CKPT_DIR OUT.f32 TOKEN...: the logits elastrain's model computes for one
// sequence of tokens, with the parameters of checkpoint CKPT_DIR (its saved config names
// the model). Writes (T, V) float32 little-endian, row-major. For test_hf_checkpoint.sh,
// which compares them with an independent PyTorch forward of Hugging Face weights.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "config/config.h"
#include "transformer/transformer.h"

namespace {

int Die(const std::string& what) {
  std::fprintf(stderr, "ckpt_logits: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace elastrain;
  if (argc < 4) return Die("usage: ckpt_logits CKPT_DIR OUT.f32 TOKEN...");
  const std::string dir = argv[1], out = argv[2];
  std::vector<int32_t> tokens;
  for (int i = 3; i < argc; ++i) tokens.push_back(static_cast<int32_t>(std::atoi(argv[i])));
  auto m = ckpt::ReadManifest(dir);
  if (!m.ok()) return Die(m.status().message());
  auto cfg = LoadSavedModelConfig(m->config_yaml, dir);
  if (!cfg.ok()) return Die(cfg.status().message());
  const int64_t T = static_cast<int64_t>(tokens.size());
  Transformer<float> model(cfg->model, 1, T, RematPolicy::kNone);
  std::vector<float> params(static_cast<size_t>(model.layout().total));
  for (const ParamTensor& t : model.layout().tensors) {
    auto v = ckpt::ReadGlobalTensor(*m, dir, ckpt::StateKind::kParams, t.name);
    if (!v.ok()) return Die(v.status().message());
    if (static_cast<int64_t>(v->size()) != t.size) return Die(t.name + ": wrong size");
    std::copy(v->begin(), v->end(), params.begin() + t.offset);
  }
  model.Forward(params.data(), tokens.data(), nullptr, 1);
  const int64_t V = cfg->model.vocab_size;
  FILE* f = std::fopen(out.c_str(), "wb");
  if (!f) return Die("cannot write " + out);
  const size_t n = static_cast<size_t>(T * V);
  const bool ok = std::fwrite(model.logits(), sizeof(float), n, f) == n;
  return std::fclose(f) == 0 && ok ? 0 : Die("cannot write " + out);
}
