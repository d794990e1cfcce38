// MaxText config files load as MaxText ships them (tests/fixtures/maxtext/, copied from
// AI-Hypercomputer/maxtext): how a file is recognised, base_config chains and their
// hostile forms, MaxText's value syntax (10_000, None, fractional per_device_batch_size,
// steps: -1), model presets equal to MaxText's model files, the schedule and dtype keys.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

#include "config/config.h"
#include "config/config_keys.h"
#include "model/model_config.h"
#include "optim/optim.h"
#include "test_dirs.h"

namespace elastrain {
namespace {
namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Fixture(const std::string& name) {
  const char* env = std::getenv("ELASTRAIN_SOURCE_DIR");
  return std::string(env ? env : ELASTRAIN_SOURCE_DIR_DEFAULT) + "/tests/fixtures/maxtext/" + name;
}

class MaxTextConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ = std::make_unique<ScopedTempDir>("maxtext_config_test");
    dir_ = scratch_->path();
  }
  std::string Write(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
    return path.string();
  }
  // The message of a load of `path` that must fail.
  std::string Error(const std::string& path, const std::vector<std::string>& overrides = {}) {
    auto r = LoadConfig(path, overrides, nullptr);
    EXPECT_FALSE(r.ok()) << path << " loaded";
    if (r.ok()) return "";
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
    return r.status().message();
  }
  std::unique_ptr<ScopedTempDir> scratch_;
  fs::path dir_;
};

const std::vector<std::string> kSynthetic = {"dataset_type=synthetic"};

TEST(MaxTextBaseYml, LoadsAsShippedWithItsValues) {
  std::vector<std::string> ignored;
  auto c = LoadConfig(Fixture("base.yml"), kSynthetic, &ignored);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  // Hundreds of MaxText keys, each listed once, none of them ours.
  EXPECT_GT(ignored.size(), 400u);
  for (const char* k : {"override_model_config", "logical_axis_rules", "mesh_axes", "hardware",
                        "vllm_additional_config", "sinkhorn_iterations"})
    EXPECT_THAT(ignored, Contains(std::string(k)));
  for (const std::string& k : ignored) EXPECT_EQ(FindConfigKey(k), nullptr) << k << " is ours, not ignored";
  for (const char* k : {"dtype", "weight_dtype", "learning_rate_schedule_steps", "learning_rate_final_fraction"})
    EXPECT_THAT(ignored, ::testing::Not(Contains(std::string(k))));
  // The shared keys take MaxText's values, in MaxText's spellings.
  EXPECT_EQ(c->steps, 150001);                         // 150_001
  EXPECT_EQ(c->learning_rate_schedule_steps, 150001);  // -1: follows steps
  EXPECT_EQ(c->checkpoint_period, 10000);              // 10_000
  EXPECT_EQ(c->max_num_checkpoints_to_keep, -1);       // None: keep all
  EXPECT_EQ(c->per_device_batch_size, 12);             // 12.0
  EXPECT_DOUBLE_EQ(c->learning_rate, 3e-5);            // 3.e-5
  EXPECT_DOUBLE_EQ(c->cosine_learning_rate_final_fraction, 0.1);  // learning_rate_final_fraction
  EXPECT_EQ(c->dtype, ComputeDtype::kBfloat16);
  EXPECT_EQ(c->weight_dtype, WeightDtype::kFloat32);
  EXPECT_EQ(c->remat_policy, RematPolicy::kFull);
  EXPECT_TRUE(c->enable_checkpointing);  // True
  EXPECT_EQ(c->ici_fsdp_parallelism, -1);
  EXPECT_EQ(c->eval_interval, -1);
  // MaxText's "not set" sentinels leave elastrain's values.
  EXPECT_THAT(c->run_name, ::testing::StartsWith("run-"));  // run_name: "": new for every run
  EXPECT_EQ(c->base_output_directory, "runs");  // base_output_directory: ""
  EXPECT_EQ(c->eval_steps, 4);                   // eval_steps: -1
  // model_name: default takes the file's shape.
  EXPECT_EQ(c->model.name, "default");
  EXPECT_EQ(c->model.family, ModelFamily::kLlama);  // decoder_block: llama2
  EXPECT_EQ(c->model.emb_dim, 2048);
  EXPECT_EQ(c->model.num_layers, 16);
  EXPECT_EQ(c->model.mlp_dim, 7168);
  EXPECT_EQ(c->model.vocab_size, 32000);  // 32_000
  EXPECT_EQ(c->max_target_length, 2048);
}

