// `elastrain generate (--run-dir DIR | --checkpoint DIR) [--prompt TEXT] [options] [key=value ...]`:
// text from a trained model, as nanoGPT's sample.py and MaxText's decode do. The model
// and its config come from a checkpoint (any mesh, loaded as one rank), the tokenizer
// from the config's tokenizer_path. The prompt and its continuation go to stdout, the
// tokens/s of the prefill and of the decoding to stderr. docs/generate.md.
// Exit codes: 0 printed, 1 a runtime failure (a damaged checkpoint), 2 bad usage, a
// missing checkpoint or a request the model cannot serve.
#include <fmt/format.h>

#include <spdlog/sinks/stdout_color_sinks.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/log.h"
#include "data/tokenizer.h"
#include "kernels/gemm.h"
#include "train/trained_model.h"
#include "transformer/generate.h"
#include "wire/exit_codes.h"

namespace elastrain {

namespace {

int Fail(const Status& st) { return FailCommand("generate", st); }

// A prompt on stdin larger than this is refused before it is tokenised: no model here
// has a context anywhere near it.
constexpr size_t kMaxPromptBytes = size_t{16} << 20;

Result<std::string> ReadStdinPrompt() {
  std::string text;
  char buf[65536];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), stdin)) > 0) {
    text.append(buf, n);
    if (text.size() > kMaxPromptBytes)
      return Status::InvalidArgument(fmt::format("the prompt on stdin is over {} MiB; give a shorter one",
                                                 kMaxPromptBytes >> 20));
  }
  return text;
}

}  // namespace

