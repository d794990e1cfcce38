// LoadConfig: embedded configs/base.yml, then CONFIG.yml (with the files it inherits from
// when it is MaxText's, maxtext_format.h), then key=value overrides, all through the key
// registry (config_keys.h); then the model is resolved from model_name and the explicit
// shape keys, and every value is validated (config_validate.cpp).
#include "config/config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <ctime>
#include <random>
#include <filesystem>
#include <utility>
#include <variant>

#include "common/files.h"
#include "config/config_keys.h"
#include "config/config_validate.h"
#include "config/maxtext_format.h"
#include "config/model_keys.h"

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
  std::string name;           // "" for the command line, else the file's path
  bool maxtext_file = false;  // a MaxText config (maxtext_format.h): unknown keys are ignored
};

std::string Prefix(const Source& src) { return src.name.empty() ? "" : src.name + ": "; }

constexpr const char* kEmbeddedBase = "configs/base.yml (embedded)";

// The config being built. The model keys (and MaxText's keys elastrain implements at one
// value only) are kept per source and judged once all are read (model_keys.h).
//
// A MaxText file may hold a word of MaxText's that a choice key of ours lacks (its
// base.yml's dataset_type: tfds). Such a word is refused only if nothing later sets the
// key (a file further down the base_config chain, or the command line).
struct Loading {
  TrainConfig c;
  ModelInputs model;
  bool model_name_given = false;  // by a file or the command line (not the embedded defaults)
  bool file_names_model = false;  // a MaxText file set model keys, or a file its decoder_block
  std::vector<std::string>* ignored = nullptr;
  std::vector<std::pair<std::string, Status>> refused;  // key, its error; in file order

  void Refuse(const std::string& key, const Status& st) {
    Settled(key);
    refused.emplace_back(key, st);
  }
  void Settled(const std::string& key) {
    std::erase_if(refused, [&](const auto& r) { return r.first == key; });
  }
  // The first refusal that stands, once every file and override is applied.
  Status Refusal() { return refused.empty() ? Status::OK() : refused.front().second; }
  // A model key's setting from `src` ("" for the command line). The "from the preset"
  // values of elastrain's own keys (a shape key 0, decoder_block "") unset the key.
  void SetModelKey(const std::string& key, const YAML::Node& v, const std::string& source, bool maxtext) {
    KeyLayer& layer = maxtext ? model.maxtext : model.user;
    const bool unset = !maxtext && v.IsScalar() &&
                       ((IsModelShapeKey(key) && v.Scalar() == "0") || (key == "decoder_block" && v.Scalar().empty()));
    if (unset) {
      layer.erase(key);
      return;
    }
    layer[key] = KeySetting{YAML::Clone(v), source};
    if (!source.empty() && IsModelKey(key) && (maxtext || key == "decoder_block")) file_names_model = true;
  }
};

void NoteIgnored(const std::string& key, std::vector<std::string>* ignored) {
  if (ignored && std::find(ignored->begin(), ignored->end(), key) == ignored->end()) ignored->push_back(key);
}

Status UnknownKey(const Source& src, const std::string& key) {
  return Status::InvalidArgument(fmt::format("{}unknown key '{}'; did you mean '{}'? (keys: configs/base.yml)",
                                             Prefix(src), key, ClosestConfigKey(key)));
}

// An unknown key of a MaxText file that is one or two edits from one of ours and no
// MaxText name we know: a misspelling, not a key of a newer MaxText. Empty if none.
std::string MisspeltKey(const std::string& key) {
  if (IsMaxTextOnlyKey(key)) return "";
  const std::string closest = ClosestConfigKey(key);
  const size_t d = EditDistance(key, closest);
  return d <= 2 && d * 4 <= key.size() ? closest : "";
}

// Sets one of our keys from its text. `None` (Python's, as MaxText writes it) leaves the
// key's value, but empties a string key and means "keep all" for max_num_checkpoints_to_keep.
Status SetValue(const Source& src, const ConfigKey& k, std::string value, TrainConfig* c) {
  if (value == "None") {
    if (std::string_view(k.name) == "max_num_checkpoints_to_keep") value = "-1";
    else if (std::holds_alternative<std::string* (*)(TrainConfig&)>(k.field)) value = "";
    else return Status::OK();
  }
  Status st = SetConfigValue(k, value, c);
  return st.ok() ? st : Status::InvalidArgument(Prefix(src) + st.message());
}

