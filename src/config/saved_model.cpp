// LoadSavedModelConfig (config/config.h): a saved config's model, and nothing else of it.
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "config/config.h"
#include "config/model_keys.h"

namespace elastrain {

Result<TrainConfig> LoadSavedModelConfig(const std::string& yaml_text, const std::string& origin) {
  YAML::Node saved;
  try {
    saved = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(fmt::format("{}: the saved config does not parse as YAML ({})", origin, e.what()));
  }
  if (!saved.IsMap()) return Status::InvalidArgument(fmt::format("{}: the saved config is not a YAML mapping", origin));
  YAML::Node model(YAML::NodeType::Map);
  for (const auto& kv : saved) {
    if (!kv.first.IsScalar()) continue;
    const std::string key = kv.first.Scalar();
    if (key == "model_name") continue;
    if (IsModelKey(key) || key == "max_target_length") model[key] = kv.second;
  }
  model["model_name"] = "default";
  YAML::Emitter out;
  out << model;
  return LoadConfigText(out.c_str(), origin);
}

}  // namespace elastrain
