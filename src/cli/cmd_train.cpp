// `elastrain train [CONFIG.yml] [key=value ...]`
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "common/log.h"
#include "config/config.h"
#include "train/trainer.h"

namespace elastrain {

namespace {
int ExitCodeFor(const Status& st) {
  switch (st.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kOutOfMemory:
      return 2;  // the configuration cannot run; retrying will not help
    default:
      return 1;
  }
}

int Fail(const Status& st) {
  std::fprintf(stderr, "elastrain: error: %s\n", st.message().c_str());
  return ExitCodeFor(st);
}
}  // namespace

int RunTrainCommand(const std::vector<std::string>& args) {
  std::string config_path;
  std::vector<std::string> overrides;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-h" || args[i] == "--help") {
      std::printf("usage: elastrain train [CONFIG.yml] [key=value ...]\n"
                  "Every key, its default and meaning: configs/base.yml\n");
      return 0;
    }
    if (i == 0 && args[i].find('=') == std::string::npos) config_path = args[i];
    else overrides.push_back(args[i]);
  }
  std::vector<std::string> ignored;
  auto cfg = LoadConfig(config_path, overrides, &ignored);
  if (!cfg.ok()) return Fail(cfg.status());
  SetLogLevel(cfg->log_level);
  if (!ignored.empty()) {
    std::string keys;
    for (auto& k : ignored) keys += (keys.empty() ? "" : ", ") + k;
    LOG_WARN("ignoring {} MaxText keys that elastrain does not implement: {}", ignored.size(), keys);
  }
  auto summary = Train(cfg.value());
  if (!summary.ok()) return Fail(summary.status());
  const TrainSummary& s = summary.value();
  const double drop = s.first_eval_loss > 0 ? 100.0 * (1.0 - s.final_eval_loss / s.first_eval_loss) : 0.0;
  std::printf(
      "\nTraining finished: %lld steps in %.1fs\n"
      "  loss       %.4f -> %.4f\n"
      "  eval loss  %.4f -> %.4f (%.1f%% lower)\n"
      "  throughput %.0f tokens/s, MFU %.1f%%\n"
      "  batch      %lld sequences per step (%lld micro-batches)\n"
      "  outputs    %s/{config.yml,metrics.jsonl,train.log}\n",
      static_cast<long long>(s.steps), s.wall_seconds, s.first_loss, s.final_loss, s.first_eval_loss,
      s.final_eval_loss, drop, s.tokens_per_sec, 100 * s.mfu, static_cast<long long>(s.global_batch_size),
      static_cast<long long>(s.micro_batches_per_step), s.run_dir.c_str());
  return 0;
}

}  // namespace elastrain
