// LoadConfig / ConfigToYaml: defaults, override order, parsing, unknown keys, MaxText
// compatibility, model resolution, validation messages and the YAML round trip.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

#include "common/files.h"
#include "config/config.h"
#include "config/config_keys.h"
#include "test_dirs.h"

namespace elastrain {
namespace {
namespace fs = std::filesystem;
using ::testing::HasSubstr;

// The source tree: $ELASTRAIN_SOURCE_DIR, else the one this binary was built from.
std::string SourceDir() {
  if (const char* env = std::getenv("ELASTRAIN_SOURCE_DIR")) return env;
  return ELASTRAIN_SOURCE_DIR_DEFAULT;
}

// A scratch directory per test, removed afterwards.
class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ = std::make_unique<ScopedTempDir>("config_test");
    dir_ = scratch_->path();
  }
  void TearDown() override { scratch_.reset(); }
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  std::unique_ptr<ScopedTempDir> scratch_;
  fs::path dir_;
};

Result<TrainConfig> Load(const std::vector<std::string>& overrides, std::vector<std::string>* ignored = nullptr) {
  return LoadConfig("", overrides, ignored);
}

// The error message of a load that must fail.
std::string Error(const std::vector<std::string>& overrides) {
  auto r = Load(overrides);
  EXPECT_FALSE(r.ok()) << "expected an error for " << ::testing::PrintToString(overrides);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

void ExpectSameConfig(const TrainConfig& a, const TrainConfig& b) {
  EXPECT_EQ(ConfigToYaml(a), ConfigToYaml(b));
  EXPECT_EQ(a.model.name, b.model.name);
  EXPECT_EQ(a.model.family, b.model.family);
  EXPECT_EQ(a.model.vocab_size, b.model.vocab_size);
  EXPECT_EQ(a.model.emb_dim, b.model.emb_dim);
  EXPECT_EQ(a.model.num_layers, b.model.num_layers);
  EXPECT_EQ(a.model.num_heads, b.model.num_heads);
  EXPECT_EQ(a.model.num_kv_heads, b.model.num_kv_heads);
  EXPECT_EQ(a.model.head_dim, b.model.head_dim);
  EXPECT_EQ(a.model.mlp_dim, b.model.mlp_dim);
  EXPECT_EQ(a.model.max_seq_len, b.model.max_seq_len);
  EXPECT_EQ(a.model.norm_eps, b.model.norm_eps);
  EXPECT_EQ(a.model.rope_theta, b.model.rope_theta);
}

TEST(ConfigRegistry, EveryKeyIsInBaseYmlAndBack) {
  YAML::Node base = YAML::Load(BaseConfigYaml());
  ASSERT_TRUE(base.IsMap());
  std::set<std::string> yml_keys;
  for (const auto& kv : base) yml_keys.insert(kv.first.Scalar());
  for (const ConfigKey& k : ConfigKeys()) EXPECT_TRUE(yml_keys.count(k.name)) << k.name << " missing in base.yml";
  for (const std::string& k : yml_keys) EXPECT_NE(FindConfigKey(k), nullptr) << k << " is not in the registry";
  EXPECT_EQ(yml_keys.size(), ConfigKeys().size());
}

TEST(ConfigRegistry, BaseYmlCommentsAreTheRegistryDocs) {
  const std::string& text = BaseConfigYaml();
  for (const ConfigKey& k : ConfigKeys()) {
    size_t at = text.find(std::string("\n") + k.name + ": ");
    ASSERT_NE(at, std::string::npos) << k.name;
    std::string line = text.substr(at + 1, text.find('\n', at + 1) - at - 1);
    size_t hash = line.find("# ");
    ASSERT_NE(hash, std::string::npos) << "no comment on " << line;
    EXPECT_EQ(line.substr(hash + 2), k.doc) << k.name;
  }
}

TEST(ConfigRegistry, EmbeddedBaseYmlIsTheSourceFile) {
  auto text = ReadFile(SourceDir() + "/configs/base.yml");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, BaseConfigYaml()) << "rebuild: the embedded copy is stale";
}

