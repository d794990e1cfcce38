// LoadConfig: embedded configs/base.yml, then CONFIG.yml, then key=value overrides, all
// through the key registry (config_keys.h); then the model is resolved from model_name
// and the explicit shape keys, and every value is validated (config_validate.cpp).
#include "config/config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>

#include "common/files.h"
#include "config/config_keys.h"
#include "config/config_validate.h"

namespace elastrain {

// Defined in the .cpp that CMake generates from configs/base.yml.
extern const char kEmbeddedBaseConfigYaml[];

const std::string& BaseConfigYaml() {
  static const std::string text = kEmbeddedBaseConfigYaml;
  return text;
}

namespace {

// Where settings come from; decides how unknown keys are treated and prefixes errors.
struct Source {
  std::string name;         // "" for the command line, else the file's path
  bool maxtext_ok = false;  // MaxText-only keys are ignored rather than rejected
};

std::string Prefix(const Source& src) { return src.name.empty() ? "" : src.name + ": "; }

void NoteIgnored(const std::string& key, std::vector<std::string>* ignored) {
  if (ignored && std::find(ignored->begin(), ignored->end(), key) == ignored->end()) ignored->push_back(key);
}

Status ApplyKeyValue(const Source& src, const std::string& key, const std::string& value, TrainConfig* c,
                     std::vector<std::string>* ignored) {
  if (const ConfigKey* k = FindConfigKey(key)) {
    Status st = SetConfigValue(*k, value, c);
    return st.ok() ? st : Status::InvalidArgument(Prefix(src) + st.message());
  }
  if (src.maxtext_ok && IsMaxTextOnlyKey(key)) {
    NoteIgnored(key, ignored);
    return Status::OK();
  }
  return Status::InvalidArgument(fmt::format("{}unknown key '{}'; did you mean '{}'? (keys: configs/base.yml)",
                                             Prefix(src), key, ClosestConfigKey(key)));
}

Status ApplyYaml(const Source& src, const std::string& text, TrainConfig* c, std::vector<std::string>* ignored) {
  try {
    YAML::Node root = YAML::Load(text);
    if (root.IsNull()) return Status::OK();  // an empty file sets nothing
    if (!root.IsMap()) return Status::InvalidArgument(Prefix(src) + "expected a mapping of `key: value` lines");
    for (const auto& kv : root) {
      if (!kv.first.IsScalar()) return Status::InvalidArgument(Prefix(src) + "expected scalar keys");
      std::string key = kv.first.Scalar();
      const YAML::Node& v = kv.second;
      if (!FindConfigKey(key) && src.maxtext_ok && IsMaxTextOnlyKey(key)) {
        NoteIgnored(key, ignored);  // MaxText values may be lists (mesh_axes); never read them
        continue;
      }
      if (!v.IsNull() && !v.IsScalar())
        return Status::InvalidArgument(
            fmt::format("{}{}: expected a single value, not a list or mapping", Prefix(src), key));
      ELASTRAIN_RETURN_IF_ERROR(ApplyKeyValue(src, key, v.IsNull() ? "" : v.Scalar(), c, ignored));
    }
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(fmt::format("{}invalid YAML: {}", Prefix(src), e.what()));
  }
  return Status::OK();
}

struct ShapeKey {
  const char* name;
  int64_t ModelConfig::*field;
};
constexpr ShapeKey kShapeKeys[] = {
    {"base_emb_dim", &ModelConfig::emb_dim},
    {"base_num_query_heads", &ModelConfig::num_heads},
    {"base_num_kv_heads", &ModelConfig::num_kv_heads},
    {"base_mlp_dim", &ModelConfig::mlp_dim},
    {"base_num_decoder_layers", &ModelConfig::num_layers},
    {"head_dim", &ModelConfig::head_dim},
    {"vocab_size", &ModelConfig::vocab_size},
};

// On entry c->model holds the shape keys as given (0: from the preset). On success it
// holds the resolved model, and max_target_length and decoder_block their resolved
// values, so that ConfigToYaml writes a config that loads back to the same model.
Status ResolveModel(TrainConfig* c) {
  const ModelConfig given = c->model;
  for (const ShapeKey& k : kShapeKeys)
    if (given.*k.field < 0)
      return Status::InvalidArgument(fmt::format(
          "{}={}: expected a positive integer, or 0 for the model_name preset's value", k.name, given.*k.field));
  if (c->max_target_length < 0)
    return Status::InvalidArgument(fmt::format(
        "max_target_length={}: expected a positive integer, or 0 for the preset's (capped at 128)",
        c->max_target_length));

  ModelConfig m;
  const bool custom = c->model_name == "default";
  if (custom) {
    for (const ShapeKey& k : kShapeKeys)
      if (given.*k.field == 0)
        return Status::InvalidArgument(
            fmt::format("{}=0: model_name=default has no preset, so every shape key must be set (> 0)", k.name));
    if (c->max_target_length == 0)
      return Status::InvalidArgument(
          "max_target_length=0: model_name=default has no preset, so every shape key must be set (> 0)");
  } else {
    ELASTRAIN_ASSIGN_OR_RETURN(m, ModelPreset(c->model_name));
  }
  for (const ShapeKey& k : kShapeKeys)
    if (given.*k.field > 0) m.*k.field = given.*k.field;
  if (!c->decoder_block.empty()) {
    ELASTRAIN_ASSIGN_OR_RETURN(m.family, ParseFamily(c->decoder_block));
  }

  const int64_t T = c->max_target_length > 0 ? c->max_target_length : std::min<int64_t>(m.max_seq_len, 128);
  if (custom) {
    m.max_seq_len = T;
  } else if (m.family == ModelFamily::kGpt2) {
    if (T > m.max_seq_len)
      return Status::InvalidArgument(fmt::format(
          "max_target_length={}: model_name={} learns {} position embeddings (gpt2 family); expected "
          "max_target_length <= {}",
          T, c->model_name, m.max_seq_len, m.max_seq_len));
  } else {
    m.max_seq_len = std::max(m.max_seq_len, T);  // RoPE extends to any length
  }
  ELASTRAIN_RETURN_IF_ERROR(m.Validate());
  c->model = m;
  c->max_target_length = T;
  c->decoder_block = FamilyName(m.family);
  return Status::OK();
}

}  // namespace

Result<TrainConfig> LoadConfig(const std::string& yaml_path, const std::vector<std::string>& overrides,
                               std::vector<std::string>* ignored) {
  std::string text;  // no file: an empty YAML sets nothing
  if (!yaml_path.empty()) {
    if (!FileExists(yaml_path)) return Status::NotFound(yaml_path + ": config file not found");
    ELASTRAIN_ASSIGN_OR_RETURN(text, ReadFile(yaml_path));
  }
  return LoadConfigText(text, yaml_path, overrides, ignored);
}

Result<TrainConfig> LoadConfigText(const std::string& yaml_text, const std::string& origin,
                                   const std::vector<std::string>& overrides, std::vector<std::string>* ignored) {
  TrainConfig c;  // base.yml sets every key; its shape keys are 0 ("from the preset")
  ELASTRAIN_RETURN_IF_ERROR(ApplyYaml({"configs/base.yml (embedded)", false}, BaseConfigYaml(), &c, nullptr));
  ELASTRAIN_RETURN_IF_ERROR(ApplyYaml({origin, true}, yaml_text, &c, ignored));
  for (const std::string& o : overrides) {
    size_t eq = o.find('=');
    if (eq == std::string::npos || eq == 0)
      return Status::InvalidArgument(fmt::format("override '{}': expected key=value (e.g. steps=100)", o));
    ELASTRAIN_RETURN_IF_ERROR(ApplyKeyValue({"", true}, o.substr(0, eq), o.substr(eq + 1), &c, ignored));
  }
  ELASTRAIN_RETURN_IF_ERROR(ResolveModel(&c));
  ELASTRAIN_RETURN_IF_ERROR(ResolveWorkerRange(&c));
  ELASTRAIN_RETURN_IF_ERROR(ResolveCheckpointPeriod(&c));
  ELASTRAIN_RETURN_IF_ERROR(ValidateTrainConfig(c));
  return c;
}

Result<TrainConfig> LoadConfigText(const std::string& yaml_text, const std::string& origin) {
  return LoadConfigText(yaml_text, origin, {}, nullptr);
}

std::string ConfigToYaml(const TrainConfig& c) {
  std::string out = "# elastrain resolved config: every key of configs/base.yml (loadable with LoadConfig)\n";
  std::string group;
  for (const ConfigKey& k : ConfigKeys()) {
    if (k.group != group) {
      group = k.group;
      out += fmt::format("\n# --- {} ---\n", group);
    }
    out += fmt::format("{}: {}  # {}\n", k.name, FormatConfigValue(k, c), k.doc);
  }
  return out;
}

}  // namespace elastrain