int RunGenerateCommand(const std::vector<std::string>& args) {
  CLI::App app{"elastrain generate: continue a prompt with a trained model (docs/generate.md)"};
  TrainedModelSource src;
  int64_t threads = -1;
  std::string prompt;
  bool has_prompt = false, no_kv_cache = false, print_ids = false;
  GenerateOptions o;
  o.sampling.temperature = 0.8;  // nanoGPT's sample.py defaults
  o.sampling.top_k = 200;
  o.seed = 1337;
  int64_t num_samples = 1;
  app.add_option("--run-dir", src.run_dir, "a run directory: its latest committed checkpoint");
  app.add_option("--checkpoint", src.checkpoint_dir, "a checkpoint directory (<run>/checkpoints/step_N)");
  app.add_option("--config", src.config_path, "the model's config (default: the one saved in the checkpoint)");
  app.add_option("--threads", threads, "CPU threads (default: the config's threads_per_worker; 0: all cores)");
  app.add_option("--prompt", prompt, "the text to continue (default: stdin)")->each([&](const std::string&) {
    has_prompt = true;
  });
  app.add_option("--max-new-tokens", o.max_new_tokens, "tokens to generate per sample (default 64)");
  app.add_option("--temperature", o.sampling.temperature, "0: greedy; higher: more random (default 0.8)");
  app.add_option("--top-k", o.sampling.top_k, "draw from the k most likely tokens only; 0: all (default 200)");
  app.add_option("--top-p", o.sampling.top_p, "draw from the smallest set of tokens of this probability (default 1)");
  app.add_option("--seed", o.seed, "the random seed: the same seed gives the same text (default 1337)");
  app.add_option("--num-samples", num_samples, "continuations to print (default 1)");
  app.add_flag("--no-kv-cache", no_kv_cache, "recompute the whole prefix for every token (slow; for checks)");
  app.add_flag("--print-ids", print_ids, "also print the generated token ids, one line per sample");
  app.add_option("overrides", src.overrides, "key=value config overrides, e.g. tokenizer_path=...");
  app.footer("Exactly one of --run-dir and --checkpoint. tokens/s go to stderr.");
  if (int rc = ParseArgs(app, "generate", args); rc >= 0) return rc;
  // stdout carries the text alone; the log (the dataset, the tokenizer) goes to stderr.
  spdlog::set_default_logger(spdlog::stderr_color_mt("stderr"));
  o.kv_cache = !no_kv_cache;
  if (num_samples < 1)
    return Fail(Status::InvalidArgument(fmt::format("--num-samples={}: expected at least 1", num_samples)));
  if (Status st = ValidateSampling(o.sampling); !st.ok()) return Fail(st);
  if (o.max_new_tokens < 1)
    return Fail(Status::InvalidArgument(fmt::format("--max-new-tokens={}: expected at least 1", o.max_new_tokens)));

  auto model = LoadTrainedModel(src);
  if (!model.ok()) return Fail(model.status());
  const TrainConfig& cfg = model->config;
  SetComputeThreads(static_cast<int>(threads >= 0 ? std::min<int64_t>(threads, 4096) : cfg.threads_per_worker));
  auto tokenizer = LoadTokenizer(cfg.tokenizer_path);
  if (!tokenizer.ok()) return Fail(tokenizer.status());
  if (!has_prompt) {
    auto text = ReadStdinPrompt();
    if (!text.ok()) return Fail(text.status());
    prompt = *text;
  }
  auto ids = (*tokenizer)->Encode(prompt);
  if (!ids.ok()) return Fail(ids.status());
  const int64_t V = cfg.model.vocab_size, tok_vocab = (*tokenizer)->vocab_size();
  for (size_t i = 0; i < ids->size(); ++i)
    if ((*ids)[i] >= V)
      return Fail(Status::InvalidArgument(fmt::format(
          "prompt token {} is id {}, but the model's vocab_size is {}: the tokenizer ({}, {} ids) is not the "
          "model's (set tokenizer_path=... to the one it was trained with)", i, (*ids)[i], V,
          cfg.tokenizer_path.empty() ? "bytes" : cfg.tokenizer_path, tok_vocab)));
  // Ids the tokenizer cannot decode are never chosen.
  if (tok_vocab < V) o.sampling.vocab_limit = tok_vocab;

  // One row of the whole context; remat keeps one layer's activations (no backward).
  Transformer<float> net(cfg.model, 1, cfg.max_target_length, RematPolicy::kFull);
  const uint64_t seed = o.seed;
  for (int64_t s = 0; s < num_samples; ++s) {
    o.seed = seed + static_cast<uint64_t>(s);  // sample s is the same whatever num_samples is
    auto r = Generate(net, model->params.data(), *ids, o);
    if (!r.ok()) return Fail(r.status());
    if (s == 0)  // after the first sample: a refused request prints its one line alone
      std::fprintf(stderr, "loaded %s (step %lld): %s, %lld parameters, context %lld, tokenizer %s\n",
                   model->checkpoint_dir.c_str(), static_cast<long long>(model->step), cfg.model.name.c_str(),
                   static_cast<long long>(cfg.model.NumParams()), static_cast<long long>(cfg.max_target_length),
                   (*tokenizer)->id().c_str());
    if (s > 0) std::printf("---------------\n");
    // The whole sequence decoded at once, as sample.py does: a character whose bytes
    // straddle the prompt's end, or a piece's leading space, comes out whole.
    std::vector<int32_t> all = *ids;
    all.insert(all.end(), r->tokens.begin(), r->tokens.end());
    std::printf("%s\n", (*tokenizer)->Decode(all).c_str());
    if (print_ids) {
      std::string line = "ids:";
      for (int32_t t : r->tokens) line += fmt::format(" {}", t);
      std::printf("%s\n", line.c_str());
    }
    std::fflush(stdout);
    std::fprintf(stderr, "prefill: %lld tokens in %.3fs (%.0f tokens/s); decode: %zu tokens in %.3fs "
                 "(%.1f tokens/s)%s\n", static_cast<long long>(r->prompt_tokens), r->prefill_seconds,
                 r->PrefillTokensPerSecond(), r->tokens.size() > 0 ? r->tokens.size() - 1 : 0, r->decode_seconds,
                 r->DecodeTokensPerSecond(), o.kv_cache ? "" : " without the KV cache");
  }
  return kExitSuccess;
}

}  // namespace elastrain