TEST(ConfigRegistry, BaseYmlDefaultsMatchTheStruct) {
  TrainConfig from_yml;
  for (const auto& kv : YAML::Load(BaseConfigYaml())) {
    const ConfigKey* k = FindConfigKey(kv.first.Scalar());
    ASSERT_NE(k, nullptr);
    ASSERT_TRUE(SetConfigValue(*k, kv.second.IsNull() ? "" : kv.second.Scalar(), &from_yml).ok());
  }
  const TrainConfig defaults;
  for (const ConfigKey& k : ConfigKeys())
    EXPECT_EQ(FormatConfigValue(k, from_yml), FormatConfigValue(k, defaults)) << k.name;
}

TEST(ConfigRegistry, EditDistanceAndClosestKey) {
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(ClosestConfigKey("per_device_batchsize"), "per_device_batch_size");
  EXPECT_EQ(ClosestConfigKey("learnig_rate"), "learning_rate");
  EXPECT_EQ(ClosestConfigKey("step"), "steps");
}

TEST(ConfigLoad, DefaultsResolveTheSmallPreset) {
  std::vector<std::string> ignored;
  auto c = Load({}, &ignored);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(ignored.empty());
  EXPECT_EQ(c->model_name, "small");
  EXPECT_EQ(c->model.name, "small");
  EXPECT_EQ(c->model.emb_dim, 384);
  EXPECT_EQ(c->decoder_block, DecoderBlock::kLlama);
  EXPECT_EQ(c->max_target_length, 128);  // min(preset 256, 128)
  EXPECT_EQ(c->model.max_seq_len, 256);
  EXPECT_EQ(c->steps, 200);
  EXPECT_DOUBLE_EQ(c->learning_rate, 3e-4);
}

TEST_F(ConfigTest, FileThenOverridesInOrder) {
  std::string path = Write("run.yml", "steps: 50\nlearning_rate: 0.01\nrun_name: from_file\n");
  auto file_only = LoadConfig(path, {}, nullptr);
  ASSERT_TRUE(file_only.ok()) << file_only.status().ToString();
  EXPECT_EQ(file_only->steps, 50);
  EXPECT_EQ(file_only->run_name, "from_file");
  EXPECT_EQ(file_only->per_device_batch_size, 8);  // untouched: from base.yml

  auto c = LoadConfig(path, {"steps=9", "run_name=first", "run_name=second"}, nullptr);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->steps, 9);
  EXPECT_EQ(c->run_name, "second");
  EXPECT_DOUBLE_EQ(c->learning_rate, 0.01);
}

