#include "config/config_keys.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cctype>
#include <cmath>

namespace elastrain {

// KEY(name, group, field expression, doc): the unary + turns the capture-less lambda
// into the function pointer that ConfigField holds.
#define KEY(name, group, expr, doc) \
  ConfigKey { name, group, +[](TrainConfig& c) { return &c.expr; }, doc }
// CHOICE(name, group, field, table of words, hint for a bad word, doc): an enum field.
#define CHOICE(name, group, expr, table, hint, doc)                                                  \
  ConfigKey {                                                                                      \
    name, group,                                                                                   \
        ChoiceField{+[](TrainConfig& c, std::string_view w) {                                      \
                      const auto v = ParseChoice(table, w);                                        \
                      if (v) c.expr = *v;                                                          \
                      return v.has_value();                                                        \
                    },                                                                             \
                    +[](const TrainConfig& c) { return ChoiceWord(table, c.expr); },               \
                    +[] { return ChoiceList(table); }, hint},                                      \
        doc                                                                                        \
  }
// OPTIONAL_CHOICE: the same for a std::optional enum field, which the empty word unsets.
#define OPTIONAL_CHOICE(name, group, expr, table, hint, doc)                                         \
  ConfigKey {                                                                                      \
    name, group,                                                                                   \
        ChoiceField{+[](TrainConfig& c, std::string_view w) {                                      \
                      const auto v = ParseChoice(table, w);                                        \
                      if (v) c.expr = *v;                                                          \
                      else if (w.empty()) c.expr.reset();                                          \
                      return v.has_value() || w.empty();                                           \
                    },                                                                             \
                    +[](const TrainConfig& c) {                                                    \
                      return c.expr ? ChoiceWord(table, *c.expr) : std::string_view();             \
                    },                                                                             \
                    +[] { return ChoiceList(table); }, hint},                                      \
        doc                                                                                        \
  }

const std::vector<ConfigKey>& ConfigKeys() {
  static const std::vector<ConfigKey> keys = {
      KEY("run_name", "run", run_name, "outputs go to base_output_directory/run_name; no '/'; empty: run-<date>-<time>-<4 hex digits>, new for every run (give one to resume a run)"),
      KEY("base_output_directory", "run", base_output_directory, "directory that holds one folder per run"),
      CHOICE("log_level", "run", log_level, kLogLevelChoices, "", "trace | debug | info | warn | error"),
      KEY("log_period", "run", log_period, "steps between metrics.jsonl lines, in [1, 2^40]"),

      KEY("model_name", "model", model_name, "tiny | tiny-gpt2 | small | gpt2-124m | MaxText's llama2-7b, llama2-13b, llama2-70b, llama3-8b, llama3-70b, gpt3-52k, gpt3-6b, gpt3-22b, gpt3-175b | a MaxText models/NAME.yml (maxtext_configs) | default (set every shape key)"),
      OPTIONAL_CHOICE("decoder_block", "model", decoder_block, kDecoderBlockChoices, kDecoderBlockRefusalHint, "llama | gpt2 | mistral | gemma | gemma2 | qwen2 | qwen3 | olmo3 (MaxText's llama2, llama3, gpt3 too); empty: the preset's (docs/maxtext.md)"),
      KEY("maxtext_configs", "model", maxtext_configs, "a MaxText configs folder: model_name=NAME loads its models/NAME.yml; empty: only next to the config file (docs/maxtext.md)"),
      KEY("base_emb_dim", "model", model.emb_dim, "model width C, in [1, 131072]; 0: from the preset"),
      KEY("base_num_query_heads", "model", model.num_heads, "query heads, in [1, 4096]; 0: from the preset"),
      KEY("base_num_kv_heads", "model", model.num_kv_heads, "key/value heads, must divide the query heads, in [1, 4096]; 0: from the preset"),
      KEY("base_mlp_dim", "model", model.mlp_dim, "hidden width of the MLP, in [1, 1048576]; 0: from the preset"),
      KEY("base_num_decoder_layers", "model", model.num_layers, "transformer blocks, in [1, 4096]; 0: from the preset"),
      KEY("head_dim", "model", model.head_dim, "width of one attention head, in [1, 4096]; 0: from the preset"),
      KEY("vocab_size", "model", model.vocab_size, "vocabulary size, in [1, 16777216]; 0: from the preset"),

      KEY("per_device_batch_size", "batch", per_device_batch_size_spec, "micro-batch rows per worker per accumulation step, in (0, 2^20]; a fraction (MaxText's 0.5) sets global_batch_size = floor(it * workers * gradient_accumulation_steps) and micro-batches of ceil(it) rows"),
      KEY("global_batch_size", "batch", global_batch_size, "0: per_device_batch_size * workers * gradient_accumulation_steps; at most 2^30"),
      KEY("gradient_accumulation_steps", "batch", gradient_accumulation_steps, "micro-batches summed before each optimizer step, in [1, 2^20]"),
      KEY("max_target_length", "batch", max_target_length, "sequence length T, in [1, 1048576]; 0: the preset's, capped at 128"),

      KEY("steps", "optimisation", steps, "optimizer steps to train, in [1, 2^40], or -1: learning_rate_schedule_steps; steps * global batch * max_target_length must fit 64 bits"),
      KEY("learning_rate_schedule_steps", "optimisation", learning_rate_schedule_steps, "length of the warmup + cosine schedule, in [1, 2^40], or -1: steps; steps past it train at learning rate 0 (MaxText); set it to keep the schedule when extending steps"),
      KEY("learning_rate", "optimisation", learning_rate, "peak learning rate"),
      KEY("warmup_steps_fraction", "optimisation", warmup_steps_fraction, "share of steps with linear warmup, in [0,1]"),
      KEY("cosine_learning_rate_final_fraction", "optimisation", cosine_learning_rate_final_fraction, "final learning rate / peak after cosine decay, in [0,1]"),
      KEY("adam_b1", "optimisation", adam_b1, "AdamW decay of the first moment, in [0,1)"),
      KEY("adam_b2", "optimisation", adam_b2, "AdamW decay of the second moment, in [0,1)"),
      KEY("adam_eps", "optimisation", adam_eps, "AdamW epsilon added to the denominator, > 0"),
      KEY("adam_weight_decay", "optimisation", adam_weight_decay, "AdamW decoupled weight decay"),
      KEY("gradient_clipping_threshold", "optimisation", gradient_clipping_threshold, "clip the global gradient norm to this; 0 disables"),
      CHOICE("remat_policy", "optimisation", remat_policy, kRematPolicyChoices, " (elastrain implements only these; MaxText's finer policies are not supported)", "none | full (recompute each block's activations in backward)"),
      KEY("init_weights_seed", "optimisation", init_weights_seed, "seed of the weight initialisation (any 64-bit integer)"),

      CHOICE("dataset_type", "data", dataset_type, kDatasetTypeChoices, " (MaxText's tfds, hf and grain pipelines are not implemented: add dataset_type=synthetic, or dataset_type=text, llmc, nanogpt, megatron or jsonl with dataset_path)", "synthetic | text | llmc | nanogpt | megatron | jsonl (docs/datasets.md)"),
      KEY("dataset_path", "data", dataset_path, "a file, a directory or a glob (megatron: a PREFIX of PREFIX.bin/.idx); a blend: \"0.7 /data/a 0.3 /data/b\" (Megatron's weighted list)"),
      KEY("tokenizer_path", "data", tokenizer_path, "sentencepiece .model; empty: bytes"),
      OPTIONAL_CHOICE("tokenizer_type", "data", tokenizer_type, kTokenizerTypeChoices, "", "bytes | sentencepiece | tiktoken (Llama 3's tokenizer.model) | huggingface (GPT-2 BPE: a directory with vocab.json and merges.txt); empty: chosen from tokenizer_path (docs/tokenizers.md)"),
      KEY("train_data_columns", "data", train_data_columns, "jsonl: the field of each line that holds the text (MaxText's name; a one-element list [text] is read as text)"),
      KEY("data_shuffle_seed", "data", data_shuffle_seed, "seed of the data order (any 64-bit integer)"),
      KEY("eval_split_fraction", "data", eval_split_fraction, "share of the corpus held out for validation, in (0,0.5]"),
      KEY("eval_interval", "data", eval_interval, "steps between evaluations (at start and end too), in [-2^40, 2^40]; <= 0: no evaluation (MaxText's -1)"),
      KEY("eval_steps", "data", eval_steps, "validation batches per evaluation, in [1, 2^20]"),
      KEY("sample_period", "data", sample_period, "steps between greedy samples of the model in the log (rank 0; a replicated model: no FSDP or tensor parallelism), in [0, 2^40]; 0: none"),

      KEY("threads_per_worker", "compute", threads_per_worker, "CPU threads per worker, in [0, 4096]; 0: the host's cores divided by its worker slots (all cores for one in-process worker)"),
      CHOICE("gemm_backend", "compute", gemm_backend, kGemmBackendChoices, "", "onednn | openblas"),
      CHOICE("dtype", "compute", dtype, kComputeDtypeChoices, "", "float32 | bfloat16: the GEMMs' operands (bfloat16: rounded to bf16, float32 accumulation and results; activations, weights and AdamW stay float32; MaxText's dtype, whose default is bfloat16)"),
      CHOICE("weight_dtype", "compute", weight_dtype, kWeightDtypeChoices, " (elastrain keeps master weights and AdamW state in float32; dtype=bfloat16 computes in bfloat16 from them)", "float32 only: master weights and AdamW state stay float32"),
      KEY("hardware_peak_tflops", "compute", hardware_peak_tflops, "peak TFLOP/s for MFU; 0: measure the SGEMM ceiling at start"),
      KEY("final_params_path", "compute", final_params_path, "non-empty: write the final parameters there (raw fp32, global layout order)"),
      KEY("fail_at_step", "compute", fail_at_step, "> 0: rank fail_rank fails right after this step, once per job, to rehearse recovery; in [0, 2^40]"),
      KEY("fail_rank", "compute", fail_rank, "the rank that fail_at_step fails, in [0, max workers)"),
      CHOICE("fail_mode", "compute", fail_mode, kFailModeChoices, "", "exit (code 1) | kill (SIGKILL) | hang (SIGSTOP) | preempt (SIGTERM, a spot notice) | kill_mid_snapshot (SIGKILL halfway through sending that step's RAM-tier copy)"),
      KEY("record_consumed_samples", "compute", record_consumed_samples, "0 or 1; 1: each rank appends the sample indices it trains on to <run>/samples/rank_<r>.jsonl"),

      KEY("enable_checkpointing", "checkpoint", enable_checkpointing, "save checkpoints (and resume from the run directory's latest)"),
      KEY("checkpoint_period", "checkpoint", checkpoint_period_spec, "steps between checkpoints, in [1, 2^40], or auto: chosen from the measured save cost and the failures seen (docs/cost.md)"),
      KEY("checkpoint_mtti_prior_seconds", "checkpoint", checkpoint_mtti_prior_seconds, "auto: mean time to interrupt assumed before any failure, > 0 (86400: a spot host lost about once a day)"),
      KEY("checkpoint_period_min", "checkpoint", checkpoint_period_min, "auto: fewest steps between checkpoints, and the period until a save is measured; in [1, 2^40]"),
      KEY("checkpoint_period_max", "checkpoint", checkpoint_period_max, "auto: most steps between checkpoints, in [checkpoint_period_min, 2^40]"),
      KEY("async_checkpointing", "checkpoint", async_checkpointing, "snapshot to memory and write in the background while training goes on"),
      KEY("max_num_checkpoints_to_keep", "checkpoint", max_num_checkpoints_to_keep, "committed checkpoints kept, in [-1, 2^20]; older ones are removed; 0 or -1: keep all"),
      KEY("save_checkpoint_on_completion", "checkpoint", save_checkpoint_on_completion, "save after the last step"),
      KEY("load_full_state_path", "checkpoint", load_full_state_path, "a checkpoint directory to resume from (parameters, optimizer, step, data state)"),
      KEY("load_parameters_path", "checkpoint", load_parameters_path, "a checkpoint directory to take parameters from (fresh optimizer, step 0)"),
      CHOICE("checkpoint_failure_policy", "checkpoint", checkpoint_failure_policy, kCheckpointFailurePolicyChoices, "", "continue | fail: what a failed save does to training (the previous checkpoint stays intact)"),
      KEY("memory_snapshot_period", "checkpoint", memory_snapshot_period_spec, "sharded jobs (fsdp or tensor > 1): steps between copies of each rank's shard into buddy ranks' RAM, restored from after a failure; in [0, 2^40]; 0: off; auto: chosen, or off, from the measured copy cost and the failures seen (docs/cost.md)"),
      KEY("memory_snapshot_replicas", "checkpoint", memory_snapshot_replicas, "buddy ranks (on other hosts first) holding a RAM copy of each shard, in [1, 8]"),

      KEY("num_workers", "parallelism", num_workers_spec, "worker processes (ranks): N, or MIN:MAX for an elastic job (1 <= MIN <= MAX <= 2^20); the mesh axes multiply to the world size"),
      KEY("ici_data_parallelism", "parallelism", ici_data_parallelism, "replicas that split the batch, in [-1, 2^20]; 0: not given, -1: fill with the workers left"),
      KEY("ici_fsdp_parallelism", "parallelism", ici_fsdp_parallelism, "ranks that shard params, grads and optimizer state (FSDP), in [-1, 2^20]; 0: not given, -1: fill"),
      KEY("ici_tensor_parallelism", "parallelism", ici_tensor_parallelism, "ranks that split each layer's heads and MLP rows, in [-1, 2^20]; 0: not given, -1: fill"),
      KEY("collective_timeout", "parallelism", collective_timeout, "seconds a collective may block before the step fails, > 0"),

      KEY("max_failures", "elastic", max_failures, "failures a job survives, in [-1, 2^20] (-1: unlimited); resizes and preemptions do not count"),
      KEY("resource_wait_timeout", "elastic", resource_wait_timeout, "seconds to wait for min workers before the job fails"),
      KEY("worker_heartbeat_timeout", "elastic", worker_heartbeat_timeout, "seconds a worker may go without progress before it counts as hung; must exceed the longest step"),
      CHOICE("placement_strategy", "elastic", placement_strategy, kPlacementStrategyChoices, "", "PACK (fill a host before the next) | SPREAD (one rank per host in turn)"),
      KEY("preemption_notice_seconds", "elastic", preemption_notice_seconds, "SIGTERM to a worker or agent is a spot notice: save and leave within this (GCP gives 30)"),
      KEY("host_failure_threshold", "elastic", host_failure_threshold, "failures on one host within host_cooldown_seconds that make the job avoid it, in [1, 2^20]"),
      KEY("host_cooldown_seconds", "elastic", host_cooldown_seconds, "seconds a host with repeated failures is avoided (used anyway when nothing else can run min workers)"),
      CHOICE("straggler_policy", "elastic", straggler_policy, kStragglerPolicyChoices, "", "alert (an event and a gauge) | exclude (also cool the host down and re-plan without it when that pays)"),
      KEY("straggler_threshold", "elastic", straggler_threshold, "a rank is slow when its compute seconds per step exceed this x the median rank's, > 1"),
      KEY("straggler_persistence_steps", "elastic", straggler_persistence_steps, "steps a rank must stay slow before it is named a straggler, in [1, 2^40]"),
      KEY("dashboard_host", "elastic", dashboard_host, "address the controller's HTTP API listens on"),
      KEY("dashboard_port", "elastic", dashboard_port, "port of the controller's HTTP API (Ray's 8265), in [0, 65535]; 0: any free port (written to <run>/head_url)"),
      KEY("metrics_without_token", "elastic", metrics_without_token, "serve /metrics without the bearer token (to a Prometheus without one); every other route but the page needs it"),
      KEY("dashboard_allowed_hosts", "elastic", dashboard_allowed_hosts, "comma-separated Host names the API answers besides dashboard_host (e.g. a proxy's name)"),
      KEY("dashboard_tls_cert", "elastic", dashboard_tls_cert, "PEM certificate: serve the API over HTTPS (with dashboard_tls_key)"),
      KEY("dashboard_tls_key", "elastic", dashboard_tls_key, "PEM private key of dashboard_tls_cert"),
      KEY("cost_per_worker_hour", "elastic", cost_per_worker_hour, "USD per worker-hour, for the estimated cost on /metrics and in reports (0: unknown)"),

      KEY("launch_program", "launch", launch_program, "elastrain launch: the program each worker runs, a JSON array of strings (set by `launch ... -- PROGRAM ARGS`); empty: the built-in trainer"),
      KEY("warm_spares", "launch", warm_spares, "elastrain launch: keep one started program per worker waiting in wait_for_assignment() (docs/launch.md)"),
  };
  return keys;
}
#undef KEY
#undef CHOICE
#undef OPTIONAL_CHOICE

const ConfigKey* FindConfigKey(std::string_view name) {
  for (const ConfigKey& k : ConfigKeys())
    if (name == k.name) return &k;
  return nullptr;
}

size_t EditDistance(std::string_view a, std::string_view b) {
  // Levenshtein distance, one row at a time.
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string ClosestConfigKey(std::string_view name) {
  const ConfigKey* best = nullptr;
  size_t best_d = 0;
  for (const ConfigKey& k : ConfigKeys()) {
    size_t d = EditDistance(name, k.name);
    if (!best || d < best_d) best = &k, best_d = d;
  }
  return best->name;
}

bool IsMaxTextOnlyKey(std::string_view name) {
  if (FindConfigKey(name)) return false;
  const auto& names = MaxTextKeyNames();
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool IsModelShapeKey(std::string_view name) {
  static constexpr std::string_view kShapeKeys[] = {"base_emb_dim", "base_num_query_heads", "base_num_kv_heads",
                                                    "base_mlp_dim", "base_num_decoder_layers", "head_dim",
                                                    "vocab_size", "max_target_length"};
  return std::find(std::begin(kShapeKeys), std::end(kShapeKeys), name) != std::end(kShapeKeys);
}

namespace {

// Drops surrounding blanks and the '_' digit separators YAML 1.1 (and so MaxText's
// base.yml, e.g. `steps: 150_001`) allows between digits.
std::string NumberText(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  std::string t = b == std::string::npos ? "" : s.substr(b, e - b + 1);
  std::string out;
  for (size_t i = 0; i < t.size(); ++i) {
    bool between_digits = i > 0 && i + 1 < t.size() && std::isdigit((unsigned char)t[i - 1]) &&
                          std::isdigit((unsigned char)t[i + 1]);
    if (t[i] == '_' && between_digits) continue;
    out += t[i];
  }
  if (out.size() > 1 && out[0] == '+') out.erase(0, 1);  // from_chars takes no '+'
  return out;
}

bool ParseDouble(const std::string& text, double* v) {
  const char* end = text.data() + text.size();
  double d;
  auto [p, ec] = std::from_chars(text.data(), end, d);
  if (ec != std::errc() || p != end || !std::isfinite(d)) return false;
  *v = d;
  return true;
}

bool ParseInt(const std::string& text, int64_t* v) {
  const char* end = text.data() + text.size();
  int64_t i;
  auto [p, ec] = std::from_chars(text.data(), end, i);
  if (ec == std::errc() && p == end) return *v = i, true;
  // MaxText writes some integers as floats (per_device_batch_size: 12.0); accept
  // those that are whole numbers, never 3.5.
  double d;
  if (!ParseDouble(text, &d) || d != std::floor(d) || std::fabs(d) > 9.0e18) return false;
  *v = static_cast<int64_t>(d);
  return true;
}

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default: out += ch;
    }
  }
  return out + "\"";
}

}  // namespace

