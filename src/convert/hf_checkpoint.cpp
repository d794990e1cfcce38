#include "convert/hf_checkpoint.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/safetensors.h"
#include "config/config.h"
#include "common/files.h"
#include "convert/hf_model.h"
#include "model/layout.h"

namespace elastrain::convert {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr char kConfigFile[] = "config.json";
constexpr char kSingleFile[] = "model.safetensors";
constexpr char kIndexFile[] = "model.safetensors.index.json";
constexpr char kModelYaml[] = "model.yml";

// IEEE half to float (every value: subnormals, infinities, NaN).
float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// A tensor of one HF file.
struct HfTensor {
  std::string file;  // path
  ckpt::SafetensorsEntry entry;
  int64_t data_start = 0;
};

// The tensors of an HF model directory, by name.
class HfFiles {
 public:
  static Result<HfFiles> Open(const std::string& dir) {
    HfFiles f;
    std::vector<std::string> files;
    const std::string index = dir + "/" + kIndexFile;
    if (FileExists(index)) {
      ELASTRAIN_ASSIGN_OR_RETURN(const std::string text, ReadFile(index));
      json j;
      try {
        j = json::parse(text);
      } catch (const json::exception& e) {
        return Status::InvalidArgument(fmt::format("{}: not JSON ({})", index, e.what()));
      }
      if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
        return Status::InvalidArgument(fmt::format("{}: expected an object with a weight_map object", index));
      std::set<std::string> seen;
      for (const auto& [name, file] : j["weight_map"].items()) {
        if (!file.is_string())
          return Status::InvalidArgument(fmt::format("{}: weight_map[\"{}\"]: expected a file name", index, name));
        const std::string fn = file.get<std::string>();
        if (fn.empty() || fn.find('/') != std::string::npos || fn == "." || fn == ".." ||
            fn.size() < 12 || fn.compare(fn.size() - 12, 12, ".safetensors") != 0)
          return Status::InvalidArgument(fmt::format(
              "{}: weight_map[\"{}\"]: '{}': expected a .safetensors file name in the same directory", index, name,
              fn));
        if (seen.insert(fn).second) files.push_back(fn);
      }
      if (files.empty()) return Status::InvalidArgument(fmt::format("{}: the weight_map is empty", index));
    } else if (FileExists(dir + "/" + kSingleFile)) {
      files.push_back(kSingleFile);
    } else {
      return Status::NotFound(fmt::format("{}: neither {} nor {} (expected a Hugging Face model directory)", dir,
                                          kSingleFile, kIndexFile));
    }
    for (const std::string& fn : files) {
      const std::string path = dir + "/" + fn;
      ELASTRAIN_ASSIGN_OR_RETURN(ckpt::SafetensorsHeader h, ckpt::ReadSafetensorsHeader(path));
      for (const ckpt::SafetensorsEntry& e : h.entries) {
        if (f.tensors_.count(e.key))
          return Status::InvalidArgument(
              fmt::format("{}: tensor {} is also in {}", path, e.key, f.tensors_.at(e.key).file));
        f.tensors_[e.key] = {path, e, h.data_start};
      }
    }
    return f;
  }

  const std::map<std::string, HfTensor>& tensors() const { return tensors_; }

