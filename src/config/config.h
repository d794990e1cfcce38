// The run configuration: MaxText key names where MaxText has them, elastrain's own
// otherwise. configs/base.yml documents every key and is embedded in the binary as the
// defaults; a CONFIG.yml and then `key=value` overrides are applied on top.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/choice.h"
#include "common/dataset_type.h"
#include "common/dtype.h"
#include "common/gemm_backend.h"
#include "common/log_level.h"
#include "common/tokenizer_type.h"
#include "common/status.h"
#include "model/activations.h"
#include "model/model_config.h"
#include "config/decoder_block.h"

namespace elastrain {

// The keys with a fixed set of words are enums from the moment the config loads; each
// table below (and kRematPolicyChoices, kGemmBackendChoices, kLogLevelChoices,
// kDatasetTypeChoices, kDecoderBlockChoices) is the one list of a key's
// words, used to parse it, print it and name the allowed values in errors.

// fail_at_step's failure (configs/base.yml).
enum class FailMode {
  kExit,     // the generation fails and the worker exits with code 1
  kKill,     // SIGKILL: the process vanishes
  kHang,     // SIGSTOP: the process stops making progress
  kPreempt,  // SIGTERM: a spot notice
  kKillMidSnapshot,  // SIGKILL halfway through sending the step's RAM-tier snapshot (a torn copy)
};
inline constexpr std::array<Choice<FailMode>, 5> kFailModeChoices = {{
    {"exit", FailMode::kExit},
    {"kill", FailMode::kKill},
    {"hang", FailMode::kHang},
    {"preempt", FailMode::kPreempt},
    {"kill_mid_snapshot", FailMode::kKillMidSnapshot},
}};
constexpr std::string_view FailModeName(FailMode m) { return ChoiceWord(kFailModeChoices, m); }

// How the controller places ranks on hosts.
enum class PlacementStrategy {
  kPack,    // fill a host before the next
  kSpread,  // one rank per host in turn
};
inline constexpr std::array<Choice<PlacementStrategy>, 2> kPlacementStrategyChoices = {{
    {"PACK", PlacementStrategy::kPack},
    {"SPREAD", PlacementStrategy::kSpread},
}};
constexpr std::string_view PlacementStrategyName(PlacementStrategy p) {
  return ChoiceWord(kPlacementStrategyChoices, p);
}

// What the controller does about a straggler (issue 32, docs/elastic.md).
enum class StragglerPolicy {
  kAlert,    // an event, a gauge and a dashboard mark; the job goes on at the slow pace
  kExclude,  // also cool the host down and re-plan without it, when that pays
};
inline constexpr std::array<Choice<StragglerPolicy>, 2> kStragglerPolicyChoices = {{
    {"alert", StragglerPolicy::kAlert},
    {"exclude", StragglerPolicy::kExclude},
}};
constexpr std::string_view StragglerPolicyName(StragglerPolicy p) { return ChoiceWord(kStragglerPolicyChoices, p); }

// What a failed checkpoint save does to training (the previous checkpoint stays intact).
enum class CheckpointFailurePolicy {
  kContinue,  // log it and train on
  kFail,      // fail the generation
};
inline constexpr std::array<Choice<CheckpointFailurePolicy>, 2> kCheckpointFailurePolicyChoices = {{
    {"continue", CheckpointFailurePolicy::kContinue},
    {"fail", CheckpointFailurePolicy::kFail},
}};
constexpr std::string_view CheckpointFailurePolicyName(CheckpointFailurePolicy p) {
  return ChoiceWord(kCheckpointFailurePolicyChoices, p);
}

struct TrainConfig {
  // --- run ---
  std::string run_name;  // LoadConfig: never empty (an empty one becomes UniqueRunName())
  std::string base_output_directory = "runs";
  LogLevel log_level = LogLevel::kInfo;  // trace | debug | info | warn | error
  int64_t log_period = 10;        // steps between metrics.jsonl lines
  // --- model (model_name picks a preset; base_* keys given explicitly override it) ---
  std::string model_name = "small";
  // MaxText's decoder block (config/decoder_block.h); unset: the preset's. After
  // LoadConfig always set.
  std::optional<DecoderBlock> decoder_block;
  // A MaxText configs folder: model_name=NAME loads its models/NAME.yml (as MaxText does
  // next to the config file); empty: only next to the config file.
  std::string maxtext_configs;
  ModelConfig model;              // resolved shapes (filled by LoadConfig)
  // --- batch ---
  // Key per_device_batch_size as given: rows per worker per accumulation step, which
  // MaxText lets be a fraction (0.5: one row for every two workers). LoadConfig resolves
  // it into per_device_batch_size (whole rows) and, for a fraction, global_batch_size.
  std::string per_device_batch_size_spec = "8";
  int64_t per_device_batch_size = 8;   // micro-batch rows per worker per accumulation step
  int64_t global_batch_size = 0;       // 0: per_device_batch_size * workers * gradient_accumulation_steps
  int64_t gradient_accumulation_steps = 1;
  int64_t max_target_length = 0;       // sequence length T; 0: from the preset (capped at 128)
  // --- optimisation ---
  int64_t steps = 200;                 // -1: learning_rate_schedule_steps (resolved by LoadConfig)
  // Length of the warmup + cosine schedule (MaxText's key); steps past it train at
  // learning rate 0. -1: follows steps (resolved by LoadConfig to a positive count), so a
  // run whose steps are extended keeps its schedule only when this is set explicitly.
  int64_t learning_rate_schedule_steps = -1;
  double learning_rate = 3e-4;
  double warmup_steps_fraction = 0.1;
  double cosine_learning_rate_final_fraction = 0.1;
  double adam_b1 = 0.9, adam_b2 = 0.95, adam_eps = 1e-8, adam_weight_decay = 0.1;
  double gradient_clipping_threshold = 1.0;  // 0 disables
  RematPolicy remat_policy = RematPolicy::kNone;  // none | full
  int64_t init_weights_seed = 0;
  // --- data ---
  DatasetType dataset_type = DatasetType::kSynthetic;  // synthetic | text | llmc | nanogpt | megatron | jsonl
  std::string dataset_path;                  // files of the dataset, or a blend "W1 PATH1 W2 PATH2 ..."
  std::string tokenizer_path;                // sentencepiece .model; empty: bytes
  std::optional<TokenizerType> tokenizer_type;  // unset: chosen from tokenizer_path (data/tokenizer.h)
  std::string train_data_columns = "text";   // jsonl: the field of each line that holds the text
  int64_t data_shuffle_seed = 0;
  double eval_split_fraction = 0.05;         // share of the corpus held out for validation
  int64_t eval_interval = 50;                // steps between evaluations; <= 0: none (MaxText's -1)
  int64_t eval_steps = 4;                    // validation batches per evaluation
  int64_t sample_period = 0;                 // > 0: the chief logs a short greedy sample every N steps
  // --- compute ---
  int64_t threads_per_worker = 0;            // 0: the host's cores / its slots (all cores in-process)
  GemmBackend gemm_backend = GemmBackend::kOneDnn;  // onednn | openblas
  ComputeDtype dtype = ComputeDtype::kFloat32;      // float32 | bfloat16: the GEMMs' operands (kernels/gemm_matmul.h)
  WeightDtype weight_dtype = WeightDtype::kFloat32;  // float32 only: master weights and AdamW state
  double hardware_peak_tflops = 0;           // for MFU; 0: measure the SGEMM ceiling at start
  std::string final_params_path;             // non-empty: write the final parameters (raw fp32, global layout)
  int64_t record_consumed_samples = 0;       // 1: each rank logs the sample indices it trains on (tests)
  int64_t fail_at_step = 0;                  // > 0: rank fail_rank fails after this step (once per job)
  int64_t fail_rank = 0;                     // the rank that fail_at_step fails
  FailMode fail_mode = FailMode::kExit;      // exit | kill | hang | preempt (see base.yml)
  // --- checkpoints (ckpt/, docs/checkpoint-format.md) ---
  bool enable_checkpointing = true;
  std::string checkpoint_period_spec = "100";  // key checkpoint_period: steps, or "auto"
  // Parsed from checkpoint_period_spec by LoadConfig. auto: the period is chosen in
  // training from the measured save cost and the failures seen (docs/cost.md), and
  // checkpoint_period holds checkpoint_period_min, the period until a save is measured.
  int64_t checkpoint_period = 100;
  bool checkpoint_period_auto = false;
  double checkpoint_mtti_prior_seconds = 86400;  // auto: the MTTI assumed before any failure
  int64_t checkpoint_period_min = 10;            // auto: bounds of the period, in steps
  int64_t checkpoint_period_max = 10000;
  bool async_checkpointing = true;
  int64_t max_num_checkpoints_to_keep = 3;
  bool save_checkpoint_on_completion = true;
  std::string load_full_state_path;
  std::string load_parameters_path;
  CheckpointFailurePolicy checkpoint_failure_policy = CheckpointFailurePolicy::kContinue;  // continue | fail
  // --- the RAM tier of sharded jobs (train/ram_tier_copies.h, docs/elastic.md) ---
  std::string memory_snapshot_period_spec = "1";  // key memory_snapshot_period: steps, 0 (off), or "auto"
  // Parsed from memory_snapshot_period_spec by LoadConfig. auto: the tier is kept (1 here)
  // and the period, or off, is chosen in training from the measured copy cost and the
  // failures seen (cost/snapshot_period.h, docs/cost.md).
  int64_t memory_snapshot_period = 1;    // steps between peer copies of each shard; 0: off
  bool memory_snapshot_period_auto = false;
  int64_t memory_snapshot_replicas = 1;  // buddy ranks holding a copy of each shard
  // --- parallelism (plan/mesh.h, docs/parallelism.md) ---
  std::string num_workers_spec = "1";        // key num_workers: "N" (fixed) or "MIN:MAX" (elastic)
  int64_t min_workers = 1, max_workers = 1;  // parsed from num_workers_spec by LoadConfig
  // The world size: max_workers after LoadConfig; a generation's worker sets it to the
  // generation's world. data x fsdp x tensor must multiply to this.
  int64_t num_workers = 1;
  int64_t ici_data_parallelism = 0;          // > 0: size; 0: not given; -1: fill with the workers left
  int64_t ici_fsdp_parallelism = 0;          // all three 0: chosen automatically (ResolveMesh)
  int64_t ici_tensor_parallelism = 0;
  double collective_timeout = 60;            // seconds a collective may block
  // --- elastic (elastic/, docs/elastic.md) ---
  int64_t max_failures = 3;                  // failures tolerated; -1 unlimited; resizes and preemptions do not count
  double resource_wait_timeout = 300;        // seconds to wait for min_workers before failing
  double worker_heartbeat_timeout = 60;      // seconds without progress before a worker counts as hung
  PlacementStrategy placement_strategy = PlacementStrategy::kPack;  // PACK | SPREAD
  double preemption_notice_seconds = 30;     // SIGTERM: save and leave within this
  int64_t host_failure_threshold = 2;        // failures on one host within host_cooldown_seconds that bench it
  double host_cooldown_seconds = 300;        // how long such a host is avoided
  // Gray failures (elastic/straggler.h): a rank whose compute time per step stays above
  // straggler_threshold x the median rank's for straggler_persistence_steps steps.
  StragglerPolicy straggler_policy = StragglerPolicy::kAlert;  // alert | exclude
  double straggler_threshold = 1.35;         // slowdown against the median rank, > 1
  int64_t straggler_persistence_steps = 10;  // steps it must stay slow before it is named
  std::string dashboard_host = "127.0.0.1";  // the controller's HTTP API
  int64_t dashboard_port = 8265;             // 0: any free port
  // The API's security (docs/observability.md): every request needs the run's token
  // except the page and, when this is true, /metrics.
  bool metrics_without_token = false;
  std::string dashboard_allowed_hosts;       // comma-separated Host names besides the bind address
  std::string dashboard_tls_cert;            // PEM: serve HTTPS (with dashboard_tls_key)
  std::string dashboard_tls_key;
  double cost_per_worker_hour = 0;           // USD, for the estimated cost on /metrics
  // --- launch (elastrain launch, docs/launch.md) ---
  std::string launch_program;                // a JSON array of strings; empty: the built-in trainer
  bool warm_spares = false;                  // keep a started program waiting per worker
};

// The program of `elastrain launch` (launch_program parsed): empty for the built-in
// trainer. InvalidArgument naming launch_program when it is not a JSON array of 1 to
// 4096 non-empty strings without NUL, each at most 64 KiB.
Result<std::vector<std::string>> LaunchProgram(const TrainConfig& c);

// Loads the embedded defaults, then `yaml_path` (if non-empty), then `overrides`
// ("key=value", applied in order; the value text is parsed into the key's type).
// Unknown keys that MaxText defines (in the YAML file or an override) are appended once
// each to `ignored` (may be null; reported once by the caller); any other unknown key is
// an error naming the closest valid key. Resolves `model` from model_name + explicit
// base_* keys (> 0) and validates everything; errors name the key and the value. On
// success decoder_block and max_target_length hold their resolved values.
Result<TrainConfig> LoadConfig(const std::string& yaml_path, const std::vector<std::string>& overrides,
                               std::vector<std::string>* ignored);
// A config from YAML text (e.g. ConfigToYaml's output sent to a worker), over the
// embedded defaults; `origin` names it in errors.
Result<TrainConfig> LoadConfigText(const std::string& yaml_text, const std::string& origin);
// LoadConfig with the YAML given as text, named `origin` in errors (LoadConfig reads its
// file and calls this; so does the config fuzzer, fuzz/fuzz_config.cpp).
Result<TrainConfig> LoadConfigText(const std::string& yaml_text, const std::string& origin,
                                   const std::vector<std::string>& overrides, std::vector<std::string>* ignored);
// The model a saved config describes (a checkpoint's config_yaml, a run's config.yml):
// only its model keys and max_target_length are read, as a model_name=default config (a
// saved config holds every shape key), so data paths that are gone do not matter.
Result<TrainConfig> LoadSavedModelConfig(const std::string& yaml_text, const std::string& origin);
// The default run_name: run-<local date>-<time>-<4 random hex digits>, new for every run
// (MaxText asks for a run_name; a resumable run is one given a name).
std::string UniqueRunName();
// The resolved config as YAML, every key, loadable by LoadConfig.
std::string ConfigToYaml(const TrainConfig& c);

// The keys LoadConfig listed as ignored, as a few readable lines: MaxText's keys that do
// not change what is trained here (docs/maxtext.md), then any key elastrain does not know
// (a newer MaxText's), each group wrapped at about 100 columns. Empty for none.
std::string IgnoredKeysSummary(const std::vector<std::string>& ignored);
// docs/maxtext.md's table: every MaxText key elastrain knows, in its class (honoured,
// refused unless neutral, irrelevant here), as Markdown. `elastrain config maxtext-keys`
// prints it; a test compares it with the page.
std::string MaxTextKeyTable();
// The embedded text of configs/base.yml.
const std::string& BaseConfigYaml();

}  // namespace elastrain
