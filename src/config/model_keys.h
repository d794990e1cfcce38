// The keys that define what is trained (docs/maxtext.md): the model keys (shapes,
// decoder_block, mlp_activations, rope_max_timescale, ...), which elastrain honours, and
// MaxText's model-defining keys it does not implement (num_experts, rope_type: yarn, ...),
// which it refuses unless they hold the value it trains as MaxText means it.
// Internal to src/config.
//
// Such keys are not set one after another like the others: every source's value is
// kept, and the model is built once all sources are read, from the value that wins:
//   MaxText files (base_config chain, then the models/<model_name>.yml file)
//   < a built-in preset (model_name: tiny, small, llama3-8b, ...: every model key)
//   < an elastrain config file < the command line.
// So a key of a lower source that a higher one replaces is never judged (base.yml's
// decoder_block under a gemma model file), and one that stands is always judged.
#pragma once

#include <yaml-cpp/yaml.h>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "config/decoder_block.h"
#include "model/model_config.h"

namespace elastrain {

// True for a key elastrain reads into the model (ModelConfig): the shape keys,
// decoder_block, mlp_activations, logits_via_embedding, ... (not max_target_length, a
// batch key).
bool IsModelKey(std::string_view key);
// True for a MaxText key that changes what is trained and that elastrain does not
// implement beyond one value (num_experts: 1, opt_type: adamw, quantization: "", ...).
bool IsRefusedUnlessNeutralKey(std::string_view key);
// Its neutral values as text ("1", "adamw or adam_pax") and what elastrain does instead;
// empty for other keys.
std::string NeutralValues(std::string_view key);
std::string RefusalReason(std::string_view key);

// The value of one key from one source: the YAML node and where it came from ("" for the
// command line, else the file).
struct KeySetting {
  YAML::Node value;
  std::string source;
};
// One precedence level: the winning setting of each key within it.
using KeyLayer = std::map<std::string, KeySetting, std::less<>>;

// Everything the model is built from.
struct ModelInputs {
  KeyLayer maxtext;  // MaxText files, later files' settings replacing earlier ones'
  KeyLayer user;     // elastrain config file, then command line
  std::string model_name;          // "default", a preset's name, or a MaxText model file's name
  bool maxtext_model_file = false; // model_name named a models/<name>.yml (its keys are in `maxtext`)
};

// Builds the model (not yet validated: ModelConfig::Validate) and the resolved
// decoder_block. Errors name the key, its value, the source and what was expected.
struct BuiltModel {
  ModelConfig model;
  DecoderBlock block = DecoderBlock::kLlama;
  int64_t trainable_position_size = -1;  // gpt3's position table (-1: none given)
};
Result<BuiltModel> BuildModel(const ModelInputs& in);

// The model keys beyond the shape keys and decoder_block, as `key: value  # doc` lines
// that load back to the same model (ConfigToYaml).
std::string ModelKeysYaml(const ModelConfig& m, DecoderBlock block);

// A YAML value as text: a scalar as written, a list of scalars joined with ","
// ("silu,linear"); InvalidArgument for mappings and nested lists.
Result<std::string> ValueText(std::string_view key, const YAML::Node& v);

}  // namespace elastrain
