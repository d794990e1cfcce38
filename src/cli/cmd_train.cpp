// `elastrain train [CONFIG.yml] [key=value ...]` and the internal `elastrain worker`.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/files.h"
#include "common/log.h"
#include "config/config.h"
#include "data/dataset.h"
#include "elastic/local_launch.h"
#include "train/trainer.h"

namespace elastrain {

namespace {
int Fail(const Status& st) { return FailCommand("", st); }

void PrintSummary(const TrainSummary& s) {
  const double drop = s.first_eval_loss > 0 ? 100.0 * (1.0 - s.final_eval_loss / s.first_eval_loss) : 0.0;
  std::printf(
      "\nTraining finished: %lld steps in %.1fs\n"
      "  loss       %.4f -> %.4f\n"
      "  eval loss  %.4f -> %.4f (%.1f%% lower)\n"
      "  throughput %.0f tokens/s, MFU %.1f%%\n"
      "  batch      %lld sequences per step (%lld micro-batches per rank)\n"
      "  outputs    %s/{config.yml,metrics.jsonl,train.log,summary.json}\n",
      static_cast<long long>(s.steps), s.wall_seconds, s.first_loss, s.final_loss, s.first_eval_loss,
      s.final_eval_loss, drop, s.tokens_per_sec, 100 * s.mfu, static_cast<long long>(s.global_batch_size),
      static_cast<long long>(s.micro_batches_per_step), s.run_dir.c_str());
}

Result<TrainSummary> ReadSummary(const std::string& run_dir) {
  ELASTRAIN_ASSIGN_OR_RETURN(std::string text, ReadFile(run_dir + "/summary.json"));
  TrainSummary s;
  try {
    auto j = nlohmann::json::parse(text);
    s.run_dir = run_dir;
    s.steps = j.at("steps");
    s.global_batch_size = j.at("global_batch_size");
    s.micro_batches_per_step = j.at("micro_batches_per_step");
    s.first_loss = j.at("first_loss");
    s.final_loss = j.at("final_loss");
    s.first_eval_loss = j.at("first_eval_loss");
    s.final_eval_loss = j.at("final_eval_loss");
    s.tokens_per_sec = j.at("tokens_per_sec");
    s.mfu = j.at("mfu");
    s.wall_seconds = j.at("wall_seconds");
  } catch (const std::exception& e) {
    return Status::Corruption(run_dir + "/summary.json: " + e.what());
  }
  return s;
}

// The last "error:" line a worker printed, to explain its exit.
std::string LastErrorLine(const std::string& log_path) {
  std::ifstream in(log_path);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find("error:") != std::string::npos) last = line;
  return last;
}

int RunWorkers(const TrainConfig& cfg) {
  // Tokenise the corpus once here, so that the workers find the token cache ready.
  if (cfg.dataset_type == "text") {
    DatasetOptions o;
    o.type = cfg.dataset_type;
    o.path = cfg.dataset_path;
    o.tokenizer_path = cfg.tokenizer_path;
    o.cache_dir = cfg.base_output_directory + "/.cache";
    o.seq_len = cfg.max_target_length;
    o.vocab_size = cfg.model.vocab_size;
    o.eval_split_fraction = cfg.eval_split_fraction;
    auto d = OpenDataset(o);
    if (!d.ok()) return Fail(d.status());
  }
  auto launched = LaunchLocalWorkers(cfg);
  if (!launched.ok()) return Fail(launched.status());
  const LaunchResult& r = launched.value();
  if (!r.ok()) {
    const WorkerExit& first = r.exits.front();
    std::string why = LastErrorLine(fmt::format("{}/logs/rank_{}.log", r.run_dir, first.rank));
    std::fprintf(stderr, "elastrain: error: training failed: %s%s%s\n", first.Describe().c_str(),
                 why.empty() ? "" : "; ", why.c_str());
    for (size_t i = 1; i < r.exits.size(); ++i)
      if (!r.exits[i].ok()) LOG_INFO("then {}", r.exits[i].Describe());
    return 1;
  }
  auto s = ReadSummary(r.run_dir);
  if (!s.ok()) return Fail(s.status());
  PrintSummary(s.value());
  return 0;
}
}  // namespace

int RunTrainCommand(const std::vector<std::string>& args) {
  for (const std::string& a : args)
    if (a == "-h" || a == "--help") {
      std::printf("usage: elastrain train [CONFIG.yml] [key=value ...]\n"
                  "Every key, its default and meaning: configs/base.yml\n");
      return 0;
    }
  auto cfg = LoadConfigFromArgs(args);
  if (!cfg.ok()) return Fail(cfg.status());
  SetLogLevel(cfg->log_level);
  // An impossible mesh fails here, before any process starts.
  auto mesh = ResolveMeshForConfig(cfg.value());
  if (!mesh.ok()) return Fail(mesh.status());
  if (cfg->num_workers > 1) return RunWorkers(cfg.value());
  auto summary = Train(cfg.value());
  if (!summary.ok()) return Fail(summary.status());
  PrintSummary(summary.value());
  return 0;
}

int RunWorkerCommand(const std::vector<std::string>& args) {
  std::string run_dir;
  WorkerContext ctx;
  for (size_t i = 0; i + 1 < args.size(); i += 2) {
    if (args[i] == "--run-dir") run_dir = args[i + 1];
    else if (args[i] == "--rank") ctx.rank = std::stoi(args[i + 1]);
    else if (args[i] == "--world") ctx.world = std::stoi(args[i + 1]);
    else if (args[i] == "--prefix") ctx.prefix = args[i + 1];
    else return Fail(Status::InvalidArgument("worker: unknown flag " + args[i]));
  }
  if (run_dir.empty()) return Fail(Status::InvalidArgument("worker: --run-dir is required"));
  auto cfg = LoadConfig(run_dir + "/config.yml", {}, nullptr);
  if (!cfg.ok()) return Fail(cfg.status());
  SetLogLevel(cfg->log_level);
  ctx.rendezvous_dir = run_dir + "/rendezvous";
  ctx.describe_lost_peers = [run_dir] { return DescribeLostPeers(run_dir); };
  auto summary = Train(cfg.value(), ctx);
  if (!summary.ok()) return Fail(summary.status());
  return 0;
}

}  // namespace elastrain