TEST(MaxTextBaseYml, ItsDatasetTypeIsAClearError) {
  auto c = LoadConfig(Fixture("base.yml"), {}, nullptr);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(),
              StartsWith(Fixture("base.yml") + ": dataset_type=tfds: expected one of synthetic, text, llmc, nanogpt, megatron, jsonl (MaxText's tfds"));
  EXPECT_THAT(c.status().message(), HasSubstr("add dataset_type=synthetic"));
}

TEST(MaxTextBaseYml, ResolvedConfigLoadsBackTheSame) {
  auto c = LoadConfig(Fixture("base.yml"), {"dataset_type=synthetic", "per_device_batch_size=0.5", "num_workers=4"},
                      nullptr);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto back = LoadConfigText(ConfigToYaml(*c), "resolved");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(ConfigToYaml(*back), ConfigToYaml(*c));
  EXPECT_EQ(back->global_batch_size, 2);
  EXPECT_EQ(back->per_device_batch_size, 1);
}

// elastrain's presets of MaxText's model names have the shapes of MaxText's model files.
TEST(MaxTextModels, PresetsEqualMaxTextModelFiles) {
  for (const char* name : {"llama2-7b", "llama3-8b", "gpt3-52k"}) {
    SCOPED_TRACE(name);
    YAML::Node f = YAML::LoadFile(Fixture(std::string("models/") + name + ".yml"));
    auto m = ModelPreset(name);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    auto num = [&](const char* key) { return std::stoll(f[key].as<std::string>()); };
    EXPECT_EQ(m->emb_dim, num("base_emb_dim"));
    EXPECT_EQ(m->num_heads, num("base_num_query_heads"));
    EXPECT_EQ(m->num_kv_heads, num("base_num_kv_heads"));
    EXPECT_EQ(m->mlp_dim, num("base_mlp_dim"));
    EXPECT_EQ(m->num_layers, num("base_num_decoder_layers"));
    EXPECT_EQ(m->head_dim, num("head_dim"));
    EXPECT_EQ(m->vocab_size, num("vocab_size"));
    auto block = ParseChoice(kDecoderBlockChoices, f["decoder_block"].as<std::string>());
    ASSERT_TRUE(block.has_value());
    EXPECT_EQ(m->family, FamilyOf(*block));
    if (f["trainable_position_size"]) {
      EXPECT_EQ(m->max_seq_len, num("trainable_position_size"));
    }
    if (f["rope_max_timescale"]) {
      EXPECT_EQ(m->rope_theta, 500000.0);
    }
  }
  for (const char* name : {"llama2-13b", "llama2-70b", "llama3-70b", "gpt3-6b", "gpt3-22b", "gpt3-175b"}) {
    auto m = ModelPreset(name);
    ASSERT_TRUE(m.ok()) << name;
    EXPECT_TRUE(m->Validate().ok()) << name << ": " << m->Validate().ToString();
  }
}

// As in MaxText, a model_name preset replaces the model keys of the config files; keys
// on the command line still override the preset (MaxText's override_model_config).
TEST(MaxTextModels, PresetReplacesTheFilesModelKeys) {
  auto c = LoadConfig(Fixture("base.yml"), {"dataset_type=synthetic", "model_name=gpt3-52k", "max_target_length=64"},
                      nullptr);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model.family, ModelFamily::kGpt2);
  EXPECT_EQ(c->model.emb_dim, 16);
  EXPECT_EQ(c->model.vocab_size, 1024);
  EXPECT_EQ(c->decoder_block, DecoderBlock::kGpt2);
  auto o = LoadConfig(Fixture("base.yml"),
                      {"dataset_type=synthetic", "model_name=gpt3-52k", "max_target_length=64",
                       "base_num_decoder_layers=2"},
                      nullptr);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->model.num_layers, 2);
  EXPECT_EQ(o->model.emb_dim, 16);
}

