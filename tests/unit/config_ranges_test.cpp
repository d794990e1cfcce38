// Every integer config key has a documented range, enforced when the config loads, and
// every size derived from a config is overflow-checked: shape keys near 2^61 and
// products of in-range keys are clear errors naming the keys, never a crash or a hang.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config.h"
#include "config/config_keys.h"
#include "model/activations.h"
#include "model/layout.h"
#include "model/model_config.h"

namespace elastrain {
namespace {

using ::testing::HasSubstr;

std::string Error(const std::vector<std::string>& overrides) {
  auto r = LoadConfig("", overrides, nullptr);
  EXPECT_FALSE(r.ok()) << "expected an error for " << ::testing::PrintToString(overrides);
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

constexpr const char* kHuge = "2305843009213693952";  // 2^61

TEST(ConfigRanges, EveryIntegerKeyDocumentsItsRange) {
  for (const ConfigKey& k : ConfigKeys()) {
    const bool integer = std::holds_alternative<int64_t* (*)(TrainConfig&)>(k.field) ||
                         std::string(k.name) == "checkpoint_period" || std::string(k.name) == "num_workers";
    if (!integer) continue;
    const std::string doc = k.doc;
    EXPECT_TRUE(doc.find("in [") != std::string::npos || doc.find("at most") != std::string::npos ||
                doc.find("<= 2^20") != std::string::npos || doc.find("any 64-bit integer") != std::string::npos ||
                doc.find("0 or 1") != std::string::npos)
        << k.name << ": its doc (configs/base.yml) gives no range: " << doc;
  }
}

TEST(ConfigRanges, HugeValuesOfEveryIntegerKeyAreNamedErrors) {
  const char* keys[] = {"log_period", "base_emb_dim", "base_num_query_heads", "base_num_kv_heads", "base_mlp_dim",
                        "base_num_decoder_layers", "head_dim", "vocab_size", "per_device_batch_size",
                        "global_batch_size", "gradient_accumulation_steps", "max_target_length", "steps",
                        "eval_interval", "eval_steps", "threads_per_worker", "record_consumed_samples", "fail_at_step",
                        "fail_rank", "checkpoint_period", "checkpoint_period_min", "checkpoint_period_max",
                        "max_num_checkpoints_to_keep", "num_workers", "ici_data_parallelism", "ici_fsdp_parallelism",
                        "ici_tensor_parallelism", "max_failures", "host_failure_threshold", "dashboard_port"};
  for (const char* key : keys) {
    for (const char* value : {kHuge, "9223372036854775807", "-2305843009213693952"}) {
      const std::string kv = std::string(key) + "=" + value;
      // checkpoint_period_max is checked against _min first; give it the same value.
      std::vector<std::string> overrides = {"model_name=tiny", kv};
      if (std::string(key) == "checkpoint_period_min") overrides.push_back(std::string("checkpoint_period_max=") + value);
      if (std::string(key) == "eval_interval" && value[0] != '-') continue;  // large positive intervals are allowed below
      const std::string msg = Error(overrides);
      EXPECT_THAT(msg, HasSubstr(key)) << kv;
      EXPECT_THAT(msg, HasSubstr(value)) << kv;
    }
  }
  EXPECT_THAT(Error({"eval_interval=2305843009213693952"}), HasSubstr("eval_interval=2305843009213693952: expected an integer in ["));
}

TEST(ConfigRanges, InRangeKeysWhoseProductOverflowsAreNamedErrors) {
  EXPECT_THAT(Error({"model_name=tiny", "steps=1099511627776", "global_batch_size=1073741824"}),
              HasSubstr("steps*global batch"));
  EXPECT_THAT(Error({"model_name=tiny", "num_workers=1048576", "per_device_batch_size=1048576"}),
              HasSubstr("per_device_batch_size*num_workers*gradient_accumulation_steps"));
  EXPECT_THAT(Error({"model_name=llama3-8b", "per_device_batch_size=1048576", "max_target_length=1048576"}),
              HasSubstr("activation memory of a micro-batch of 1048576 rows x 1048576 tokens"));
  EXPECT_THAT(Error({"model_name=default", "base_emb_dim=131072", "base_num_query_heads=4096",
                     "base_num_kv_heads=4096", "base_mlp_dim=1048576", "base_num_decoder_layers=4096",
                     "head_dim=4096", "vocab_size=16777216", "max_target_length=1024"}),
              HasSubstr("parameters, more than the"));
  // The bounds themselves load.
  auto c = LoadConfig("", {"model_name=tiny", "steps=1099511627776", "checkpoint_period=1099511627776",
                           "log_period=1099511627776", "dashboard_port=65535", "max_num_checkpoints_to_keep=-1"},
                      nullptr);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
}

TEST(ModelRanges, CheckedLayoutAndActivationsReportOverflow) {
  ModelConfig m = ModelPreset("tiny").value();
  ASSERT_TRUE(m.Validate().ok());
  EXPECT_EQ(BuildParamLayoutChecked(m).value().total, m.NumParams());
  ModelConfig big = m;
  big.vocab_size = int64_t{1} << 61;
  big.emb_dim = int64_t{1} << 40;
  auto lay = BuildParamLayoutChecked(big);
  ASSERT_FALSE(lay.ok());
  EXPECT_THAT(lay.status().message(), HasSubstr("embed.wte"));
  EXPECT_THAT(big.Validate().message(), HasSubstr("vocab_size=2305843009213693952"));
  big = m;
  big.num_layers = int64_t{1} << 61;  // once a 2^61-iteration loop (`elastrain plan` hung)
  EXPECT_FALSE(BuildParamLayoutChecked(big).ok());
  EXPECT_THAT(big.Validate().message(), HasSubstr("base_num_decoder_layers=2305843009213693952"));

  EXPECT_EQ(CheckedActivationFloats(m, 2, 16, RematPolicy::kNone).value(), ActivationFloats(m, 2, 16, RematPolicy::kNone));
  auto act = CheckedActivationFloats(m, int64_t{1} << 40, int64_t{1} << 20, RematPolicy::kFull);
  ASSERT_FALSE(act.ok());
  EXPECT_THAT(act.status().message(), HasSubstr("1099511627776 rows"));
  EXPECT_FALSE(CheckedActivationFloats(m, int64_t{1} << 62, 4, RematPolicy::kNone).ok());
  EXPECT_FALSE(CheckedActivationFloats(m, -1, 4, RematPolicy::kNone).ok());
}

}  // namespace
}  // namespace elastrain