// One `key=value` of the command line: our keys, and MaxText's keys ignored (listed).
Status ApplyOverride(const std::string& key_in, const std::string& value, Loading* l) {
  const Source cli;
  const std::string key(FromMaxTextAlias(key_in));
  if (key == "base_config")
    return Status::InvalidArgument(
        fmt::format("base_config={}: only a config file names the file it inherits from; give that file as CONFIG",
                    value));
  if (IsModelKey(key) || IsRefusedUnlessNeutralKey(key)) {
    YAML::Node v(value);
    if (value.size() >= 2 && value.front() == '[' && value.back() == ']') {  // mlp_activations=[gelu,linear]
      try {
        v = YAML::Load(value);
      } catch (const YAML::Exception&) {
        return Status::InvalidArgument(fmt::format("{}={}: expected a list such as [gelu, linear]", key, value));
      }
    }
    l->SetModelKey(key, v, "", false);
    return Status::OK();
  }
  if (const ConfigKey* k = FindConfigKey(key)) {
    // train_data_columns=[text]: MaxText's one-element list.
    const bool one_column = key == "train_data_columns" && value.size() >= 2 && value.front() == '[' &&
                            value.back() == ']' && value.find(',') == std::string::npos;
    ELASTRAIN_RETURN_IF_ERROR(SetValue(cli, *k, one_column ? value.substr(1, value.size() - 2) : value, &l->c));
    if (key == "model_name") l->model_name_given = true;
    l->Settled(key);
    return Status::OK();
  }
  if (IsMaxTextOnlyKey(key)) {
    NoteIgnored(key, l->ignored);
    return Status::OK();
  }
  return UnknownKey(cli, key);
}

// The keys of one YAML mapping, in order.
Status ApplyYamlKeys(const Source& src, const YAML::Node& root, Loading* l) {
  if (root.IsNull()) return Status::OK();  // an empty file sets nothing
  if (!root.IsMap()) return Status::InvalidArgument(Prefix(src) + "expected a mapping of `key: value` lines");
  for (const auto& kv : root) {
    if (!kv.first.IsScalar()) return Status::InvalidArgument(Prefix(src) + "expected scalar keys");
    std::string key = kv.first.Scalar();
    const YAML::Node& v = kv.second;
    if (src.maxtext_file) {
      if (key == "base_config") continue;  // followed by ReadBaseConfigChain
      key = std::string(FromMaxTextAlias(key));
    }
    if (IsModelKey(key) || IsRefusedUnlessNeutralKey(key)) {
      if (!src.name.empty() && src.name != kEmbeddedBase) l->SetModelKey(key, v, src.name, src.maxtext_file);
      continue;
    }
    const ConfigKey* k = FindConfigKey(key);
    if (!k) {
      if (!src.maxtext_file) return UnknownKey(src, key);
      if (std::string near = MisspeltKey(key); !near.empty())
        return Status::InvalidArgument(fmt::format(
            "{}unknown key '{}'; did you mean '{}'? (this MaxText file's other unknown keys are ignored, but '{}' "
            "is no MaxText key elastrain knows)",
            Prefix(src), key, near, key));
      NoteIgnored(key, l->ignored);
      continue;
    }
    // MaxText's train_data_columns is a list (['text']); elastrain reads one column. A
    // MaxText file's longer list (DPO's ['chosen', 'rejected']) is for data elastrain
    // does not read: ignored, as the key was before elastrain read JSONL.
    const bool one_column = key == "train_data_columns" && v.IsSequence() && v.size() == 1 && v[0].IsScalar();
    if (key == "train_data_columns" && src.maxtext_file && v.IsSequence() && !one_column) {
      NoteIgnored(key, l->ignored);
      continue;
    }
    if (!v.IsNull() && !v.IsScalar() && !one_column)
      return Status::InvalidArgument(
          fmt::format("{}{}: expected a single value, not a list or mapping", Prefix(src), key));
    const std::string value = one_column ? v[0].Scalar() : v.IsNull() ? "" : v.Scalar();
    if (src.maxtext_file && IsMaxTextSentinel(key, value)) continue;
    const Status st = SetValue(src, *k, value, &l->c);
    if (st.ok()) {
      if (key == "model_name" && src.name != kEmbeddedBase) l->model_name_given = true;
      l->Settled(key);
    } else if (src.maxtext_file && std::holds_alternative<ChoiceField>(k->field)) {
      l->Refuse(key, st);
    } else {
      return st;
    }
  }
  return Status::OK();
}

Status ApplyYaml(const Source& src, const YAML::Node& root, Loading* l) {
  try {
    return ApplyYamlKeys(src, root, l);
  } catch (const YAML::Exception& e) {  // yaml-cpp reports odd nodes by throwing
    return Status::InvalidArgument(fmt::format("{}invalid YAML: {}", Prefix(src), e.what()));
  }
}

Result<YAML::Node> ParseYaml(const std::string& origin, const std::string& text) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(fmt::format("{}invalid YAML: {}", Prefix({origin}), e.what()));
  }
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

