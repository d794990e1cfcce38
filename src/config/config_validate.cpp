#include "config/config_validate.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <string_view>
#include <utility>

#include "common/checked_math.h"
#include "common/dataset_path.h"
#include "common/files.h"
#include "config/config_keys.h"
#include "model/activations.h"

namespace elastrain {
namespace {

// Ranks are ints (Gloo's too); this bound keeps every rank and group size far from overflow.
constexpr int64_t kMaxWorkers = 1 << 20;
// The documented ranges of the integer keys (configs/base.yml says the same). They keep
// every count derived from a config (samples, tokens, step numbers, offsets) far from
// int64 overflow; the products that could still overflow are checked in ValidateSizes.
constexpr int64_t kMaxSteps = int64_t{1} << 40;         // steps and every period or step number
constexpr int64_t kMaxBatchRows = int64_t{1} << 20;     // per_device_batch_size, accumulation, eval_steps
constexpr int64_t kMaxGlobalBatch = int64_t{1} << 30;   // rows of one optimizer step
constexpr int64_t kMaxThreads = 4096;
constexpr int64_t kMaxCheckpointsKept = int64_t{1} << 20;

struct IntRange {
  const char* key;
  int64_t TrainConfig::*field;
  int64_t lo, hi;
};
// Upper bounds of every integer key (lower bounds, with their own messages, are in the
// topic checks below); the model shape keys are bounded by ModelConfig::Validate
// (model/model_config.h), num_workers by ResolveWorkerRange, the seeds take any int64.
constexpr IntRange kIntRanges[] = {
    {"log_period", &TrainConfig::log_period, 1, kMaxSteps},
    {"per_device_batch_size", &TrainConfig::per_device_batch_size, 1, kMaxBatchRows},
    {"global_batch_size", &TrainConfig::global_batch_size, 0, kMaxGlobalBatch},
    {"gradient_accumulation_steps", &TrainConfig::gradient_accumulation_steps, 1, kMaxBatchRows},
    {"max_target_length", &TrainConfig::max_target_length, 1, kMaxSeqLen},
    {"steps", &TrainConfig::steps, 1, kMaxSteps},
    {"learning_rate_schedule_steps", &TrainConfig::learning_rate_schedule_steps, 1, kMaxSteps},
    {"eval_interval", &TrainConfig::eval_interval, -kMaxSteps, kMaxSteps},
    {"eval_steps", &TrainConfig::eval_steps, 1, kMaxBatchRows},
    {"sample_period", &TrainConfig::sample_period, 0, kMaxSteps},
    {"threads_per_worker", &TrainConfig::threads_per_worker, 0, kMaxThreads},
    {"record_consumed_samples", &TrainConfig::record_consumed_samples, 0, 1},
    {"fail_at_step", &TrainConfig::fail_at_step, 0, kMaxSteps},
    {"checkpoint_period", &TrainConfig::checkpoint_period, 1, kMaxSteps},
    {"checkpoint_period_min", &TrainConfig::checkpoint_period_min, 1, kMaxSteps},
    {"checkpoint_period_max", &TrainConfig::checkpoint_period_max, 1, kMaxSteps},
    {"max_num_checkpoints_to_keep", &TrainConfig::max_num_checkpoints_to_keep, -1, kMaxCheckpointsKept},
    {"memory_snapshot_period", &TrainConfig::memory_snapshot_period, 0, kMaxSteps},
    {"memory_snapshot_replicas", &TrainConfig::memory_snapshot_replicas, 1, 8},
    {"ici_data_parallelism", &TrainConfig::ici_data_parallelism, -1, kMaxWorkers},
    {"ici_fsdp_parallelism", &TrainConfig::ici_fsdp_parallelism, -1, kMaxWorkers},
    {"ici_tensor_parallelism", &TrainConfig::ici_tensor_parallelism, -1, kMaxWorkers},
    {"max_failures", &TrainConfig::max_failures, -1, kMaxWorkers},
    {"host_failure_threshold", &TrainConfig::host_failure_threshold, 1, kMaxWorkers},
    {"straggler_persistence_steps", &TrainConfig::straggler_persistence_steps, 1, kMaxSteps},
    {"dashboard_port", &TrainConfig::dashboard_port, 0, 65535},
};

Status Bad(std::string_view key, const auto& value, std::string_view expected) {
  return Status::InvalidArgument(fmt::format("{}={}: {}", key, value, expected));
}

Status AtLeast(std::string_view key, int64_t v, int64_t min) {
  if (v >= min) return Status::OK();
  if (min == 1) return Bad(key, v, "expected a positive integer");
  return Bad(key, v, fmt::format("expected an integer >= {}", min));
}

Status NonNegative(std::string_view key, double v) {
  return v >= 0 ? Status::OK() : Bad(key, v, "expected a number >= 0");
}

// [0,1] when `one_inclusive`, else [0,1).
Status Fraction(std::string_view key, double v, bool one_inclusive) {
  bool ok = v >= 0 && (one_inclusive ? v <= 1 : v < 1);
  return ok ? Status::OK() : Bad(key, v, one_inclusive ? "expected a number in [0, 1]" : "expected a number in [0, 1)");
}

Status PathExists(std::string_view key, const std::string& path) {
  if (FileExists(path) || IsDirectory(path)) return Status::OK();
  return Bad(key, path, "no such file or directory");
}

Status ValidateUpperBounds(const TrainConfig& c) {
  for (const IntRange& r : kIntRanges)
    if (c.*r.field > r.hi)
      return Bad(r.key, c.*r.field, fmt::format("expected an integer in [{}, {}] (configs/base.yml)", r.lo, r.hi));
  return Status::OK();
}

// Products of keys that are each in range but could overflow together: the global
// batch, the samples and tokens of the whole run (sample positions are step*GB + j),
// the activation memory of a micro-batch and the training state of the model.
Status ValidateSizes(const TrainConfig& c) {
  int64_t gb = c.global_batch_size;
  if (gb == 0) {
    Result<int64_t> rows = CheckedProduct({c.per_device_batch_size, c.max_workers, c.gradient_accumulation_steps},
                                          "per_device_batch_size*num_workers*gradient_accumulation_steps");
    if (!rows.ok()) return rows.status();
    if (*rows > kMaxGlobalBatch)
      return Status::InvalidArgument(fmt::format(
          "global_batch_size=0: per_device_batch_size*num_workers*gradient_accumulation_steps = {}*{}*{} = {} rows; "
          "expected at most {} (set smaller values)",
          c.per_device_batch_size, c.max_workers, c.gradient_accumulation_steps, *rows, kMaxGlobalBatch));
    gb = *rows;
  }
  Result<int64_t> samples = CheckedMul(c.steps, gb, "steps*global batch (samples of the run)");
  if (!samples.ok()) return samples.status();
  Result<int64_t> tokens = CheckedMul(*samples, c.max_target_length,
                                      "steps*global batch*max_target_length (tokens of the run)");
  if (!tokens.ok()) return tokens.status();
  Result<int64_t> params = CheckedMul(c.model.NumParams(), 16, "bytes of parameters, gradients and AdamW state");
  if (!params.ok()) return params.status();
  return CheckedActivationFloats(c.model, c.per_device_batch_size, c.max_target_length, c.remat_policy).status();
}

Status ValidateRun(const TrainConfig& c) {
  if (c.run_name.empty()) return Bad("run_name", "", "expected a non-empty name");
  // One path component of letters, digits, '.', '_' and '-' (not "." or ".."): it names a
  // folder under base_output_directory and goes into file names, keys and log lines.
  const bool one_component =
      c.run_name.size() <= 128 && c.run_name != "." && c.run_name != ".." &&
      c.run_name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
          std::string::npos;
  if (!one_component)
    return Bad("run_name", c.run_name,
               "expected one folder name under base_output_directory: at most 128 of A-Z a-z 0-9 . _ -, "
               "not . or ..");
  ELASTRAIN_RETURN_IF_ERROR(AtLeast("log_period", c.log_period, 1));
  return Status::OK();
}

Status ValidateBatch(const TrainConfig& c) {
  ELASTRAIN_RETURN_IF_ERROR(AtLeast("per_device_batch_size", c.per_device_batch_size, 1));
  if (c.global_batch_size < 0)
    return Bad("global_batch_size", c.global_batch_size,
               "expected an integer >= 0 (0: per_device_batch_size * workers * gradient_accumulation_steps)");
  ELASTRAIN_RETURN_IF_ERROR(AtLeast("gradient_accumulation_steps", c.gradient_accumulation_steps, 1));
  return Status::OK();
}

Status ValidateOptimisation(const TrainConfig& c) {
  ELASTRAIN_RETURN_IF_ERROR(AtLeast("steps", c.steps, 1));
  ELASTRAIN_RETURN_IF_ERROR(NonNegative("learning_rate", c.learning_rate));
  ELASTRAIN_RETURN_IF_ERROR(Fraction("warmup_steps_fraction", c.warmup_steps_fraction, true));
  ELASTRAIN_RETURN_IF_ERROR(
      Fraction("cosine_learning_rate_final_fraction", c.cosine_learning_rate_final_fraction, true));
  ELASTRAIN_RETURN_IF_ERROR(Fraction("adam_b1", c.adam_b1, false));
  ELASTRAIN_RETURN_IF_ERROR(Fraction("adam_b2", c.adam_b2, false));
  if (!(c.adam_eps > 0)) return Bad("adam_eps", c.adam_eps, "expected a number > 0");
  ELASTRAIN_RETURN_IF_ERROR(NonNegative("adam_weight_decay", c.adam_weight_decay));
  ELASTRAIN_RETURN_IF_ERROR(NonNegative("gradient_clipping_threshold", c.gradient_clipping_threshold));
  return Status::OK();
}

// The file dataset types (and a blend of any type): dataset_path names something, a
// blend's weights are positive and finite; each path is checked when the data opens
// (a glob, a Megatron prefix).
Status ValidateDatasetFiles(const TrainConfig& c) {
  if (c.dataset_type == DatasetType::kSynthetic) return Status::OK();
  if (c.dataset_path.empty())
    return Bad("dataset_path", "", fmt::format("dataset_type={} needs files (a path, a directory, a glob or a blend "
                                               "\"W1 PATH1 W2 PATH2\"; docs/datasets.md)",
                                               ChoiceWord(kDatasetTypeChoices, c.dataset_type)));
  ELASTRAIN_RETURN_IF_ERROR(ParseDatasetPath(c.dataset_path).status());
  if (c.dataset_type == DatasetType::kJsonl && c.train_data_columns.empty())
    return Bad("train_data_columns", "", "dataset_type=jsonl needs the JSON field that holds the text, e.g. text");
  return Status::OK();
}

Status ValidateData(const TrainConfig& c) {
  if (c.dataset_type == DatasetType::kText && !IsDatasetBlend(c.dataset_path)) {
    if (c.dataset_path.empty())
      return Bad("dataset_path", "", "dataset_type=text needs a text file or a directory of text files");
    ELASTRAIN_RETURN_IF_ERROR(PathExists("dataset_path", c.dataset_path));
  }
  ELASTRAIN_RETURN_IF_ERROR(ValidateDatasetFiles(c));
  // Only text data reads the tokenizer (a MaxText config names one of MaxText's assets
  // even for synthetic data).
  if ((c.dataset_type == DatasetType::kText || c.dataset_type == DatasetType::kJsonl) && !c.tokenizer_path.empty())
    ELASTRAIN_RETURN_IF_ERROR(PathExists("tokenizer_path", c.tokenizer_path));
  // An empty path with MaxText's default type (sentencepiece) is bytes (data/tokenizer.h).
  if (c.dataset_type == DatasetType::kText && c.tokenizer_path.empty() && c.tokenizer_type &&
      (*c.tokenizer_type == TokenizerType::kTiktoken || *c.tokenizer_type == TokenizerType::kHuggingFace))
    return Bad("tokenizer_path", "", "tokenizer_type=" + std::string(TokenizerTypeName(*c.tokenizer_type)) +
                                         " needs a tokenizer file (tiktoken) or a directory with vocab.json and merges.txt (huggingface)");
  if (c.dataset_type == DatasetType::kText && !c.tokenizer_path.empty() && c.tokenizer_type == TokenizerType::kBytes)
    return Bad("tokenizer_type", "bytes", "tokenizer_type=bytes takes no tokenizer_path (" + c.tokenizer_path +
                                            "): leave tokenizer_path empty, or name the type of that file");
  if (!(c.eval_split_fraction > 0 && c.eval_split_fraction <= 0.5))
    return Bad("eval_split_fraction", c.eval_split_fraction, "expected a number in (0, 0.5]");
  ELASTRAIN_RETURN_IF_ERROR(AtLeast("eval_steps", c.eval_steps, 1));
  if (c.eval_interval < -kMaxSteps)
    return Bad("eval_interval", c.eval_interval, fmt::format("expected an integer in [{}, {}]", -kMaxSteps, kMaxSteps));
  return Status::OK();
}

Status ValidateCompute(const TrainConfig& c) {
  ELASTRAIN_RETURN_IF_ERROR(AtLeast("threads_per_worker", c.threads_per_worker, 0));
  ELASTRAIN_RETURN_IF_ERROR(NonNegative("hardware_peak_tflops", c.hardware_peak_tflops));
  ELASTRAIN_RETURN_IF_ERROR(AtLeast("fail_at_step", c.fail_at_step, 0));
  ELASTRAIN_RETURN_IF_ERROR(AtLeast("record_consumed_samples", c.record_consumed_samples, 0));
  if (c.fail_rank < 0 || c.fail_rank >= c.max_workers)
    return Bad("fail_rank", c.fail_rank, fmt::format("expected a rank in [0, {}) (num_workers={})", c.max_workers,
                                                    c.num_workers_spec));
  return Status::OK();
}

Status ValidateCheckpoints(const TrainConfig& c) {
  ELASTRAIN_RETURN_IF_ERROR(AtLeast("checkpoint_period", c.checkpoint_period, 1));
  if (!(c.checkpoint_mtti_prior_seconds > 0))
    return Bad("checkpoint_mtti_prior_seconds", c.checkpoint_mtti_prior_seconds, "expected a number of seconds > 0");
  ELASTRAIN_RETURN_IF_ERROR(AtLeast("checkpoint_period_min", c.checkpoint_period_min, 1));
  if (c.checkpoint_period_max < c.checkpoint_period_min)
    return Bad("checkpoint_period_max", c.checkpoint_period_max,
               fmt::format("expected an integer >= checkpoint_period_min={}", c.checkpoint_period_min));
  if (c.max_num_checkpoints_to_keep < -1)
    return Bad("max_num_checkpoints_to_keep", c.max_num_checkpoints_to_keep,
               "expected an integer >= -1 (0 or -1: keep all)");
  if (!c.load_full_state_path.empty()) ELASTRAIN_RETURN_IF_ERROR(PathExists("load_full_state_path", c.load_full_state_path));
  if (!c.load_parameters_path.empty()) ELASTRAIN_RETURN_IF_ERROR(PathExists("load_parameters_path", c.load_parameters_path));
  return Status::OK();
}

// The product of the axes and the model constraints are checked by ResolveMesh (plan/mesh.h).
Status ValidateParallelism(const TrainConfig& c) {
  const char* fill_key = nullptr;
  for (auto [key, v] : {std::pair<const char*, int64_t>{"ici_data_parallelism", c.ici_data_parallelism},
                        {"ici_fsdp_parallelism", c.ici_fsdp_parallelism},
                        {"ici_tensor_parallelism", c.ici_tensor_parallelism}}) {
    if (v < -1) return Bad(key, v, "expected a positive integer, 0 (not given) or -1 (fill with the workers left)");
    if (v == -1 && fill_key)
      return Status::InvalidArgument(
          fmt::format("{}=-1 and {}=-1: at most one mesh axis may be -1 (fill)", fill_key, key));
    if (v == -1) fill_key = key;
  }
  if (!(c.collective_timeout > 0))
    return Bad("collective_timeout", c.collective_timeout, "expected a number of seconds > 0");
  return Status::OK();
}

Status ValidateElastic(const TrainConfig& c) {
  ELASTRAIN_RETURN_IF_ERROR(AtLeast("max_failures", c.max_failures, -1));
  if (!(c.resource_wait_timeout > 0))
    return Bad("resource_wait_timeout", c.resource_wait_timeout, "expected a number of seconds > 0");
  if (!(c.worker_heartbeat_timeout > 0))
    return Bad("worker_heartbeat_timeout", c.worker_heartbeat_timeout, "expected a number of seconds > 0");
  if (!(c.preemption_notice_seconds > 0))
    return Bad("preemption_notice_seconds", c.preemption_notice_seconds, "expected a number of seconds > 0");
  ELASTRAIN_RETURN_IF_ERROR(AtLeast("host_failure_threshold", c.host_failure_threshold, 1));
  ELASTRAIN_RETURN_IF_ERROR(NonNegative("host_cooldown_seconds", c.host_cooldown_seconds));
  if (!(c.straggler_threshold > 1 && c.straggler_threshold < 1e6))
    return Bad("straggler_threshold", c.straggler_threshold, "expected a slowdown factor > 1 (1.35: 35% slower than the median rank)");
  ELASTRAIN_RETURN_IF_ERROR(AtLeast("straggler_persistence_steps", c.straggler_persistence_steps, 1));
  if (c.dashboard_host.empty()) return Bad("dashboard_host", "", "expected an address such as 127.0.0.1");
  if (c.dashboard_port < 0 || c.dashboard_port > 65535)
    return Bad("dashboard_port", c.dashboard_port, "expected a port in [0, 65535] (0: any free port)");
  if (c.dashboard_tls_cert.empty() != c.dashboard_tls_key.empty())
    return Bad(c.dashboard_tls_cert.empty() ? "dashboard_tls_cert" : "dashboard_tls_key", "",
               "expected both dashboard_tls_cert and dashboard_tls_key (PEM files), or neither");
  if (!(c.cost_per_worker_hour >= 0))
    return Bad("cost_per_worker_hour", c.cost_per_worker_hour, "expected a price >= 0 (USD per worker-hour)");
  return Status::OK();
}

Status ValidateLaunch(const TrainConfig& c) { return LaunchProgram(c).status(); }

}  // namespace

Result<std::vector<std::string>> LaunchProgram(const TrainConfig& c) {
  std::vector<std::string> out;
  if (c.launch_program.empty()) return out;
  constexpr size_t kMaxArgs = 4096, kMaxArgBytes = 64 * 1024;
  const std::string shown = c.launch_program.substr(0, 80);
  auto j = nlohmann::json::parse(c.launch_program, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array() || j.empty() || j.size() > kMaxArgs)
    return Bad("launch_program", shown, "expected a JSON array of 1 to 4096 strings, e.g. [\"python3\", \"train.py\"]");
  for (const auto& a : j) {
    if (!a.is_string()) return Bad("launch_program", shown, "expected only strings in the array");
    const std::string& s = a.get_ref<const std::string&>();
    if (s.size() > kMaxArgBytes || s.find('\0') != std::string::npos)
      return Bad("launch_program", shown, "expected arguments of at most 64 KiB without NUL bytes");
    out.push_back(s);
  }
  if (out[0].empty()) return Bad("launch_program", shown, "expected a program name first");
  return out;
}

Status ValidateTrainConfig(const TrainConfig& c) {
  // By topic, in the order of configs/base.yml; the first problem found is reported.
  // Upper bounds first: nothing below may compute with an out-of-range value.
  ELASTRAIN_RETURN_IF_ERROR(ValidateUpperBounds(c));
  ELASTRAIN_RETURN_IF_ERROR(ValidateRun(c));
  ELASTRAIN_RETURN_IF_ERROR(ValidateBatch(c));
  ELASTRAIN_RETURN_IF_ERROR(ValidateOptimisation(c));
  ELASTRAIN_RETURN_IF_ERROR(ValidateData(c));
  ELASTRAIN_RETURN_IF_ERROR(ValidateCompute(c));
  ELASTRAIN_RETURN_IF_ERROR(ValidateCheckpoints(c));
  ELASTRAIN_RETURN_IF_ERROR(ValidateParallelism(c));
  ELASTRAIN_RETURN_IF_ERROR(ValidateLaunch(c));
  ELASTRAIN_RETURN_IF_ERROR(ValidateElastic(c));
  ELASTRAIN_RETURN_IF_ERROR(ValidateSizes(c));
  return Status::OK();
}

Status ResolveWorkerRange(TrainConfig* c) {
  const std::string& s = c->num_workers_spec;
  auto parse = [&](const std::string& t, int64_t* v) {
    if (t.empty() || t.size() > 9 || t.find_first_not_of("0123456789") != std::string::npos) return false;
    *v = std::stoll(t);
    return true;
  };
  const size_t colon = s.find(':');
  int64_t lo = 0, hi = 0;
  const bool ok = colon == std::string::npos ? parse(s, &lo) && (hi = lo, true)
                                             : parse(s.substr(0, colon), &lo) && parse(s.substr(colon + 1), &hi);
  if (!ok || lo < 1 || hi < lo)
    return Bad("num_workers", s, "expected a positive integer N, or MIN:MAX with 1 <= MIN <= MAX (e.g. 2:4)");
  if (hi > kMaxWorkers) return Bad("num_workers", s, fmt::format("expected at most {} workers", kMaxWorkers));
  c->min_workers = lo;
  c->max_workers = hi;
  c->num_workers = hi;
  return Status::OK();
}

Status ResolveCheckpointPeriod(TrainConfig* c) {
  const std::string& s = c->checkpoint_period_spec;
  c->checkpoint_period_auto = s == "auto";
  if (c->checkpoint_period_auto) {
    c->checkpoint_period = std::max<int64_t>(c->checkpoint_period_min, 1);
    return Status::OK();
  }
  int64_t v = 0;
  if (!ParseConfigInteger(s, &v) || v < 1 || v > kMaxSteps)
    return Bad("checkpoint_period", s, fmt::format("expected a positive number of steps, or auto (chosen from the "
                                                   "measured save cost and the failures seen); at most {} steps", kMaxSteps));
  c->checkpoint_period = v;
  return Status::OK();
}

Status ResolveMemorySnapshotPeriod(TrainConfig* c) {
  const std::string& s = c->memory_snapshot_period_spec;
  c->memory_snapshot_period_auto = s == "auto";
  if (c->memory_snapshot_period_auto) {
    c->memory_snapshot_period = 1;
    return Status::OK();
  }
  int64_t v = 0;
  if (!ParseConfigInteger(s, &v) || v < 0 || v > kMaxSteps)
    return Bad("memory_snapshot_period", s, fmt::format("expected a number of steps in [0, {}] (0: off), or auto "
                                                        "(chosen from the measured copy cost and the failures seen)",
                                                        kMaxSteps));
  c->memory_snapshot_period = v;
  return Status::OK();
}

Status ResolveSchedule(TrainConfig* c) {
  if (c->steps == -1 && c->learning_rate_schedule_steps == -1)
    return Status::InvalidArgument(
        "steps=-1: follows learning_rate_schedule_steps, which is -1 too (follows steps); expected one of them to be "
        "a positive number of steps");
  if (c->steps == 0 || c->steps < -1)
    return Bad("steps", c->steps, "expected a positive integer, or -1 (learning_rate_schedule_steps)");
  if (c->learning_rate_schedule_steps == 0 || c->learning_rate_schedule_steps < -1)
    return Bad("learning_rate_schedule_steps", c->learning_rate_schedule_steps,
               "expected a positive integer, or -1 (steps)");
  if (c->steps == -1) c->steps = c->learning_rate_schedule_steps;
  if (c->learning_rate_schedule_steps == -1) c->learning_rate_schedule_steps = c->steps;
  return Status::OK();
}

Status ResolveBatch(TrainConfig* c) {
  const std::string spec = c->per_device_batch_size_spec;  // a copy: resolved below
  double p = 0;
  if (!ParseConfigNumber(spec, &p))
    return Bad("per_device_batch_size", spec, "expected a number of rows (e.g. 8, or 0.5 as in MaxText)");
  if (!(p > 0) || p > static_cast<double>(kMaxBatchRows))
    return Bad("per_device_batch_size", spec,
               fmt::format("expected a number of rows in (0, {}]; a fraction such as 0.5 shares rows among "
                           "workers, as in MaxText",
                           kMaxBatchRows));
  const double rows = std::ceil(p);
  c->per_device_batch_size = static_cast<int64_t>(rows);
  c->per_device_batch_size_spec = std::to_string(c->per_device_batch_size);
  if (rows == p || c->global_batch_size != 0) return Status::OK();
  if (c->gradient_accumulation_steps < 1 || c->gradient_accumulation_steps > kMaxBatchRows)
    return Status::OK();  // ValidateBatch names gradient_accumulation_steps
  // A fraction: MaxText's global batch, int(per_device_batch_size * devices).
  const double gb =
      std::floor(p * static_cast<double>(c->max_workers) * static_cast<double>(c->gradient_accumulation_steps));
  if (gb < 1 || gb > static_cast<double>(kMaxGlobalBatch))
    return Bad("per_device_batch_size", spec,
               fmt::format("times num_workers={} and gradient_accumulation_steps={} gives {} rows per step; "
                           "expected 1 to {} (or set global_batch_size)",
                           c->max_workers, c->gradient_accumulation_steps, gb, kMaxGlobalBatch));
  c->global_batch_size = static_cast<int64_t>(gb);
  return Status::OK();
}

}  // namespace elastrain
