// `elastrain eval (--run-dir DIR | --checkpoint DIR) [--max-batches N] [--split S] [key=value ...]`:
// the loss and perplexity of a checkpoint on the eval split of the run's dataset, or of
// another one (dataset_path=... dataset_type=..., the train command's keys). The loss
// is the trainer's eval loss (train/eval_loss.h, the same code): the first
// eval_steps * per_device_batch_size samples of the split, the mean over their tokens.
// docs/generate.md. Exit codes: 0 printed, 1 a runtime failure, 2 bad usage or data.
#include <fmt/format.h>

#include <spdlog/sinks/stdout_color_sinks.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/log.h"
#include "common/clock.h"
#include "data/dataset.h"
#include "kernels/gemm.h"
#include "train/dataset_for_config.h"
#include "train/eval_loss.h"
#include "train/trained_model.h"
#include "wire/exit_codes.h"

namespace elastrain {

namespace {
int Fail(const Status& st) { return FailCommand("eval", st); }
}  // namespace

int RunEvalCommand(const std::vector<std::string>& args) {
  CLI::App app{"elastrain eval: loss and perplexity of a checkpoint on a dataset (docs/generate.md)"};
  TrainedModelSource src;
  int64_t threads = -1;
  int64_t max_batches = -1;
  std::string split_name = "eval";
  bool json = false;
  app.add_option("--run-dir", src.run_dir, "a run directory: its latest committed checkpoint");
  app.add_option("--checkpoint", src.checkpoint_dir, "a checkpoint directory (<run>/checkpoints/step_N)");
  app.add_option("--config", src.config_path, "the model's config (default: the one saved in the checkpoint)");
  app.add_option("--threads", threads, "CPU threads (default: the config's threads_per_worker; 0: all cores)");
  app.add_option("--max-batches", max_batches,
                 "batches of per_device_batch_size samples (default: the config's eval_steps, as the trainer's "
                 "eval; 0: the whole split)");
  app.add_option("--split", split_name, "eval (default: the held-out windows) or train")
      ->check(CLI::IsMember({"eval", "train"}));
  app.add_flag("--json", json, "print one JSON object");
  app.add_option("overrides", src.overrides, "key=value config overrides: dataset_path=..., dataset_type=..., "
                                             "eval_split_fraction=..., per_device_batch_size=...");
  app.footer("Exactly one of --run-dir and --checkpoint.");
  if (int rc = ParseArgs(app, "eval", args); rc >= 0) return rc;
  // stdout carries the result alone; the log (the dataset, the tokenizer) goes to stderr.
  spdlog::set_default_logger(spdlog::stderr_color_mt("stderr"));
  if (max_batches < -1)
    return Fail(Status::InvalidArgument(fmt::format("--max-batches={}: expected >= 0", max_batches)));

  auto model = LoadTrainedModel(src);
  if (!model.ok()) return Fail(model.status());
  const TrainConfig& cfg = model->config;
  SetComputeThreads(static_cast<int>(threads >= 0 ? std::min<int64_t>(threads, 4096) : cfg.threads_per_worker));
  auto data = OpenDataset(DatasetOptionsForConfig(cfg));
  if (!data.ok()) return Fail(data.status());
  const Split split = split_name == "train" ? Split::kTrain : Split::kEval;
  const int64_t batch = cfg.per_device_batch_size, T = cfg.max_target_length;
  const int64_t available = (*data)->num_samples(split);
  // The trainer's count for the default; the whole split for --max-batches 0.
  const int64_t batches = max_batches < 0 ? cfg.eval_steps : max_batches;
  const bool all = batches == 0 || batches >= (available + batch - 1) / batch;  // (no overflow of batches * batch)
  const int64_t want = all ? available : batches * batch;
  if (want == 0)
    return Fail(Status::InvalidArgument(fmt::format(
        "the {} split of {} has no samples of {} tokens (eval_split_fraction={}): nothing to evaluate",
        split_name, (*data)->Describe(), T + 1, cfg.eval_split_fraction)));
  std::vector<int64_t> idx(want);
  for (int64_t i = 0; i < want; ++i) idx[i] = i;
  Transformer<float> net(cfg.model, batch, T, RematPolicy::kFull);
  const auto t0 = std::chrono::steady_clock::now();
  auto sum = EvalLossSum(net, model->params.data(), **data, idx, (want + batch - 1) / batch, batch, {}, split);
  if (!sum.ok()) return Fail(sum.status());
  const double seconds = SecondsSince(t0);
  const double tokens = static_cast<double>(want * T), loss = *sum / tokens;
  if (json) {
    nlohmann::json j = {{"checkpoint", model->checkpoint_dir}, {"step", model->step}, {"split", split_name},
                        {"samples", want}, {"tokens", want * T}, {"loss", loss}, {"perplexity", std::exp(loss)},
                        {"seconds", seconds}};
    std::printf("%s\n", j.dump().c_str());
    return kExitSuccess;
  }
  std::printf("checkpoint %s (step %lld)\ndata %s, %s split: %lld samples, %lld tokens\n"
              "eval loss %.9g\nperplexity %.6g\n(%.2fs, %.0f tokens/s)\n",
              model->checkpoint_dir.c_str(), static_cast<long long>(model->step), (*data)->Describe().c_str(),
              split_name.c_str(), static_cast<long long>(want), static_cast<long long>(want * T), loss,
              std::exp(loss), seconds, tokens / std::max(seconds, 1e-9));
  return kExitSuccess;
}

}  // namespace elastrain