TEST(ConfigLoad, ParsesValuesByType) {
  auto c = Load({"learning_rate=1e-3", "adam_eps=1.e-6", "steps=150_001", "per_device_batch_size=12.0",
                 "tokenizer_path=", "init_weights_seed=-7", "hardware_peak_tflops=2"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_DOUBLE_EQ(c->learning_rate, 1e-3);
  EXPECT_DOUBLE_EQ(c->adam_eps, 1e-6);
  EXPECT_EQ(c->steps, 150001);
  EXPECT_EQ(c->per_device_batch_size, 12);
  EXPECT_EQ(c->tokenizer_path, "");
  EXPECT_EQ(c->init_weights_seed, -7);
  EXPECT_DOUBLE_EQ(c->hardware_peak_tflops, 2.0);
}

TEST(ConfigLoad, RejectsValuesOfTheWrongType) {
  EXPECT_EQ(Error({"per_device_batch_size=abc"}),
            "per_device_batch_size=abc: expected a number of rows (e.g. 8, or 0.5 as in MaxText)");
  EXPECT_EQ(Error({"steps=abc"}), "steps=abc: expected an integer");
  EXPECT_EQ(Error({"steps=3.5"}), "steps=3.5: expected an integer");
  EXPECT_EQ(Error({"steps="}), "steps=: expected an integer");
  EXPECT_THAT(Error({"learning_rate=fast"}), HasSubstr("learning_rate=fast: expected a number"));
  EXPECT_THAT(Error({"adam_b1=nan"}), HasSubstr("adam_b1=nan: expected a number"));
}

TEST(ConfigLoad, OverrideWithoutEqualsIsAnError) {
  EXPECT_THAT(Error({"steps"}), HasSubstr("override 'steps': expected key=value"));
  EXPECT_THAT(Error({"=5"}), HasSubstr("override '=5'"));
}

TEST_F(ConfigTest, UnknownKeysNameTheClosestKey) {
  EXPECT_THAT(Error({"per_device_batchsize=4"}),
              ::testing::StartsWith("unknown key 'per_device_batchsize'; did you mean 'per_device_batch_size'?"));
  std::string path = Write("typo.yml", "learnig_rate: 0.1\n");
  auto c = LoadConfig(path, {}, nullptr);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr(path + ": unknown key 'learnig_rate'; did you mean 'learning_rate'?"));
}

TEST(ConfigLoad, MaxTextOnlyOverrideIsIgnoredNotAnError) {
  std::vector<std::string> ignored;
  auto c = Load({"dcn_fsdp_parallelism=4", "quantize_kvcache=false", "dcn_fsdp_parallelism=8"}, &ignored);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(ignored, (std::vector<std::string>{"dcn_fsdp_parallelism", "quantize_kvcache"}));
  // A misspelling of one of our keys is still an error.
  EXPECT_THAT(Error({"dcn_fsdp_parallelism=4", "gradient_acumulation_steps=2"}),
              HasSubstr("did you mean 'gradient_accumulation_steps'"));
}

TEST(ConfigModel, ExplicitShapeKeysReplaceThePresets) {
  auto c = Load({"model_name=tiny", "base_emb_dim=128", "base_num_decoder_layers=3", "max_target_length=512"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model.emb_dim, 128);
  EXPECT_EQ(c->model.num_layers, 3);
  EXPECT_EQ(c->model.num_heads, 8);       // from the preset
  EXPECT_EQ(c->model.max_seq_len, 512);   // llama: max(preset 128, T)
  EXPECT_EQ(c->max_target_length, 512);
}

TEST(ConfigModel, MaxTargetLengthDefaultsAndGpt2Positions) {
  auto c = Load({"model_name=gpt2-124m"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->max_target_length, 128);
  EXPECT_EQ(c->model.max_seq_len, 1024);  // learned positions stay the preset's
  EXPECT_EQ(c->decoder_block, DecoderBlock::kGpt2);
  EXPECT_THAT(Error({"model_name=tiny-gpt2", "max_target_length=256"}),
              HasSubstr("max_target_length=256: model_name=tiny-gpt2 learns 128 position embeddings"));
  auto t = Load({"model_name=tiny-gpt2"});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->max_target_length, 128);
}

TEST(ConfigModel, DefaultModelNeedsEveryShape) {
  EXPECT_THAT(Error({"model_name=default"}), HasSubstr("base_emb_dim=0: model_name=default has no preset"));
  std::vector<std::string> all = {"model_name=default", "base_emb_dim=64", "base_num_query_heads=4",
                                  "base_num_kv_heads=2", "base_mlp_dim=128", "base_num_decoder_layers=2",
                                  "head_dim=16", "vocab_size=256"};
  EXPECT_THAT(Error(all), HasSubstr("max_target_length=0: model_name=default"));
  all.push_back("max_target_length=64");
  auto c = Load(all);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model.max_seq_len, 64);
  EXPECT_EQ(c->model.num_kv_heads, 2);
}

TEST(ConfigModel, ErrorsNameTheKey) {
  EXPECT_THAT(Error({"model_name=gpt5"}), HasSubstr("model_name=gpt5: unknown model"));
  EXPECT_THAT(Error({"decoder_block=bert"}), HasSubstr("decoder_block=bert: expected one of llama, gpt2"));
  EXPECT_THAT(Error({"base_emb_dim=-1"}), HasSubstr("base_emb_dim=-1: expected a positive integer"));
  EXPECT_THAT(Error({"max_target_length=-5"}), HasSubstr("max_target_length=-5"));
  // tiny has 4 kv heads for 8 query heads; the gpt2 block needs them equal.
  EXPECT_THAT(Error({"model_name=tiny", "decoder_block=gpt2"}), HasSubstr("base_num_kv_heads=4"));
  EXPECT_THAT(Error({"model_name=tiny-gpt2", "head_dim=5"}), HasSubstr("head_dim=5"));
  EXPECT_THAT(Error({"model_name=tiny", "base_num_kv_heads=3"}), HasSubstr("base_num_kv_heads=3"));
  auto c = Load({"model_name=tiny", "decoder_block=llama3"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->decoder_block, DecoderBlock::kLlama);
  EXPECT_THAT(ConfigToYaml(*c), HasSubstr("decoder_block: \"llama\""));  // an alias prints as the family
}

TEST(ConfigValidate, EachRuleNamesKeyAndValue) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"steps=-3", "steps=-3: expected a positive integer"},
      {"per_device_batch_size=0", "per_device_batch_size=0: expected a number of rows in (0, 1048576]"},
      {"global_batch_size=-1", "global_batch_size=-1: expected an integer >= 0"},
      {"gradient_accumulation_steps=0", "gradient_accumulation_steps=0: expected a positive integer"},
      {"learning_rate=-0.5", "learning_rate=-0.5: expected a number >= 0"},
      {"warmup_steps_fraction=1.5", "warmup_steps_fraction=1.5: expected a number in [0, 1]"},
      {"cosine_learning_rate_final_fraction=-0.1", "cosine_learning_rate_final_fraction=-0.1: expected a number in [0, 1]"},
      {"adam_b1=1", "adam_b1=1: expected a number in [0, 1)"},
      {"adam_b2=-0.1", "adam_b2=-0.1: expected a number in [0, 1)"},
      {"adam_eps=0", "adam_eps=0: expected a number > 0"},
      {"adam_weight_decay=-1", "adam_weight_decay=-1: expected a number >= 0"},
      {"gradient_clipping_threshold=-2", "gradient_clipping_threshold=-2: expected a number >= 0"},
      {"remat_policy=minimal", "remat_policy=minimal: expected one of none, full (elastrain implements only"},
      {"dataset_type=tfds", "dataset_type=tfds: expected one of synthetic, text"},
      {"dataset_type=text", "dataset_path=: dataset_type=text needs"},

      {"log_period=0", "log_period=0: expected a positive integer"},
      {"eval_split_fraction=0", "eval_split_fraction=0: expected a number in (0, 0.5]"},
      {"eval_split_fraction=0.6", "eval_split_fraction=0.6: expected a number in (0, 0.5]"},
      {"eval_steps=0", "eval_steps=0: expected a positive integer"},
      {"threads_per_worker=-1", "threads_per_worker=-1: expected an integer >= 0"},
      {"gemm_backend=mkl", "gemm_backend=mkl: expected one of onednn, openblas"},
      {"log_level=verbose", "log_level=verbose: expected one of trace, debug, info, warn, error"},
      {"run_name=a/b", "run_name=a/b: expected one folder name under base_output_directory"},
      {"run_name=..", "run_name=..: expected one folder name"},
      {"run_name=a b", "run_name=a b: expected one folder name"},
      {"hardware_peak_tflops=-1", "hardware_peak_tflops=-1: expected a number >= 0"},
      {"checkpoint_period=often", "checkpoint_period=often: expected a positive number of steps, or auto"},
      {"checkpoint_period=0", "checkpoint_period=0: expected a positive number of steps, or auto"},
      {"checkpoint_period=2.5", "checkpoint_period=2.5: expected a positive number of steps"},
      {"checkpoint_mtti_prior_seconds=0", "checkpoint_mtti_prior_seconds=0: expected a number of seconds > 0"},
      {"checkpoint_period_min=0", "checkpoint_period_min=0: expected a positive integer"},
      {"checkpoint_period_max=5", "checkpoint_period_max=5: expected an integer >= checkpoint_period_min=10"},
  };
  for (const auto& [override, expected] : cases) {
    std::string msg = Error({override});
    EXPECT_THAT(msg, HasSubstr(expected)) << override;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << override;
  }
  EXPECT_EQ(Error({"dataset_type=text", "dataset_path=/x/y"}), "dataset_path=/x/y: no such file or directory");
}