TEST(MaxTextModels, DecoderBlocksOfOtherFamiliesAreNamedErrors) {
  auto c = LoadConfig(Fixture("base.yml"), {"dataset_type=synthetic", "decoder_block=mixtral"}, nullptr);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), StartsWith("decoder_block=mixtral: expected one of llama, gpt2, mistral, gemma, "
                                               "gemma2, qwen2, qwen3, olmo3 (MaxText's llama2"));
  for (const char* block : {"llama2", "llama3", "mistral", "qwen2", "qwen3"})
    EXPECT_TRUE(LoadConfig("", {"model_name=tiny", std::string("decoder_block=") + block}, nullptr).ok()) << block;
  EXPECT_TRUE(LoadConfig("", {"model_name=tiny-gpt2", "decoder_block=gpt3"}, nullptr).ok());
}

// A MaxText file's decoder_block is one of its model keys: with a preset it is replaced
// (however unsupported), with model_name: default it is used, and refused by name.
TEST(MaxTextModels, AFilesUnsupportedDecoderBlockCountsOnlyWhenTheFilesModelIsUsed) {
  const std::string yaml = "max_segments_per_seq: 32\ndecoder_block: \"mixtral\"\n";
  auto preset = LoadConfigText(yaml + "model_name: tiny\n", "m.yml", {}, nullptr);
  ASSERT_TRUE(preset.ok()) << preset.status().ToString();
  EXPECT_EQ(preset->decoder_block, DecoderBlock::kLlama);
  auto custom = LoadConfigText(yaml + "model_name: default\n", "m.yml", {}, nullptr);
  ASSERT_FALSE(custom.ok());
  EXPECT_THAT(custom.status().message(),
              StartsWith("m.yml: decoder_block=mixtral: expected one of llama, gpt2, mistral"));
  // The command line's decoder_block replaces the file's.
  auto cli = LoadConfigText(yaml + "model_name: default\n", "m.yml", {"decoder_block=gpt3"}, nullptr);
  ASSERT_FALSE(cli.ok());  // no shapes given: the model, not the block, is the error now
  EXPECT_THAT(cli.status().message(), StartsWith("base_emb_dim=0: model_name=default has no preset"));
  // A later word of the key replaces a refused one; a later bad word is the one refused.
  auto later = LoadConfigText("max_segments_per_seq: 32\ndataset_type: tfds\n", "d.yml", {"dataset_type=text"},
                              nullptr);
  ASSERT_FALSE(later.ok());
  EXPECT_THAT(later.status().message(), StartsWith("dataset_path=: dataset_type=text needs"));
  auto bad = LoadConfigText("max_segments_per_seq: 32\ndataset_type: tfds\n", "d.yml", {"dataset_type=hf"}, nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), StartsWith("dataset_type=hf: expected one of synthetic, text"));
}

TEST(MaxTextModels, WeightDtypeOtherThanFloat32IsRefused) {
  auto c = LoadConfig(Fixture("models/llama2-7b.yml"), {"dataset_type=synthetic", "weight_dtype=bfloat16"}, nullptr);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            std::string("weight_dtype=bfloat16: expected one of float32 (elastrain keeps master weights and AdamW state in "
                "float32; dtype=bfloat16 computes in bfloat16 from them)"));
}