  // The values of `name` as floats, its shape checked against `shape` first.
  Result<std::vector<float>> Read(const std::string& name, const std::vector<int64_t>& shape) const {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) return Status::NotFound(fmt::format("tensor {} is missing", name));
    const HfTensor& t = it->second;
    if (t.entry.shape != shape)
      return Status::InvalidArgument(fmt::format("{}: tensor {} is {}, the model needs {}", t.file, name,
                                                 ckpt::ShapeString(t.entry.shape), ckpt::ShapeString(shape)));
    const std::string& dt = t.entry.dtype;
    const int64_t elem = dt == "F32" ? 4 : dt == "F64" ? 8 : dt == "F16" || dt == "BF16" ? 2 : 0;
    if (elem == 0)
      return Status::InvalidArgument(
          fmt::format("{}: tensor {} is {}: expected F32, F16, BF16 or F64", t.file, name, dt));
    const int64_t n = ckpt::NumElements(shape);
    if (t.entry.end - t.entry.begin != n * elem)
      return Status::Corruption(fmt::format("{}: tensor {} has {} bytes for {} {} values", t.file, name,
                                            t.entry.end - t.entry.begin, n, dt));
    std::vector<unsigned char> raw(static_cast<size_t>(n * elem));
    const int fd = ::open(t.file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::IOError(fmt::format("{}: cannot open ({})", t.file, std::strerror(errno)));
    Status st = ckpt::PreadAll(fd, raw.data(), raw.size(), t.data_start + t.entry.begin, t.file);
    ::close(fd);
    ELASTRAIN_RETURN_IF_ERROR(st);
    std::vector<float> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const unsigned char* p = raw.data() + i * elem;
      if (dt == "F32") {
        std::memcpy(&out[i], p, 4);
      } else if (dt == "F64") {
        double d;
        std::memcpy(&d, p, 8);
        out[i] = static_cast<float>(d);
      } else {
        uint16_t h;
        std::memcpy(&h, p, 2);
        if (dt == "BF16") {
          const uint32_t bits = static_cast<uint32_t>(h) << 16;
          std::memcpy(&out[i], &bits, 4);
        } else {
          out[i] = HalfToFloat(h);
        }
      }
      if (!std::isfinite(out[i]))
        return Status::InvalidArgument(fmt::format("{}: tensor {} holds a non-finite value at index {}", t.file,
                                                   name, i));
    }
    return out;
  }

 private:
  std::map<std::string, HfTensor> tensors_;
};

// An output directory that must not exist or be empty; on failure what was written
// goes (the directory too if this made it).
class OutDir {
 public:
  static Result<OutDir> Claim(const std::string& path) {
    // The path is set only once the directory is ours: a refused one is never touched.
    OutDir d;
    std::error_code ec;
    if (fs::exists(path, ec)) {
      if (!fs::is_directory(path, ec) || !fs::is_empty(path, ec))
        return Status::FailedPrecondition(
            fmt::format("{}: exists and is not an empty directory (nothing is overwritten)", path));
    } else {
      ELASTRAIN_RETURN_IF_ERROR(MakeDirs(path));
      d.created_ = true;
    }
    d.path_ = path;
    return d;
  }
  void Keep() { keep_ = true; }
  ~OutDir() {
    if (keep_ || path_.empty()) return;
    std::error_code ec;
    if (created_) {
      fs::remove_all(path_, ec);
    } else {
      for (const auto& e : fs::directory_iterator(path_, ec)) fs::remove_all(e.path(), ec);
    }
  }
  OutDir(OutDir&& o) noexcept : path_(std::move(o.path_)), created_(o.created_), keep_(o.keep_) { o.path_.clear(); }
  OutDir(const OutDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  OutDir() = default;
  std::string path_;
  bool created_ = false, keep_ = false;
};

}  // namespace

