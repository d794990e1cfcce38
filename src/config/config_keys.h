// The key registry: the one table of every TrainConfig key (name, type, the field it
// sets, a one-line doc). LoadConfig parses through it, ConfigToYaml prints through it,
// and a unit test checks it against configs/base.yml. Internal to src/config and tests.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "config/config.h"

namespace elastrain {

// An enum field with a fixed set of words (one table of Choice, common/choice.h).
struct ChoiceField {
  bool (*parse)(TrainConfig& c, std::string_view word);  // false: not one of the words
  std::string_view (*word)(const TrainConfig& c);
  std::string (*allowed)();  // the words, "none, full"
  const char* hint;          // appended to the error of a bad word; may be ""
};

// Each alternative but ChoiceField returns the address of the field inside a
// TrainConfig; a function rather than a member pointer so that nested fields
// (model.emb_dim) fit the same table.
using ConfigField = std::variant<int64_t* (*)(TrainConfig&), double* (*)(TrainConfig&),
                                 std::string* (*)(TrainConfig&), bool* (*)(TrainConfig&), ChoiceField>;

struct ConfigKey {
  const char* name;   // the YAML / command-line key, MaxText's spelling where it has one
  const char* group;  // section of configs/base.yml: run, model, batch, ...
  ConfigField field;
  const char* doc;    // one line
};

// Every key, in the order of configs/base.yml. Thread-safe (immutable after first use).
const std::vector<ConfigKey>& ConfigKeys();
// nullptr when `name` is not one of ours.
const ConfigKey* FindConfigKey(std::string_view name);
// The registry key with the smallest edit distance to `name` (ties: the first).
std::string ClosestConfigKey(std::string_view name);
size_t EditDistance(std::string_view a, std::string_view b);

// Keys that MaxText's configs/base.yml defines but elastrain does not implement; such
// keys are ignored (and reported) instead of rejected. Names only.
bool IsMaxTextOnlyKey(std::string_view name);
const std::vector<std::string_view>& MaxTextKeyNames();

// The shape keys: 0 means "from the model_name preset".
bool IsModelShapeKey(std::string_view name);

// Parses a value given as text ("12", "1e-3", "150_001", "full") into the key's field
// of `c`. Errors read "per_device_batch_size=abc: expected an integer" or
// "gemm_backend=mkl: expected one of onednn, openblas".
Status SetConfigValue(const ConfigKey& key, const std::string& value, TrainConfig* c);
// An integer as SetConfigValue reads one ("10_000", "12.0"), for string keys that hold
// numbers (checkpoint_period).
bool ParseConfigInteger(const std::string& text, int64_t* v);
// A finite number as SetConfigValue reads one ("0.5", "1e-3", "10_000"), for string keys
// that hold numbers (per_device_batch_size).
bool ParseConfigNumber(const std::string& text, double* v);
// The field's value as YAML text: integers and doubles plain (shortest form that parses
// back to the same double), strings and enum words double-quoted.
std::string FormatConfigValue(const ConfigKey& key, const TrainConfig& c);

}  // namespace elastrain