TEST(MaxTextChain, BaseConfigIsFollowed) {
  std::vector<std::string> ignored;
  auto c = LoadConfig(Fixture("gpu/gpu_smoke_test.yml"), {"max_target_length=32"}, &ignored);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model.emb_dim, 8);        // the file's
  EXPECT_EQ(c->model.num_layers, 8);
  EXPECT_EQ(c->model.head_dim, 16);
  EXPECT_EQ(c->model.vocab_size, 32000);  // base.yml's
  EXPECT_EQ(c->steps, 10);
  EXPECT_EQ(c->per_device_batch_size, 2);
  EXPECT_EQ(c->dataset_type, DatasetType::kSynthetic);
  EXPECT_EQ(c->max_target_length, 32);  // the command line's
  EXPECT_DOUBLE_EQ(c->learning_rate, 3e-5);
  EXPECT_THAT(ignored, Contains(std::string("max_segments_per_seq")));
  EXPECT_THAT(ignored, Contains(std::string("mesh_axes")));
  EXPECT_THAT(ignored, ::testing::Not(Contains(std::string("base_config"))));
}

TEST_F(MaxTextConfigTest, BaseConfigFallsBackToTheFolderAbove) {
  Write("configs/base.yml", "hardware: cpu\nsteps: 77\n");
  const std::string child = Write("configs/v5e/run.yml", "base_config: \"base.yml\"\nlearning_rate: 0.01\n");
  auto c = LoadConfig(child, {}, nullptr);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->steps, 77);
  EXPECT_DOUBLE_EQ(c->learning_rate, 0.01);
}

TEST_F(MaxTextConfigTest, HostileBaseConfigsAreErrorsNamingFileAndValue) {
  const std::string missing = Write("missing.yml", "base_config: nope.yml\n");
  EXPECT_THAT(Error(missing), StartsWith(missing + ": base_config=nope.yml: no such file (looked for "));

  const std::string self = Write("self.yml", "base_config: self.yml\nsteps: 3\n");
  EXPECT_THAT(Error(self), HasSubstr("self.yml: base_config=self.yml: a cycle"));
  Write("a.yml", "base_config: b.yml\n");
  const std::string b = Write("b.yml", "base_config: a.yml\n");
  EXPECT_THAT(Error(b), HasSubstr("base_config=b.yml: a cycle"));

  fs::create_directories(dir_ / "folder.yml");
  const std::string folder = Write("to_folder.yml", "base_config: folder.yml\n");
  EXPECT_EQ(Error(folder), folder + ": base_config=" + (dir_ / "folder.yml").string() + ": expected a regular YAML file");
  const std::string device = Write("to_device.yml", "base_config: /dev/zero\n");
  EXPECT_EQ(Error(device), device + ": base_config=/dev/zero: expected a regular YAML file");

  const std::string listed = Write("listed.yml", "base_config: [a.yml, b.yml]\n");
  EXPECT_THAT(Error(listed), StartsWith(listed + ": base_config: expected the path of the YAML file"));
  const std::string empty = Write("empty_base.yml", "base_config: \"\"\n");
  EXPECT_THAT(Error(empty), StartsWith(empty + ": base_config: expected the path"));

  const std::string broken = Write("broken.yml", "steps: [1, 2\n");
  const std::string to_broken = Write("to_broken.yml", "base_config: broken.yml\n");
  EXPECT_THAT(Error(to_broken), StartsWith((dir_ / "broken.yml").string() + ": invalid YAML"));
  Write("a_list.yml", "- 1\n- 2\n");
  const std::string to_list = Write("to_list.yml", "base_config: a_list.yml\n");
  EXPECT_THAT(Error(to_list), HasSubstr("a_list.yml: expected a mapping"));

  // A chain deeper than 8 files.
  Write("d0.yml", "steps: 5\n");
  for (int i = 1; i <= 9; ++i) Write(fmt::format("d{}.yml", i), fmt::format("base_config: d{}.yml\n", i - 1));
  EXPECT_TRUE(LoadConfig((dir_ / "d7.yml").string(), {}, nullptr).ok());
  EXPECT_THAT(Error((dir_ / "d9.yml").string()), HasSubstr("expected at most 8 files inheriting"));

  // A bad value in a base names the base file.
  Write("bad_base.yml", "hardware: cpu\nsteps: many\n");
  const std::string to_bad = Write("to_bad.yml", "base_config: bad_base.yml\n");
  EXPECT_EQ(Error(to_bad), (dir_ / "bad_base.yml").string() + ": steps=many: expected an integer");
}

