#include "config/maxtext_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <set>
#include <system_error>

#include "common/files.h"
#include "config/config_keys.h"

namespace elastrain {
namespace {
namespace fs = std::filesystem;

// A MaxText-only key elastrain ignores safely only at these values (any other would
// train something else than the file asks for).
struct HonouredOnlyAt {
  std::string_view key;
  std::vector<std::string_view> words;  // allowed words, or one number when `number`
  bool number;
  std::string_view instead;  // what elastrain does
};

const std::vector<HonouredOnlyAt>& HonouredOnlyAtTable() {
  static const std::vector<HonouredOnlyAt> table = {
      {"lr_schedule_type", {"cosine"}, false,
       "elastrain's schedule is MaxText's cosine one: linear warmup, cosine decay, then 0"},
      {"opt_type", {"adamw", "adam_pax"}, false, "elastrain trains with AdamW"},
      {"num_experts", {"1"}, true, "elastrain trains dense models, num_experts: 1"},
      {"quantization", {""}, false, "elastrain trains unquantized, quantization: \"\""},
      {"attention_type", {"global"}, false, "elastrain's attention is global causal attention"},
      {"dropout_rate", {"0"}, true, "elastrain trains without dropout, dropout_rate: 0"},
      {"global_parameter_scale", {"1"}, true, "set the shape keys (base_emb_dim, ...) instead"},
  };
  return table;
}

bool SameNumber(std::string text, std::string_view want) {
  text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
  double a = 0, b = 0;
  auto [pa, ea] = std::from_chars(text.data(), text.data() + text.size(), a);
  auto [pb, eb] = std::from_chars(want.data(), want.data() + want.size(), b);
  return ea == std::errc() && pa == text.data() + text.size() && eb == std::errc() && a == b;
}

// The file base_config names, seen from `from` (the file that names it).
Result<std::string> ResolveBaseConfig(const std::string& from, const std::string& name) {
  const fs::path p(name);
  std::vector<fs::path> candidates;
  if (p.is_absolute()) {
    candidates.push_back(p);
  } else {
    const fs::path dir = fs::path(from).parent_path();
    candidates.push_back(dir / p);
    candidates.push_back(dir.parent_path() / p);
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
    if (key == "base_config" || IsMaxTextOnlyKey(key)) return true;
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

bool IsMaxTextModelKey(std::string_view key) {
  return key == "decoder_block" || (IsModelShapeKey(key) && key != "max_target_length");
}

Status CheckMaxTextOnlyValue(const std::string& prefix, std::string_view key, const YAML::Node& value) {
  for (const HonouredOnlyAt& h : HonouredOnlyAtTable()) {
    if (h.key != key) continue;
    if (value.IsNull()) return Status::OK();
    if (!value.IsScalar())
      return Status::InvalidArgument(fmt::format("{}{}: expected a single value, not a list or mapping", prefix, key));
    const std::string& v = value.Scalar();
    for (std::string_view w : h.words)
      if (h.number ? SameNumber(v, w) : v == w) return Status::OK();
    std::string allowed;
    for (std::string_view w : h.words) allowed += fmt::format("{}{}", allowed.empty() ? "" : " or ", w);
    return Status::InvalidArgument(fmt::format("{}{}={}: elastrain implements only {}={} ({})", prefix, key, v, key,
                                               allowed.empty() ? "\"\"" : allowed, h.instead));
  }
  return Status::OK();
}

}  // namespace elastrain