// Builds the model from the model keys of every source (model_keys.h) and resolves the
// sequence length against it. On success c->model holds the model, and
// max_target_length and decoder_block their resolved values, so that ConfigToYaml writes
// a config that loads back to the same model.
Status ResolveModel(const ModelInputs& in, TrainConfig* c) {
  if (c->max_target_length < 0)
    return Status::InvalidArgument(fmt::format(
        "max_target_length={}: expected a positive integer, or 0 for the preset's (capped at 128)",
        c->max_target_length));
  ELASTRAIN_ASSIGN_OR_RETURN(const BuiltModel built, BuildModel(in));
  ModelConfig m = built.model;
  const bool custom = in.model_name == "default" || in.maxtext_model_file;
  const std::string whose = in.maxtext_model_file ? fmt::format("model_name={} (its models/{}.yml)", in.model_name,
                                                                in.model_name)
                                                  : std::string("model_name=default");
  if (custom) {
    for (const ShapeKey& k : kShapeKeys)
      if (m.*k.field == 0)
        return Status::InvalidArgument(
            fmt::format("{}=0: {} has no preset, so every shape key must be set (> 0)", k.name, whose));
    if (c->max_target_length == 0)
      return Status::InvalidArgument(fmt::format(
          "max_target_length=0: {} has no preset, so every shape key must be set (> 0; MaxText's base.yml has 2048)",
          whose));
  }
  const int64_t T = c->max_target_length > 0 ? c->max_target_length : std::min<int64_t>(m.max_seq_len, 128);
  if (m.family == ModelFamily::kGpt2) {
    // Learned positions: the table is trainable_position_size (gpt3), the preset's, or T.
    if (built.trainable_position_size > 0) m.max_seq_len = built.trainable_position_size;
    else if (custom) m.max_seq_len = T;
    if (T > m.max_seq_len)
      return Status::InvalidArgument(fmt::format(
          "max_target_length={}: model_name={} learns {} position embeddings (gpt2 family); expected "
          "max_target_length <= {}",
          T, in.model_name, m.max_seq_len, m.max_seq_len));
  } else {
    m.max_seq_len = custom ? T : std::max(m.max_seq_len, T);  // RoPE extends to any length
  }
  ELASTRAIN_RETURN_IF_ERROR(m.Validate());
  c->model = m;
  c->max_target_length = T;
  c->decoder_block = built.block;
  return Status::OK();
}

}  // namespace

namespace {

// Defaults, then `files` in order (a base_config chain, or one file), then the MaxText
// model file of model_name when `model_file` is given, then overrides. With `find_model`,
// a model_name that names a MaxText models/<name>.yml (maxtext_format.h) loads again with
// that file, as MaxText does.
Result<TrainConfig> LoadFiles(const std::vector<ConfigFile>& files, bool maxtext,
                              const std::vector<std::string>& overrides, std::vector<std::string>* ignored,
                              bool find_model, const ConfigFile* model_file = nullptr,
                              const std::string& own_model_name = "") {
  Loading l;  // base.yml sets every key; its shape keys are 0 ("from the preset")
  l.ignored = ignored;
  ELASTRAIN_ASSIGN_OR_RETURN(const YAML::Node defaults, ParseYaml(kEmbeddedBase, BaseConfigYaml()));
  ELASTRAIN_RETURN_IF_ERROR(ApplyYaml({kEmbeddedBase, false}, defaults, &l));
  for (const ConfigFile& f : files) ELASTRAIN_RETURN_IF_ERROR(ApplyYaml({f.path, maxtext}, f.root, &l));
  if (model_file) ELASTRAIN_RETURN_IF_ERROR(ApplyYaml({model_file->path, true}, model_file->root, &l));
  for (const std::string& o : overrides) {
    size_t eq = o.find('=');
    if (eq == std::string::npos || eq == 0)
      return Status::InvalidArgument(fmt::format("override '{}': expected key=value (e.g. steps=100)", o));
    ELASTRAIN_RETURN_IF_ERROR(ApplyOverride(o.substr(0, eq), o.substr(eq + 1), &l));
  }
  ELASTRAIN_RETURN_IF_ERROR(l.Refusal());
  TrainConfig& c = l.c;
  if (c.run_name.empty()) c.run_name = UniqueRunName();
  // A MaxText file that sets model keys (MaxText's base.yml has model_name: default) or a
  // file that names its decoder_block describes its own model: it never trains
  // elastrain's default preset in its place.
  // A MaxText model file given as the config (models/NAME.yml) is the model NAME.
  const bool own_model = !l.model_name_given && l.file_names_model && !own_model_name.empty();
  if (!l.model_name_given && l.file_names_model) c.model_name = own_model ? own_model_name : "default";
  if (find_model && !model_file && !own_model && c.model_name != "default") {
    ELASTRAIN_ASSIGN_OR_RETURN(const std::optional<ConfigFile> found,
                               FindMaxTextModelFile(files, c.maxtext_configs, c.model_name));
    if (found) return LoadFiles(files, maxtext, overrides, ignored, false, &*found);
  }
  l.model.model_name = c.model_name;
  l.model.maxtext_model_file = model_file != nullptr || own_model;
  ELASTRAIN_RETURN_IF_ERROR(ResolveModel(l.model, &c));
  ELASTRAIN_RETURN_IF_ERROR(ResolveWorkerRange(&c));
  ELASTRAIN_RETURN_IF_ERROR(ResolveCheckpointPeriod(&c));
  ELASTRAIN_RETURN_IF_ERROR(ResolveMemorySnapshotPeriod(&c));
  ELASTRAIN_RETURN_IF_ERROR(ResolveSchedule(&c));
  ELASTRAIN_RETURN_IF_ERROR(ResolveBatch(&c));
  ELASTRAIN_RETURN_IF_ERROR(ValidateTrainConfig(c));
  return c;
}

}  // namespace