TEST(MaxTextChain, TextConfigsAndTheCommandLineNeverFollowBaseConfig) {
  auto t = LoadConfigText("base_config: /etc/passwd\nsteps: 3\n", "submitted config");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), StartsWith("submitted config: base_config: a config given as text cannot inherit"));
  auto o = LoadConfig("", {"base_config=/etc/passwd"}, nullptr);
  ASSERT_FALSE(o.ok());
  EXPECT_THAT(o.status().message(), StartsWith("base_config=/etc/passwd: only a config file names"));
}

TEST_F(MaxTextConfigTest, RecognitionDecidesWhatAnUnknownKeyIs) {
  // elastrain's own config: a misspelt key is an error naming the closest key.
  const std::string ours = Write("ours.yml", "steps: 5\nlearnig_rate: 0.1\n");
  EXPECT_EQ(Error(ours), ours + ": unknown key 'learnig_rate'; did you mean 'learning_rate'? (keys: configs/base.yml)");
  const std::string future = Write("future.yml", "steps: 5\nsome_future_maxtext_key: 3\n");
  EXPECT_THAT(Error(future), HasSubstr("unknown key 'some_future_maxtext_key'"));

  // A MaxText key makes it MaxText's: keys elastrain does not know are ignored and listed,
  // whether MaxText's list here has them or not.
  const std::string mt = Write("mt.yml", "hardware: gpu\nsteps: 5\nsome_future_maxtext_key: {a: [1, 2]}\n");
  std::vector<std::string> ignored;
  auto c = LoadConfig(mt, {}, &ignored);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(ignored, (std::vector<std::string>{"hardware", "some_future_maxtext_key"}));
  // ... but one edit from one of ours, and no MaxText name, it is a misspelling.
  const std::string typo = Write("mt_typo.yml", "hardware: gpu\nlearnig_rate: 0.1\n");
  EXPECT_THAT(Error(typo), StartsWith(typo + ": unknown key 'learnig_rate'; did you mean 'learning_rate'?"));
  // On the command line MaxText's known keys are ignored, anything else is an error.
  auto cli = LoadConfig(mt, {"grad_dtype=float32", "stepz=3"}, nullptr);
  ASSERT_FALSE(cli.ok());
  EXPECT_THAT(cli.status().message(), StartsWith("unknown key 'stepz'; did you mean 'steps'?"));
}

TEST_F(MaxTextConfigTest, ValuesElastrainCannotHonourAreErrors) {
  const std::string wsd = Write("wsd.yml", "hardware: tpu\nlr_schedule_type: 'wsd'\n");
  EXPECT_EQ(Error(wsd), wsd + ": lr_schedule_type=wsd: not implemented; elastrain trains lr_schedule_type=cosine "
                              "(elastrain's schedule is MaxText's cosine one: linear warmup, cosine decay)");
  const std::string moe = Write("moe.yml", "hardware: tpu\nnum_experts: 8\n");
  EXPECT_THAT(Error(moe), HasSubstr("num_experts=8: not implemented; elastrain trains num_experts=1"));
  EXPECT_THAT(Error(moe, {}), HasSubstr(moe));
  auto q = LoadConfig("", {"quantization=int8"}, nullptr);
  ASSERT_FALSE(q.ok());
  EXPECT_THAT(q.status().message(), StartsWith("quantization=int8: not implemented; elastrain trains quantization=\"\""));
  // MaxText's defaults (and adam_pax, gpt3's Adam) pass.
  const std::string fine =
      Write("fine.yml", "hardware: tpu\nnum_experts: 1.0\nopt_type: adam_pax\nquantization: \"\"\ndropout_rate: 0.0\n");
  EXPECT_TRUE(LoadConfig(fine, {}, nullptr).ok());
}