Result<ImportResult> ImportHf(const std::string& hf_dir, const std::string& out_dir) {
  const std::string config_path = hf_dir + "/" + kConfigFile;
  if (!FileExists(config_path))
    return Status::NotFound(fmt::format("{}: no {} (expected a Hugging Face model directory)", hf_dir, kConfigFile));
  ELASTRAIN_ASSIGN_OR_RETURN(const std::string config_json, ReadFile(config_path));
  ELASTRAIN_ASSIGN_OR_RETURN(const std::string yaml, ModelYamlFromHfConfig(config_json, config_path));
  ELASTRAIN_ASSIGN_OR_RETURN(const TrainConfig cfg, LoadConfigText(yaml, config_path));
  const ModelConfig& model = cfg.model;
  const DecoderBlock block = cfg.decoder_block.value_or(DecoderBlock::kLlama);
  ELASTRAIN_ASSIGN_OR_RETURN(const HfFiles files, HfFiles::Open(hf_dir));

  std::string prefix;
  if (model.family == ModelFamily::kGpt2 && files.tensors().count("transformer.wte.weight")) prefix = "transformer.";
  const std::vector<HfTensorRule> rules = HfTensorRules(model, block, prefix);
  // Every HF tensor the model needs, in its shape; nothing else but buffers.
  std::map<std::string, std::pair<size_t, size_t>> where;  // our tensor -> (rule, part)
  std::set<std::string> used;
  for (size_t r = 0; r < rules.size(); ++r) {
    auto it = files.tensors().find(rules[r].hf);
    if (it == files.tensors().end())
      return Status::NotFound(fmt::format("{}: tensor {} is missing (config.json describes {} layers, {} heads{})",
                                          hf_dir, rules[r].hf, model.num_layers, model.num_heads,
                                          model.tie_embeddings ? "" : ", an untied lm_head"));
    if (it->second.entry.shape != rules[r].hf_shape)
      return Status::InvalidArgument(fmt::format("{}: tensor {} is {}, config.json implies {}", it->second.file,
                                                 rules[r].hf, ckpt::ShapeString(it->second.entry.shape),
                                                 ckpt::ShapeString(rules[r].hf_shape)));
    used.insert(rules[r].hf);
    for (size_t p = 0; p < rules[r].ours.size(); ++p) where[rules[r].ours[p]] = {r, p};
  }
  std::vector<std::string> unexpected;
  for (const auto& [name, t] : files.tensors())
    if (!used.count(name) && !IsHfBuffer(name) && !(model.tie_embeddings && name == "lm_head.weight"))
      unexpected.push_back(name);
  if (!unexpected.empty())
    return Status::InvalidArgument(fmt::format(
        "{}: {} tensor(s) are not part of the model config.json describes, e.g. {} (in {})", hf_dir,
        unexpected.size(), unexpected[0], files.tensors().at(unexpected[0]).file));

  const ParamLayout layout = BuildParamLayout(model);
  std::vector<ckpt::PieceSpec> pieces;
  for (const ParamTensor& t : layout.tensors) {
    if (!where.count(t.name))
      return Status::Internal(fmt::format("tensor {} of the layout has no Hugging Face rule", t.name));
    pieces.push_back({t.name, t.shape, -1, 0, 0, 0, t.size});
  }
  ELASTRAIN_ASSIGN_OR_RETURN(OutDir out, OutDir::Claim(out_dir));
  size_t cached_rule = SIZE_MAX;
  std::vector<float> hf_values, ours;
  auto fill = [&](size_t i) -> Result<const float*> {
    const ParamTensor& t = layout.tensors[i];
    const auto [r, part] = where.at(t.name);
    if (r != cached_rule) {
      ELASTRAIN_ASSIGN_OR_RETURN(hf_values, files.Read(rules[r].hf, rules[r].hf_shape));
      cached_rule = r;
    }
    ours = OursFromHf(rules[r], part, hf_values, t.shape);
    return ours.data();
  };
  ELASTRAIN_ASSIGN_OR_RETURN(
      const ckpt::ShardFileInfo shard,
      ckpt::WriteShardFileFrom(out_dir + "/" + ckpt::ShardFileName(ckpt::StateKind::kParams, 0),
                               ckpt::StateKind::kParams, pieces, fill));
  ckpt::Manifest m;
  m.step = 0;
  m.config_yaml = yaml;
  ELASTRAIN_RETURN_IF_ERROR(m.AddShard(shard));
  ELASTRAIN_RETURN_IF_ERROR(ckpt::WriteManifest(out_dir, m));
  ELASTRAIN_RETURN_IF_ERROR(WriteFileAtomic(out_dir + "/" + kModelYaml, yaml));
  ELASTRAIN_RETURN_IF_ERROR(ckpt::Commit(out_dir));
  out.Keep();
  return ImportResult{out_dir + "/" + kModelYaml, static_cast<int64_t>(layout.tensors.size()), shard.bytes};
}