Result<TrainConfig> LoadConfig(const std::string& yaml_path, const std::vector<std::string>& overrides,
                               std::vector<std::string>* ignored) {
  if (yaml_path.empty()) return LoadFiles({}, false, overrides, ignored, true);
  if (!FileExists(yaml_path)) return Status::NotFound(yaml_path + ": config file not found");
  if (IsDirectory(yaml_path)) return Status::InvalidArgument(yaml_path + ": expected a config file, not a folder");
  ELASTRAIN_ASSIGN_OR_RETURN(const std::string text, ReadFile(yaml_path));
  if (static_cast<int64_t>(text.size()) > kMaxConfigFileBytes)
    return Status::InvalidArgument(
        fmt::format("{}: expected a config file of at most {} bytes", yaml_path, kMaxConfigFileBytes));
  ELASTRAIN_ASSIGN_OR_RETURN(YAML::Node root, ParseYaml(yaml_path, text));
  std::vector<ConfigFile> files;
  bool maxtext = false;
  try {
    maxtext = IsMaxTextConfig(root);
    if (maxtext) {
      ELASTRAIN_ASSIGN_OR_RETURN(files, ReadBaseConfigChain({yaml_path, root}));
    } else {
      files.push_back({yaml_path, root});
    }
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(fmt::format("{}: invalid YAML: {}", yaml_path, e.what()));
  }
  // A file in a MaxText models/ folder is that model's file (MaxText's model_name).
  const std::filesystem::path p(yaml_path);
  const std::string own = p.parent_path().filename() == "models" ? p.stem().string() : "";
  return LoadFiles(files, maxtext, overrides, ignored, true, nullptr, own);
}

Result<TrainConfig> LoadConfigText(const std::string& yaml_text, const std::string& origin,
                                   const std::vector<std::string>& overrides, std::vector<std::string>* ignored) {
  ELASTRAIN_ASSIGN_OR_RETURN(YAML::Node root, ParseYaml(origin, yaml_text));
  const bool maxtext = IsMaxTextConfig(root);
  // A config sent as text (a job submitted to the API) never makes this process read
  // another file: base_config is followed only from a file given on the command line.
  if (maxtext && static_cast<const YAML::Node&>(root)["base_config"])
    return Status::InvalidArgument(Prefix({origin}) +
                                   "base_config: a config given as text cannot inherit from a file; load it with "
                                   "`elastrain train CONFIG.yml` or submit the resolved config");
  return LoadFiles({{origin, root}}, maxtext, overrides, ignored, false);
}

Result<TrainConfig> LoadConfigText(const std::string& yaml_text, const std::string& origin) {
  return LoadConfigText(yaml_text, origin, {}, nullptr);
}

std::string UniqueRunName() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char when[32];
  std::strftime(when, sizeof(when), "%Y%m%d-%H%M%S", &tm);
  std::random_device rd;
  return fmt::format("run-{}-{:04x}", when, rd() & 0xffff);
}

std::string ConfigToYaml(const TrainConfig& c) {
  std::string out = "# elastrain resolved config: every key of configs/base.yml (loadable with LoadConfig)\n";
  std::string group;
  for (const ConfigKey& k : ConfigKeys()) {
    if (k.group != group) {
      group = k.group;
      out += fmt::format("\n# --- {} ---\n", group);
    }
    std::string value = FormatConfigValue(k, c);
    // gemma2's key counts [local, global] pairs; the model holds the layers.
    if (std::string_view(k.name) == "base_num_decoder_layers" && c.decoder_block == DecoderBlock::kGemma2)
      value = fmt::format("{}", c.model.num_layers / 2);
    out += fmt::format("{}: {}  # {}\n", k.name, value, k.doc);
    if (std::string_view(k.name) == "vocab_size")  // the model section's last key
      out += ModelKeysYaml(c.model, c.decoder_block.value_or(DecoderBlock::kLlama));
  }
  return out;
}

}  // namespace elastrain