// Keys with fixed words load as enums: each word parses to its value and prints back
// as the same word; any other word is an error naming the key, the value and the words.
TEST(ConfigChoices, WordsParseToEnumsAndPrintBack) {
  auto c = Load({"remat_policy=full", "gemm_backend=openblas", "fail_mode=preempt", "placement_strategy=SPREAD",
                 "checkpoint_failure_policy=fail"});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->remat_policy, RematPolicy::kFull);
  EXPECT_EQ(c->gemm_backend, GemmBackend::kOpenBlas);
  EXPECT_EQ(c->fail_mode, FailMode::kPreempt);
  EXPECT_EQ(c->placement_strategy, PlacementStrategy::kSpread);
  EXPECT_EQ(c->checkpoint_failure_policy, CheckpointFailurePolicy::kFail);
  const std::string yaml = ConfigToYaml(*c);
  for (const char* line : {"remat_policy: \"full\"", "gemm_backend: \"openblas\"", "fail_mode: \"preempt\"",
                           "placement_strategy: \"SPREAD\"", "checkpoint_failure_policy: \"fail\""})
    EXPECT_THAT(yaml, HasSubstr(line));
  auto defaults = Load({});
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->remat_policy, RematPolicy::kNone);
  EXPECT_EQ(defaults->gemm_backend, GemmBackend::kOneDnn);
  EXPECT_EQ(defaults->fail_mode, FailMode::kExit);
  EXPECT_EQ(defaults->placement_strategy, PlacementStrategy::kPack);
  EXPECT_EQ(defaults->checkpoint_failure_policy, CheckpointFailurePolicy::kContinue);
}

