// MaxText config files, read as MaxText reads them (docs/config.md). Internal to
// src/config and its tests.
//
// A config file is MaxText's when its top level has `base_config` (MaxText's
// inheritance; elastrain's own configs have none) or any key of MaxText's that elastrain
// does not implement (IsMaxTextOnlyKey: mesh_axes, hardware, opt_type, ...); a file of
// elastrain's keys alone reads the same either way. In a MaxText file:
//   - keys elastrain does not know are ignored and listed once (a key one or two edits
//     from an elastrain key and not a known MaxText name is still a misspelling: error);
//   - a few MaxText-only keys whose value elastrain cannot honour (lr_schedule_type: wsd,
//     num_experts: 8, quantization: int8, ...) are errors, not silently dropped;
//   - MaxText's "not set" sentinels of shared keys leave elastrain's value (run_name: "",
//     base_output_directory: "", eval_steps: -1);
//   - the model keys (shape keys, decoder_block) apply only with model_name: default; a
//     model_name preset replaces them, as MaxText's configs/models/<name>.yml does;
//   - base_config names the file it inherits from: relative to the file's folder, else
//     one of the kMaxBaseConfigSearchUp folders above it (MaxText falls back to its
//     configs/ folder, so that configs/gpu/models/x.yml finds configs/base.yml);
//     absolute paths are taken as they are.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace elastrain {

// Limits of a base_config chain: files deep, and bytes of each file.
inline constexpr int kMaxBaseConfigDepth = 8;
// Folders above a file that its relative base_config is looked for in.
inline constexpr int kMaxBaseConfigSearchUp = 3;
inline constexpr int64_t kMaxConfigFileBytes = int64_t{16} << 20;

// True when the YAML mapping `root` is a MaxText config (above).
bool IsMaxTextConfig(const YAML::Node& root);

// One config file, read and parsed.
struct ConfigFile {
  std::string path;  // as named (the top file) or resolved (a base_config)
  YAML::Node root;   // a mapping, or null for an empty file
};

// The file `top` (already read) and, following base_config, the files it inherits from:
// the furthest base first, `top` last. Errors name the file and the base_config value:
// a missing file, a folder or device, a file over kMaxConfigFileBytes, invalid YAML, a
// cycle, a chain deeper than kMaxBaseConfigDepth.
Result<std::vector<ConfigFile>> ReadBaseConfigChain(ConfigFile top);

// MaxText's current spelling of an elastrain key: learning_rate_final_fraction ->
// cosine_learning_rate_final_fraction. `name` itself when it has none.
std::string_view FromMaxTextAlias(std::string_view name);

// True when `value` of elastrain key `key` in a MaxText file is MaxText's "not set"
// sentinel (run_name: ""), which leaves elastrain's value.
bool IsMaxTextSentinel(std::string_view key, const std::string& value);

// MaxText's file for model_name, as MaxText finds it: models/<name>.yml next to the
// config given (`chain`'s last file) or in the folder above it, next to each file it
// inherits from, then under `maxtext_configs` (a MaxText configs folder); "-Instruct" is
// dropped from the name as MaxText does. nullopt when there is none (model_name may then
// be a built-in preset); an error for a name that is not a plain file name, or a file
// that is not a readable YAML mapping of at most kMaxConfigFileBytes.
Result<std::optional<ConfigFile>> FindMaxTextModelFile(const std::vector<ConfigFile>& chain,
                                                       const std::string& maxtext_configs,
                                                       const std::string& model_name);

}  // namespace elastrain
