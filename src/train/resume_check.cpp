#include "train/resume_check.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>

#include "ckpt/checkpoint.h"
#include "model/layout.h"

namespace elastrain {
namespace {

std::string Shape(const std::vector<int64_t>& s) {
  std::string out;
  for (int64_t d : s) out += (out.empty() ? "" : ", ") + std::to_string(d);
  return "[" + out + "]";
}

// The saved config's value of `key`, or "" (an old or odd manifest: not judged).
std::string SavedValue(const YAML::Node& saved, const char* key) {
  try {
    const YAML::Node v = saved[key];
    return v && v.IsScalar() ? v.Scalar() : "";
  } catch (const YAML::Exception&) {
    return "";
  }
}

}  // namespace

Status CheckResumeMatchesConfig(const TrainConfig& cfg) {
  const std::string run_dir = (std::filesystem::path(cfg.base_output_directory) / cfg.run_name).string();
  std::string dir;
  bool full_state = true;
  if (cfg.enable_checkpointing) {
    if (auto latest = ckpt::LatestCommitted(run_dir); latest.ok()) dir = *latest;
  }
  if (dir.empty() && !cfg.load_full_state_path.empty()) dir = cfg.load_full_state_path;
  if (dir.empty() && !cfg.load_parameters_path.empty()) dir = cfg.load_parameters_path, full_state = false;
  if (dir.empty()) return Status::OK();
  auto manifest = ckpt::ReadManifest(dir);
  if (!manifest.ok()) return Status::OK();  // the restore names the damage and falls back

  const std::string way_out =
      dir.rfind(run_dir, 0) == 0
          ? fmt::format("give another run_name (the default is new for every run), or remove {}", run_dir)
          : "give a checkpoint of this model, or leave load_full_state_path/load_parameters_path empty";
  auto refuse = [&](const std::string& what) {
    return Status::InvalidArgument(fmt::format("{} holds another {} than this config: {}; {}", dir,
                                               full_state ? "run" : "model", what, way_out));
  };
  const ParamLayout layout = BuildParamLayout(cfg.model);
  for (const ParamTensor& t : layout.tensors) {
    const ckpt::TensorRecord* saved = nullptr;
    for (const ckpt::TensorRecord& r : manifest->tensors)
      if (r.name == t.name) saved = &r;
    if (!saved)
      return refuse(fmt::format("tensor {} {} of model_name={} is not in the checkpoint", t.name, Shape(t.shape),
                                cfg.model_name));
    if (saved->global_shape != t.shape)
      return refuse(fmt::format("tensor {} is {} there, {} for model_name={} here", t.name,
                                Shape(saved->global_shape), Shape(t.shape), cfg.model_name));
  }
  if (manifest->tensors.size() != layout.tensors.size())
    return refuse(fmt::format("the checkpoint has {} tensors, model_name={} has {}", manifest->tensors.size(),
                              cfg.model_name, layout.tensors.size()));
  if (!full_state) return Status::OK();
  YAML::Node saved;
  try {
    saved = YAML::Load(manifest->config_yaml);
  } catch (const YAML::Exception&) {
    return Status::OK();
  }
  const std::pair<const char*, std::string> data_keys[] = {
      {"max_target_length", std::to_string(cfg.max_target_length)},
      {"dataset_type", std::string(ChoiceWord(kDatasetTypeChoices, cfg.dataset_type))},
      {"dataset_path", cfg.dataset_path}};
  for (const auto& [key, here] : data_keys) {
    const std::string there = SavedValue(saved, key);
    if (!there.empty() && there != here)
      return refuse(fmt::format("{} is {} there, {} here (the data position it saved means nothing for other data)",
                                key, there, here.empty() ? "\"\"" : here));
  }
  return Status::OK();
}

}  // namespace elastrain