// Every word of every config key's table loads to its value and prints back as the word
// (an alias prints as its value's first word).
template <typename E, size_t N>
void ExpectConfigRoundTrip(const char* key, const std::array<Choice<E>, N>& table, E TrainConfig::*field,
                           std::vector<std::string> extra = {}) {
  for (const Choice<E>& w : table) {
    SCOPED_TRACE(std::string(key) + "=" + std::string(w.word));
    std::vector<std::string> overrides = extra;
    overrides.push_back(std::string(key) + "=" + std::string(w.word));
    auto c = Load(overrides);
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_EQ((*c).*field, w.value);
    EXPECT_THAT(ConfigToYaml(*c),
                HasSubstr(std::string(key) + ": \"" + std::string(ChoiceWord(table, w.value)) + "\""));
  }
}

TEST(ConfigChoices, EveryWordOfEveryTableRoundTrips) {
  ExpectConfigRoundTrip("log_level", kLogLevelChoices, &TrainConfig::log_level);
  ExpectConfigRoundTrip("remat_policy", kRematPolicyChoices, &TrainConfig::remat_policy);
  ExpectConfigRoundTrip("gemm_backend", kGemmBackendChoices, &TrainConfig::gemm_backend);
  ExpectConfigRoundTrip("dtype", kComputeDtypeChoices, &TrainConfig::dtype);
  ExpectConfigRoundTrip("weight_dtype", kWeightDtypeChoices, &TrainConfig::weight_dtype);
  ExpectConfigRoundTrip("fail_mode", kFailModeChoices, &TrainConfig::fail_mode);
  ExpectConfigRoundTrip("checkpoint_failure_policy", kCheckpointFailurePolicyChoices,
                        &TrainConfig::checkpoint_failure_policy);
  ExpectConfigRoundTrip("placement_strategy", kPlacementStrategyChoices, &TrainConfig::placement_strategy);
  ExpectConfigRoundTrip("dataset_type", kDatasetTypeChoices, &TrainConfig::dataset_type,
                        {"dataset_path=" + SourceDir() + "/configs/base.yml"});
  // decoder_block: with a gpt2-shaped preset, so that both families validate. A block
  // prints as its name (an alias as the block it names). gemma's blocks need keys of
  // their own (model_keys_test.cpp).
  for (const Choice<DecoderBlock>& w : kDecoderBlockChoices) {
    if (w.value == DecoderBlock::kGemma || w.value == DecoderBlock::kGemma2) continue;
    SCOPED_TRACE(w.word);
    auto c = Load({"model_name=tiny-gpt2", "decoder_block=" + std::string(w.word)});
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_EQ(c->decoder_block, w.value);
    EXPECT_EQ(c->model.family, FamilyOf(w.value));
    const std::string name(ChoiceWord(kDecoderBlockChoices, w.value));
    EXPECT_THAT(ConfigToYaml(*c), HasSubstr("decoder_block: \"" + name + "\""));
  }
  // Unset: the preset's family, printed so that the YAML loads back to the same model.
  auto preset = Load({"model_name=tiny-gpt2", "decoder_block="});
  ASSERT_TRUE(preset.ok()) << preset.status().message();
  EXPECT_EQ(preset->decoder_block, DecoderBlock::kGpt2);
}