TEST_F(MaxTextConfigTest, HostileValuesAreErrorsNamingTheKey) {
  const std::string huge = Write("huge.yml", "hardware: tpu\nsteps: 1e400\n");
  EXPECT_EQ(Error(huge), huge + ": steps=1e400: expected an integer");
  const std::string typed = Write("typed.yml", "hardware: tpu\nlearning_rate: [1, 2]\n");
  EXPECT_EQ(Error(typed), typed + ": learning_rate: expected a single value, not a list or mapping");
  const std::string pdbs = Write("pdbs.yml", "hardware: tpu\nper_device_batch_size: 1e300\n");
  EXPECT_THAT(Error(pdbs), StartsWith("per_device_batch_size=1e300: expected a number of rows in (0, 1048576]"));
  const std::string nested = Write("nested.yml", "hardware: tpu\nnum_experts: {a: 1}\n");
  EXPECT_EQ(Error(nested), nested + ": num_experts=(a mapping): not implemented; elastrain trains num_experts=1 "
                                    "(elastrain trains dense models)");
  const std::string keys = Write("keys.yml", "hardware: tpu\n[a, b]: 1\n");
  EXPECT_THAT(Error(keys), HasSubstr("expected scalar keys"));
}

TEST(MaxTextValues, NoneUnderscoresAndFractions) {
  auto none = LoadConfig("", {"max_num_checkpoints_to_keep=None", "steps=None", "tokenizer_path=None"}, nullptr);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->max_num_checkpoints_to_keep, -1);  // keep all, MaxText's None
  EXPECT_EQ(none->steps, 200);                       // None leaves the value
  EXPECT_EQ(none->tokenizer_path, "");

  auto frac = LoadConfig("", {"model_name=tiny", "per_device_batch_size=0.5", "num_workers=4"}, nullptr);
  ASSERT_TRUE(frac.ok()) << frac.status().ToString();
  EXPECT_EQ(frac->global_batch_size, 2);  // int(0.5 * 4 workers)
  EXPECT_EQ(frac->per_device_batch_size, 1);
  auto acc = LoadConfig("", {"model_name=tiny", "per_device_batch_size=1.5", "num_workers=2:3",
                             "gradient_accumulation_steps=2"},
                        nullptr);
  ASSERT_TRUE(acc.ok()) << acc.status().ToString();
  EXPECT_EQ(acc->global_batch_size, 9);  // int(1.5 * 3 (max workers) * 2)
  EXPECT_EQ(acc->per_device_batch_size, 2);
  auto given = LoadConfig("", {"model_name=tiny", "per_device_batch_size=0.5", "global_batch_size=6"}, nullptr);
  ASSERT_TRUE(given.ok()) << given.status().ToString();
  EXPECT_EQ(given->global_batch_size, 6);
  EXPECT_EQ(given->per_device_batch_size, 1);
  auto whole = LoadConfig("", {"per_device_batch_size=4.0"}, nullptr);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->global_batch_size, 0);  // a whole number changes nothing
  EXPECT_EQ(whole->per_device_batch_size, 4);

  auto none_rows = LoadConfig("", {"per_device_batch_size=0.25"}, nullptr);
  ASSERT_FALSE(none_rows.ok());
  EXPECT_EQ(none_rows.status().message(),
            "per_device_batch_size=0.25: times num_workers=1 and gradient_accumulation_steps=1 gives 0 rows per step; "
            "expected 1 to 1073741824 (or set global_batch_size)");
  for (const char* bad : {"per_device_batch_size=-0.5", "per_device_batch_size=nan", "per_device_batch_size=inf"})
    EXPECT_FALSE(LoadConfig("", {bad}, nullptr).ok()) << bad;
}