bool ParseConfigInteger(const std::string& text, int64_t* v) { return ParseInt(NumberText(text), v); }
bool ParseConfigNumber(const std::string& text, double* v) { return ParseDouble(NumberText(text), v); }

Status SetConfigValue(const ConfigKey& key, const std::string& value, TrainConfig* c) {
  if (auto f = std::get_if<int64_t* (*)(TrainConfig&)>(&key.field)) {
    if (!ParseInt(NumberText(value), (*f)(*c)))
      return Status::InvalidArgument(fmt::format("{}={}: expected an integer", key.name, value));
  } else if (auto f = std::get_if<double* (*)(TrainConfig&)>(&key.field)) {
    if (!ParseDouble(NumberText(value), (*f)(*c)))
      return Status::InvalidArgument(fmt::format("{}={}: expected a number (e.g. 0.5 or 1e-3)", key.name, value));
  } else if (auto f = std::get_if<bool* (*)(TrainConfig&)>(&key.field)) {
    if (value == "true" || value == "True" || value == "1") *(*f)(*c) = true;
    else if (value == "false" || value == "False" || value == "0") *(*f)(*c) = false;
    else return Status::InvalidArgument(fmt::format("{}={}: expected true or false", key.name, value));
  } else if (auto f = std::get_if<ChoiceField>(&key.field)) {
    if (!f->parse(*c, value))
      return Status::InvalidArgument(fmt::format("{}={}: expected one of {}{}", key.name, value, f->allowed(), f->hint));
  } else {
    *std::get<std::string* (*)(TrainConfig&)>(key.field)(*c) = value;
  }
  return Status::OK();
}

std::string FormatConfigValue(const ConfigKey& key, const TrainConfig& c) {
  // The accessors take a mutable config; formatting only reads through them.
  auto& m = const_cast<TrainConfig&>(c);
  if (auto f = std::get_if<int64_t* (*)(TrainConfig&)>(&key.field)) return fmt::format("{}", *(*f)(m));
  if (auto f = std::get_if<double* (*)(TrainConfig&)>(&key.field)) return fmt::format("{}", *(*f)(m));
  if (auto f = std::get_if<bool* (*)(TrainConfig&)>(&key.field)) return *(*f)(m) ? "true" : "false";
  if (auto f = std::get_if<ChoiceField>(&key.field)) return Quote(std::string(f->word(c)));
  return Quote(*std::get<std::string* (*)(TrainConfig&)>(key.field)(m));
}

}  // namespace elastrain