TEST(ConfigRunName, TheDefaultIsNewForEveryRun) {
  auto a = LoadConfig("", {"model_name=tiny"}, nullptr);
  auto b = LoadConfig("", {"model_name=tiny", "run_name="}, nullptr);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_THAT(a->run_name, ::testing::MatchesRegex("run-[0-9]{8}-[0-9]{6}-[0-9a-f]{4}"));
  EXPECT_NE(a->run_name, b->run_name);
  // The resolved config names it, so that every worker and a reload agree.
  auto again = LoadConfigText(ConfigToYaml(*a), "config.yml");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->run_name, a->run_name);
}

TEST(ConfigChoices, BadWordNamesKeyValueAndTheAllowedWords) {
  EXPECT_EQ(Error({"log_level=verbose"}), "log_level=verbose: expected one of trace, debug, info, warn, error");
  EXPECT_EQ(Error({"dataset_type=hf"}),
            "dataset_type=hf: expected one of synthetic, text, llmc, nanogpt, megatron, jsonl (MaxText's tfds, hf "
            "and grain pipelines are not implemented: add dataset_type=synthetic, or dataset_type=text, llmc, "
            "nanogpt, megatron or jsonl with dataset_path)");
  EXPECT_EQ(Error({"decoder_block=mixtral"}),
            "decoder_block=mixtral: expected one of llama, gpt2, mistral, gemma, gemma2, qwen2, qwen3, olmo3 (MaxText's "
            "llama2, llama3, gpt3 name these too; its mixtral, deepseek, gemma3, gemma4, llama4, qwen3_moe, "
            "qwen3_next, gpt_oss and other blocks are not implemented)");
  EXPECT_EQ(Error({"remat_policy=minimal"}),
            "remat_policy=minimal: expected one of none, full (elastrain implements only these; MaxText's finer "
            "policies are not supported)");
  EXPECT_EQ(Error({"gemm_backend=mkl"}), "gemm_backend=mkl: expected one of onednn, openblas");
  EXPECT_EQ(Error({"fail_mode=crash"}), "fail_mode=crash: expected one of exit, kill, hang, preempt, kill_mid_snapshot");
  EXPECT_EQ(Error({"placement_strategy=pack"}), "placement_strategy=pack: expected one of PACK, SPREAD");
  EXPECT_EQ(Error({"checkpoint_failure_policy=retry"}),
            "checkpoint_failure_policy=retry: expected one of continue, fail");
}

TEST_F(ConfigTest, BadWordInAFileNamesTheFile) {
  const std::string path = Write("bad_choice.yml", "fail_mode: explode\n");
  auto r = LoadConfig(path, {}, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), path + ": fail_mode=explode: expected one of exit, kill, hang, preempt, kill_mid_snapshot");
}

TEST_F(ConfigTest, TextDatasetAcceptsAFileOrADirectory) {
  std::string file = Write("corpus.txt", "hello\n");
  EXPECT_TRUE(Load({"dataset_type=text", "dataset_path=" + file}).ok());
  EXPECT_TRUE(Load({"dataset_type=text", "dataset_path=" + dir_.string()}).ok());
  EXPECT_TRUE(Load({"tokenizer_path=" + file}).ok());
  // The tokenizer is checked where it is read: text data (synthetic data has none, and a
  // MaxText config names one of MaxText's assets).
  EXPECT_EQ(Error({"dataset_type=text", "dataset_path=" + file, "tokenizer_path=/no/such/tok.model"}),
            "tokenizer_path=/no/such/tok.model: no such file or directory");
  EXPECT_TRUE(Load({"tokenizer_path=/no/such/tok.model"}).ok());
}

TEST_F(ConfigTest, BadFilesAreClearErrors) {
  auto missing = LoadConfig((dir_ / "nope.yml").string(), {}, nullptr);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("nope.yml"));

  std::string broken = Write("broken.yml", "steps: [1, 2\n");
  auto b = LoadConfig(broken, {}, nullptr);
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.status().message(), HasSubstr(broken + ": invalid YAML"));

  auto list = LoadConfig(Write("list.yml", "- steps\n- 3\n"), {}, nullptr);
  EXPECT_THAT(list.status().message(), HasSubstr("expected a mapping"));

  auto nested = LoadConfig(Write("nested.yml", "steps: [1, 2]\n"), {}, nullptr);
  EXPECT_THAT(nested.status().message(), HasSubstr("steps: expected a single value"));

  auto typed = LoadConfig(Write("typed.yml", "steps: many\n"), {}, nullptr);
  EXPECT_THAT(typed.status().message(), HasSubstr("typed.yml: steps=many: expected an integer"));

  auto empty = LoadConfig(Write("empty.yml", ""), {}, nullptr);
  EXPECT_TRUE(empty.ok()) << empty.status().ToString();
}