TEST(MaxTextSchedule, StepsAndScheduleStepsFollowEachOther) {
  auto follows = LoadConfig("", {"steps=-1", "learning_rate_schedule_steps=30"}, nullptr);
  ASSERT_TRUE(follows.ok()) << follows.status().ToString();
  EXPECT_EQ(follows->steps, 30);
  EXPECT_EQ(follows->learning_rate_schedule_steps, 30);
  auto dflt = LoadConfig("", {"steps=12"}, nullptr);
  ASSERT_TRUE(dflt.ok());
  EXPECT_EQ(dflt->learning_rate_schedule_steps, 12);
  auto longer = LoadConfig("", {"steps=12", "learning_rate_schedule_steps=40"}, nullptr);
  ASSERT_TRUE(longer.ok());
  EXPECT_EQ(longer->steps, 12);
  EXPECT_EQ(longer->learning_rate_schedule_steps, 40);

  auto both = LoadConfig("", {"steps=-1"}, nullptr);
  ASSERT_FALSE(both.ok());
  EXPECT_THAT(both.status().message(), StartsWith("steps=-1: follows learning_rate_schedule_steps, which is -1"));
  for (auto [kv, msg] : std::vector<std::pair<std::string, std::string>>{
           {"learning_rate_schedule_steps=0", "learning_rate_schedule_steps=0: expected a positive integer, or -1"},
           {"learning_rate_schedule_steps=-5", "learning_rate_schedule_steps=-5: expected a positive integer, or -1"},
           {"learning_rate_schedule_steps=1099511627777", "learning_rate_schedule_steps=1099511627777: expected an "
                                                          "integer in [1, 1099511627776]"},
           {"learning_rate_schedule_steps=x", "learning_rate_schedule_steps=x: expected an integer"},
           {"steps=-2", "steps=-2: expected a positive integer, or -1 (learning_rate_schedule_steps)"}}) {
    auto r = LoadConfig("", {kv}, nullptr);
    ASSERT_FALSE(r.ok()) << kv;
    EXPECT_THAT(r.status().message(), StartsWith(msg));
  }
}

// MaxText's schedule: warmup over schedule_steps * fraction, cosine to schedule_steps,
// then 0; a run's learning rates depend on the schedule, not on steps.
TEST(MaxTextSchedule, LearningRateIsZeroPastTheSchedule) {
  const ScheduleOptions s{1.0, 4, 20, 0.1};
  EXPECT_DOUBLE_EQ(LearningRate(s, 0), 0.25);
  EXPECT_DOUBLE_EQ(LearningRate(s, 3), 1.0);
  EXPECT_DOUBLE_EQ(LearningRate(s, 4), 1.0);
  EXPECT_NEAR(LearningRate(s, 19), 0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 15.0 / 16.0)), 1e-12);
  EXPECT_EQ(LearningRate(s, 20), 0.0);
  EXPECT_EQ(LearningRate(s, 1000), 0.0);
}

TEST(MaxTextDtype, KeysAreValidated) {
  auto dflt = LoadConfig("", {}, nullptr);
  ASSERT_TRUE(dflt.ok());
  EXPECT_EQ(dflt->dtype, ComputeDtype::kFloat32);  // elastrain's default stays float32
  EXPECT_EQ(dflt->weight_dtype, WeightDtype::kFloat32);
  auto bf16 = LoadConfig("", {"dtype=bfloat16", "weight_dtype=float32"}, nullptr);
  ASSERT_TRUE(bf16.ok());
  EXPECT_EQ(bf16->dtype, ComputeDtype::kBfloat16);
  EXPECT_THAT(ConfigToYaml(*bf16), HasSubstr("dtype: \"bfloat16\""));
  auto f16 = LoadConfig("", {"dtype=float16"}, nullptr);
  ASSERT_FALSE(f16.ok());
  EXPECT_EQ(f16.status().message(), "dtype=float16: expected one of float32, bfloat16");
  auto w = LoadConfig("", {"weight_dtype=bfloat16"}, nullptr);
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(w.status().message(),
              StartsWith("weight_dtype=bfloat16: expected one of float32 (elastrain keeps master weights"));
}

}  // namespace
}  // namespace elastrain