Result<ExportResult> ExportHf(const std::string& ckpt_dir, const std::string& out_dir, int64_t max_shard_bytes) {
  if (max_shard_bytes < 1) return Status::InvalidArgument(fmt::format("max shard size {}: expected > 0", max_shard_bytes));
  ELASTRAIN_ASSIGN_OR_RETURN(const ckpt::Manifest m, ckpt::ReadManifest(ckpt_dir));
  if (!FileExists(ckpt_dir + "/" + ckpt::kCommittedFile))
    return Status::FailedPrecondition(fmt::format("{}: not committed (a partial save); export a committed checkpoint",
                                                  ckpt_dir));
  ELASTRAIN_ASSIGN_OR_RETURN(const TrainConfig cfg,
                             LoadSavedModelConfig(m.config_yaml, ckpt_dir + "/manifest.json (config_yaml)"));
  const ModelConfig& model = cfg.model;
  const DecoderBlock block = cfg.decoder_block.value_or(DecoderBlock::kLlama);
  ELASTRAIN_ASSIGN_OR_RETURN(const std::string config_json, HfConfigFromModel(model, block));
  const ParamLayout layout = BuildParamLayout(model);
  for (const ParamTensor& t : layout.tensors) {
    const ckpt::TensorRecord* saved = m.Find(t.name);
    if (!saved || saved->global_shape != t.shape)
      return Status::InvalidArgument(fmt::format("{}: tensor {} {} of the saved config's model is {}", ckpt_dir, t.name,
                                                 ckpt::ShapeString(t.shape), saved ? "another shape there" : "missing"));
  }
  const std::vector<HfTensorRule> rules = HfTensorRules(model, block);
  // Shards: rules in order, a new file once the next tensor would pass the limit.
  std::vector<std::vector<size_t>> shards(1);
  int64_t in_shard = 0, total = 0;
  for (size_t r = 0; r < rules.size(); ++r) {
    const int64_t bytes = ckpt::NumElements(rules[r].hf_shape) * ckpt::kF32Bytes;
    if (!shards.back().empty() && in_shard + bytes > max_shard_bytes) shards.emplace_back(), in_shard = 0;
    shards.back().push_back(r);
    in_shard += bytes;
    total += bytes;
  }
  ELASTRAIN_ASSIGN_OR_RETURN(OutDir out, OutDir::Claim(out_dir));
  json weight_map = json::object();
  ExportResult res;
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string name = shards.size() == 1 ? std::string(kSingleFile)
                                                : fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, shards.size());
    std::vector<ckpt::SafetensorsWriter::Entry> entries;
    for (size_t r : shards[s]) entries.push_back({rules[r].hf, rules[r].hf_shape}), weight_map[rules[r].hf] = name;
    ELASTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ckpt::SafetensorsWriter> w,
                               ckpt::SafetensorsWriter::Create(out_dir + "/" + name, entries, {{"format", "pt"}}));
    for (size_t r : shards[s]) {
      std::vector<std::vector<float>> ours;
      std::vector<std::vector<int64_t>> shapes;
      for (const std::string& t : rules[r].ours) {
        ELASTRAIN_ASSIGN_OR_RETURN(std::vector<float> v, ckpt::ReadGlobalTensor(m, ckpt_dir, ckpt::StateKind::kParams, t));
        ours.push_back(std::move(v));
        shapes.push_back(layout.Find(t)->shape);
      }
      const std::vector<float> hf = HfFromOurs(rules[r], ours, shapes);
      ELASTRAIN_RETURN_IF_ERROR(w->Append(hf.data(), static_cast<int64_t>(hf.size())).status());
    }
    ELASTRAIN_ASSIGN_OR_RETURN(const int64_t bytes, w->Finish());
    res.bytes += bytes;
    ++res.files;
  }
  if (shards.size() > 1) {
    const json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    ELASTRAIN_RETURN_IF_ERROR(WriteFileAtomic(out_dir + "/" + kIndexFile, index.dump(2) + "\n"));
  }
  ELASTRAIN_RETURN_IF_ERROR(WriteFileAtomic(out_dir + "/" + kConfigFile, config_json));
  res.tensors = static_cast<int64_t>(rules.size());
  out.Keep();
  return res;
}

}  // namespace elastrain::convert