TEST(ConfigLoad, CheckpointPeriodIsStepsOrAuto) {
  auto steps = Load({"checkpoint_period=250"});
  ASSERT_TRUE(steps.ok()) << steps.status().ToString();
  EXPECT_EQ(steps->checkpoint_period, 250);
  EXPECT_FALSE(steps->checkpoint_period_auto);
  auto spelled = Load({"checkpoint_period=1_000"});
  ASSERT_TRUE(spelled.ok()) << spelled.status().ToString();
  EXPECT_EQ(spelled->checkpoint_period, 1000);
  auto a = Load({"checkpoint_period=auto", "checkpoint_period_min=3", "checkpoint_period_max=40",
                 "checkpoint_mtti_prior_seconds=20"});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(a->checkpoint_period_auto);
  EXPECT_EQ(a->checkpoint_period, 3);  // until a save is measured
  EXPECT_EQ(a->checkpoint_period_max, 40);
  EXPECT_DOUBLE_EQ(a->checkpoint_mtti_prior_seconds, 20);
  // A worker gets the config as YAML: auto survives the trip.
  auto back = LoadConfigText(ConfigToYaml(*a), "job config");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->checkpoint_period_auto);
  EXPECT_EQ(back->checkpoint_period_min, 3);
}

TEST(ConfigLoad, MemorySnapshotPeriodIsStepsOffOrAutoAndRefusesTheRest) {
  auto steps = Load({"memory_snapshot_period=4"});
  ASSERT_TRUE(steps.ok()) << steps.status().ToString();
  EXPECT_EQ(steps->memory_snapshot_period, 4);
  EXPECT_FALSE(steps->memory_snapshot_period_auto);
  auto off = Load({"memory_snapshot_period=0"});
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->memory_snapshot_period, 0);
  auto a = Load({"memory_snapshot_period=auto"});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(a->memory_snapshot_period_auto);
  EXPECT_EQ(a->memory_snapshot_period, 1);  // the tier is kept; the trainer chooses
  auto back = LoadConfigText(ConfigToYaml(*a), "job config");  // as a worker gets it
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->memory_snapshot_period_auto);
  for (const char* bad : {"memory_snapshot_period=-1", "memory_snapshot_period=AUTO", "memory_snapshot_period=2.5",
                          "memory_snapshot_period=99999999999999999999", "memory_snapshot_period=1099511627777",
                          "memory_snapshot_period="}) {
    auto r = Load({bad});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("memory_snapshot_period="), std::string::npos) << r.status().message();
  }
}

TEST_F(ConfigTest, ConfigToYamlRoundTrips) {
  const std::vector<std::vector<std::string>> runs = {
      {},
      {"model_name=gpt2-124m", "learning_rate=1e-5", "adam_eps=1e-12", "remat_policy=full"},
      {"model_name=default", "decoder_block=gpt2", "base_emb_dim=96", "base_num_query_heads=3",
       "base_num_kv_heads=3", "base_mlp_dim=384", "base_num_decoder_layers=2", "head_dim=32", "vocab_size=300",
       "max_target_length=48", "warmup_steps_fraction=0.3333333333333333"},
      {"model_name=llama3-8b", "max_target_length=16384", "base_output_directory=odd \"dir\": #1 \\ x", "global_batch_size=64"},
  };
  for (size_t i = 0; i < runs.size(); ++i) {
    auto c = Load(runs[i]);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    std::string yaml = ConfigToYaml(*c);
    for (const ConfigKey& k : ConfigKeys()) EXPECT_THAT(yaml, HasSubstr(std::string("\n") + k.name + ": "));
    std::vector<std::string> ignored;
    auto back = LoadConfig(Write("roundtrip" + std::to_string(i) + ".yml", yaml), {}, &ignored);
    ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << yaml;
    EXPECT_TRUE(ignored.empty());
    ExpectSameConfig(*c, *back);
  }
}

}  // namespace
}  // namespace elastrain
