#include "config/maxtext_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <set>
#include <system_error>

#include "common/files.h"
#include "config/config_keys.h"
#include "config/model_keys.h"

namespace elastrain {
namespace {
namespace fs = std::filesystem;

// The file base_config names, seen from `from` (the file that names it).
Result<std::string> ResolveBaseConfig(const std::string& from, const std::string& name) {
  const fs::path p(name);
  std::vector<fs::path> candidates;
  if (p.is_absolute()) {
    candidates.push_back(p);
  } else {
    // MaxText looks next to the file, then in its configs folder: here the folders above
    // stand for that one (gpu/models/llama2_7b.yml finds configs/base.yml, and
    // inference/multihost/x/y.yml its "inference/inference_jetstream.yml").
    fs::path dir = fs::path(from).parent_path();
    for (int up = 0; up <= kMaxBaseConfigSearchUp; ++up) {
      candidates.push_back(dir / p);
      if (dir.empty() || dir == dir.parent_path()) break;
      dir = dir.parent_path();
    }
  }
  std::error_code ec;
  for (const fs::path& c : candidates)
    if (fs::exists(c, ec)) return c.lexically_normal().string();
  std::string looked;
  for (const fs::path& c : candidates) looked += (looked.empty() ? "" : " and ") + c.lexically_normal().string();
  return Status::NotFound(fmt::format("{}: base_config={}: no such file (looked for {})", from, name, looked));
}

Result<ConfigFile> ReadConfigFile(const std::string& path, const std::string& named_by) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec || !fs::is_regular_file(status))
    return Status::InvalidArgument(fmt::format("{}: base_config={}: expected a regular YAML file", named_by, path));
  const auto size = fs::file_size(path, ec);
  if (ec || static_cast<int64_t>(size) > kMaxConfigFileBytes)
    return Status::InvalidArgument(fmt::format("{}: base_config={}: expected a config file of at most {} bytes",
                                               named_by, path, kMaxConfigFileBytes));
  ELASTRAIN_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  try {
    ConfigFile f{path, YAML::Load(text)};
    if (!f.root.IsNull() && !f.root.IsMap())
      return Status::InvalidArgument(path + ": expected a mapping of `key: value` lines");
    return f;
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(fmt::format("{}: invalid YAML: {}", path, e.what()));
  }
}

}  // namespace

bool IsMaxTextConfig(const YAML::Node& root) {
  if (!root.IsMap()) return false;
  for (const auto& kv : root) {
    if (!kv.first.IsScalar()) continue;
    const std::string& key = kv.first.Scalar();
    // The model keys are elastrain's too (a resolved config.yml writes them).
    if (key == "base_config" || (IsMaxTextOnlyKey(key) && !IsModelKey(key))) return true;
  }
  return false;
}

Result<std::vector<ConfigFile>> ReadBaseConfigChain(ConfigFile top) {
  std::vector<ConfigFile> chain;
  std::set<std::string> seen;
  std::error_code ec;
  seen.insert(fs::weakly_canonical(top.path, ec).string());
  chain.push_back(std::move(top));
  while (true) {
    const ConfigFile& cur = chain.back();
    if (!cur.root.IsMap() || !cur.root["base_config"]) break;
    const YAML::Node v = cur.root["base_config"];
    if (!v.IsScalar() || v.Scalar().empty())
      return Status::InvalidArgument(fmt::format(
          "{}: base_config: expected the path of the YAML file this one inherits from (e.g. base_config: "
          "\"base.yml\")",
          cur.path));
    if (static_cast<int>(chain.size()) >= kMaxBaseConfigDepth)
      return Status::InvalidArgument(fmt::format("{}: base_config={}: expected at most {} files inheriting from one "
                                                 "another",
                                                 cur.path, v.Scalar(), kMaxBaseConfigDepth));
    ELASTRAIN_ASSIGN_OR_RETURN(std::string path, ResolveBaseConfig(cur.path, v.Scalar()));
    const std::string canonical = fs::weakly_canonical(path, ec).string();
    if (!seen.insert(canonical).second)
      return Status::InvalidArgument(
          fmt::format("{}: base_config={}: a cycle ({} inherits from itself)", cur.path, v.Scalar(), canonical));
    ELASTRAIN_ASSIGN_OR_RETURN(ConfigFile base, ReadConfigFile(path, cur.path));
    chain.push_back(std::move(base));
  }
  // Copies, not std::reverse: assigning a YAML::Node writes through to the node it refers
  // to rather than rebinding it, so swapping two would leave both the same.
  return std::vector<ConfigFile>(chain.rbegin(), chain.rend());
}

std::string_view FromMaxTextAlias(std::string_view name) {
  if (name == "learning_rate_final_fraction") return "cosine_learning_rate_final_fraction";
  return name;
}

bool IsMaxTextSentinel(std::string_view key, const std::string& value) {
  if (key == "run_name" || key == "base_output_directory") return value.empty();
  if (key == "eval_steps") return value == "-1";  // MaxText: all of the eval data
  return false;
}

Result<std::optional<ConfigFile>> FindMaxTextModelFile(const std::vector<ConfigFile>& chain,
                                                       const std::string& maxtext_configs,
                                                       const std::string& model_name) {
  std::string name = model_name;
  if (const size_t i = name.find("-Instruct"); i != std::string::npos) name.erase(i, 9);
  const bool plain = !name.empty() && name != "." && name != ".." &&
                     std::all_of(name.begin(), name.end(), [](char c) {
                       return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
                     });
  if (!plain)
    return Status::InvalidArgument(fmt::format(
        "model_name={}: expected a preset or a MaxText model's name (letters, digits, '.', '_', '-'), the file "
        "models/<name>.yml",
        model_name));
  std::vector<fs::path> dirs;
  if (!chain.empty()) {
    const fs::path top = fs::path(chain.back().path).parent_path();
    dirs.push_back(top);
    dirs.push_back(top.parent_path());
    for (auto it = chain.rbegin() + 1; it != chain.rend(); ++it) dirs.push_back(fs::path(it->path).parent_path());
  }
  if (!maxtext_configs.empty()) dirs.push_back(maxtext_configs);
  std::error_code ec;
  for (const fs::path& d : dirs) {
    const fs::path p = (d.empty() ? fs::path(".") : d) / "models" / (name + ".yml");
    if (!fs::exists(p, ec)) continue;
    ELASTRAIN_ASSIGN_OR_RETURN(ConfigFile f, ReadConfigFile(p.lexically_normal().string(), "model_name=" + model_name));
    return std::optional<ConfigFile>(std::move(f));
  }
  return std::optional<ConfigFile>();
}

}  // namespace elastrain
