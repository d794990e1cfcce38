// manifest.json and the ShardFileInfo exchange text: JSON both ways, with every field
// checked on the way in so that a damaged or foreign file fails with its field's path.
#include <fmt/format.h>

#include <cinttypes>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "common/fault.h"
#include "common/files.h"
#include "common/json.h"

namespace elastrain::ckpt {

using json = nlohmann::ordered_json;  // written: keeps fields in the documented order
using value_t = nlohmann::json::value_t;
// Read strictly, every field required (common/json.h): errors name the file and the
// field's path, e.g. "tensors[1].pieces.params[0].flat_end".
using Reader = StrictReader;

namespace {

// Bound of each mesh axis and the world (the config's num_workers bound).
constexpr int64_t kMaxMeshAxis = 1 << 20;

json PieceToJson(const PieceRecord& r, bool with_tensor) {
  json j = {{"file", r.file},
            {"key", r.key},
            {"data_offset", r.data_offset},
            {"tp_dim", r.spec.tp_dim},
            {"tp_begin", r.spec.tp_begin},
            {"tp_end", r.spec.tp_end},
            {"flat_begin", r.spec.flat_begin},
            {"flat_end", r.spec.flat_end},
            {"xxh3", HexU64(r.checksum)}};
  if (with_tensor) {
    j["tensor"] = r.spec.tensor;
    j["shape"] = r.spec.global_shape;
  }
  return j;
}

std::vector<int64_t> Shape(Reader& r, const std::string& key) {
  std::vector<int64_t> shape;
  Reader s = r.Sub(key, value_t::array, "an array of integers");
  for (const nlohmann::json& d : s.raw()) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) {
      r.Error(key, "expected non-negative integers");
      break;
    }
    shape.push_back(d.get<int64_t>());
  }
  if (r.ok()) {
    Result<int64_t> n = CheckedNumElements(shape, ShapeString(shape));
    if (!n.ok()) r.Error(key, n.status().message());
  }
  return shape;
}

// `tensor`/`shape` come from the enclosing tensor record in a manifest.
Status PieceFromJson(Reader r, PieceRecord* out, const std::string* tensor, const std::vector<int64_t>* shape) {
  out->spec.tensor = tensor ? *tensor : r.Str("tensor");
  out->spec.global_shape = shape ? *shape : Shape(r, "shape");
  out->file = r.Str("file");
  out->key = r.Str("key");
  out->data_offset = r.IntIn("data_offset", 0, INT64_MAX);
  out->spec.tp_dim = static_cast<int>(r.IntIn("tp_dim", -1, 64));
  out->spec.tp_begin = r.Int("tp_begin");
  out->spec.tp_end = r.Int("tp_end");
  out->spec.flat_begin = r.Int("flat_begin");
  out->spec.flat_end = r.Int("flat_end");
  const std::string hex = r.Str("xxh3");
  if (!r.ok()) return r.status();
  char* end = nullptr;
  out->checksum = std::strtoull(hex.c_str(), &end, 16);
  if (hex.size() != 16 || *end != '\0') r.Error("xxh3", "expected 16 hex digits, got '" + hex + "'");
  if (r.ok()) {
    Status v = ValidatePiece(out->spec);
    if (!v.ok()) r.Error("", v.message());
  }
  return r.status();
}

json ShardToJson(const ShardFileInfo& s) {
  json pieces = json::array();
  for (const PieceRecord& p : s.pieces) pieces.push_back(PieceToJson(p, true));
  return {{"file", s.file}, {"kind", KindName(s.kind)}, {"bytes", s.bytes}, {"pieces", pieces}};
}

}  // namespace

std::string ShardFileInfoToJson(const std::vector<ShardFileInfo>& files) {
  json j = json::array();
  for (const ShardFileInfo& s : files) j.push_back(ShardToJson(s));
  return j.dump();
}

Result<std::vector<ShardFileInfo>> ShardFileInfoFromJson(const std::string& text) {
  ELASTRAIN_ASSIGN_OR_RETURN(nlohmann::json j, ParseJson(text, "shard file info"));
  if (!j.is_array()) return Status::Corruption(fmt::format("shard file info: expected a JSON array, got {}", JsonTypeName(j)));
  std::vector<ShardFileInfo> out;
  Reader files(j, "shard file info");
  for (size_t i = 0; i < files.size(); ++i) {
    Reader f = files.At(i);
    ShardFileInfo s;
    s.file = f.Str("file");
    s.bytes = f.IntIn("bytes", 0, INT64_MAX);
    const std::string kind = f.Str("kind");
    Reader pieces = f.Sub("pieces", value_t::array, "an array");
    ELASTRAIN_RETURN_IF_ERROR(pieces.status());
    ELASTRAIN_ASSIGN_OR_RETURN(s.kind, KindFromName(kind));
    for (size_t k = 0; k < pieces.size(); ++k) {
      s.pieces.emplace_back();
      ELASTRAIN_RETURN_IF_ERROR(PieceFromJson(pieces.At(k), &s.pieces.back(), nullptr, nullptr));
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::string ManifestToJson(const Manifest& m) {
  json files = json::array();
  for (const FileRecord& f : m.files) files.push_back({{"name", f.name}, {"kind", KindName(f.kind)}, {"bytes", f.bytes}});
  json tensors = json::array();
  for (const TensorRecord& t : m.tensors) {
    json pieces = json::object();
    for (StateKind k : kAllKinds) {
      if (t.Pieces(k).empty()) continue;
      json list = json::array();
      for (const PieceRecord& p : t.Pieces(k)) list.push_back(PieceToJson(p, false));
      pieces[KindName(k)] = list;
    }
    tensors.push_back({{"name", t.name}, {"dtype", t.dtype}, {"shape", t.global_shape}, {"pieces", pieces}});
  }
  json j = {{"format", kFormatName},
            {"version", kFormatVersion},
            {"step", m.step},
            {"config_yaml", m.config_yaml},
            {"mesh", {{"data", m.mesh.data}, {"fsdp", m.mesh.fsdp}, {"tensor", m.mesh.tensor}, {"world", m.mesh.world}}},
            {"data_state",
             {{"seed", m.data.seed}, {"epoch", m.data.epoch}, {"step", m.data.step},
              {"consumed_samples", m.data.consumed_samples}}},
            {"rng_state", m.rng_state},
            {"files", files},
            {"tensors", tensors}};
  return j.dump(1);
}

Result<Manifest> ManifestFromJson(const std::string& text, const std::string& origin) {
  auto parsed = ParseJson(text, origin);
  if (!parsed.ok()) return Status::Corruption(parsed.status().message() + " (truncated or not a manifest)");
  const nlohmann::json& j = parsed.value();
  if (!j.is_object())
    return Status::Corruption(fmt::format("{}: expected a JSON object, got {} (not a manifest)", origin, JsonTypeName(j)));
  Reader r(j, origin);
  const std::string format = r.Str("format");
  const int64_t version = r.Int("version");
  ELASTRAIN_RETURN_IF_ERROR(r.status());
  if (format != kFormatName)
    return Status::Corruption(fmt::format("{}: field 'format' is '{}', expected '{}'", origin, format, kFormatName));
  if (version != kFormatVersion)
    return Status::Corruption(fmt::format("{}: field 'version' is {}, this build reads version {}; use a matching "
                                          "elastrain", origin, version, kFormatVersion));
  Manifest m;
  // A negative step once made a restore delete every newer checkpoint (all of them).
  m.step = r.IntIn("step", 0, INT64_MAX);
  m.config_yaml = r.Str("config_yaml");
  m.rng_state = r.Str("rng_state");
  Reader mesh = r.Sub("mesh", value_t::object, "an object");
  m.mesh = {static_cast<int>(mesh.IntIn("data", 1, kMaxMeshAxis)), static_cast<int>(mesh.IntIn("fsdp", 1, kMaxMeshAxis)),
            static_cast<int>(mesh.IntIn("tensor", 1, kMaxMeshAxis)), static_cast<int>(mesh.IntIn("world", 1, kMaxMeshAxis))};
  ELASTRAIN_RETURN_IF_ERROR(mesh.status());
  if (static_cast<int64_t>(m.mesh.data) * m.mesh.fsdp * m.mesh.tensor != m.mesh.world)  // each <= 2^20: no overflow
    return Status::Corruption(fmt::format("{}: field 'mesh.world' is {}, expected data*fsdp*tensor = {}*{}*{}", origin,
                                          m.mesh.world, m.mesh.data, m.mesh.fsdp, m.mesh.tensor));
  Reader ds = r.Sub("data_state", value_t::object, "an object");
  m.data.seed = static_cast<uint64_t>(ds.Int("seed"));
  m.data.epoch = ds.IntIn("epoch", 0, INT64_MAX);
  m.data.step = ds.IntIn("step", 0, INT64_MAX);
  m.data.consumed_samples = ds.IntIn("consumed_samples", 0, INT64_MAX);
  ELASTRAIN_RETURN_IF_ERROR(ds.status());
  Reader files = r.Sub("files", value_t::array, "an array");
  ELASTRAIN_RETURN_IF_ERROR(files.status());
  for (size_t i = 0; i < files.size(); ++i) {
    Reader f = files.At(i);
    FileRecord rec{f.Str("name"), StateKind::kParams, f.IntIn("bytes", 0, INT64_MAX)};
    const std::string kind = f.Str("kind");
    ELASTRAIN_RETURN_IF_ERROR(f.status());
    Result<StateKind> k = KindFromName(kind);
    if (!k.ok()) return Status::Corruption(fmt::format("{}: field 'files[{}].kind': {}", origin, i, k.status().message()));
    rec.kind = *k;
    if (rec.name.empty() || rec.name.find('/') != std::string::npos)
      return Status::Corruption(fmt::format("{}: field 'files[{}].name': '{}' is not a plain file name", origin, i, rec.name));
    m.files.push_back(rec);
  }
  Reader tensors = r.Sub("tensors", value_t::array, "an array");
  ELASTRAIN_RETURN_IF_ERROR(tensors.status());
  for (size_t i = 0; i < tensors.size(); ++i) {
    Reader t = tensors.At(i);
    TensorRecord rec;
    rec.name = t.Str("name");
    if (t.ok() && rec.name.empty()) t.Error("name", "expected a non-empty tensor name");
    rec.dtype = t.Str("dtype");
    rec.global_shape = Shape(t, "shape");
    Reader pieces = t.Sub("pieces", value_t::object, "an object");
    ELASTRAIN_RETURN_IF_ERROR(pieces.status());
    if (rec.dtype != "F32") t.Error("dtype", "'" + rec.dtype + "' is not supported (only F32)");
    for (StateKind k : kAllKinds) {
      if (!pieces.raw().contains(KindName(k))) continue;
      Reader list = pieces.Sub(KindName(k), value_t::array, "an array");
      ELASTRAIN_RETURN_IF_ERROR(list.status());
      for (size_t p = 0; p < list.size(); ++p) {
        PieceRecord pr;
        ELASTRAIN_RETURN_IF_ERROR(PieceFromJson(list.At(p), &pr, &rec.name, &rec.global_shape));
        const FileRecord* file = nullptr;
        for (const FileRecord& f : m.files)
          if (f.name == pr.file && f.kind == k) file = &f;
        if (file == nullptr)
          return Status::Corruption(fmt::format("{}: tensor '{}' piece in '{}' ({}) names a file missing from 'files'",
                                                origin, rec.name, pr.file, KindName(k)));
        // A valid piece's size*4 fits int64 (ValidatePiece); its end must too, inside the file.
        int64_t end = 0;
        if (__builtin_add_overflow(pr.data_offset, pr.spec.size() * kF32Bytes, &end) || end > file->bytes)
          return Status::Corruption(fmt::format(
              "{}: field 'tensors[{}].pieces.{}[{}].data_offset': {} + {} bytes lies outside '{}' ({} bytes)", origin,
              i, KindName(k), p, pr.data_offset, pr.spec.size() * kF32Bytes, pr.file, file->bytes));
        rec.pieces[static_cast<int>(k)].push_back(std::move(pr));
      }
    }
    ELASTRAIN_RETURN_IF_ERROR(t.status());
    m.tensors.push_back(std::move(rec));
  }
  ELASTRAIN_RETURN_IF_ERROR(r.status());
  return m;
}

Status WriteManifest(const std::string& dir, const Manifest& m) {
  fault::CrashIfFires(fault::Point::kCrashBeforeManifest, {.path = dir});
  ELASTRAIN_RETURN_IF_ERROR(MakeDirs(dir));
  return WriteFileAtomic(dir + "/" + kManifestFile, ManifestToJson(m));
}

Result<Manifest> ReadManifest(const std::string& dir) {
  const std::string path = dir + "/" + kManifestFile;
  ELASTRAIN_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  ELASTRAIN_ASSIGN_OR_RETURN(Manifest m, ManifestFromJson(text, path));
  // In a step directory the step must be the directory's: restore and cleanup trust it.
  std::filesystem::path p(dir);
  if (!p.has_filename()) p = p.parent_path();  // "step_00000010/"
  const int64_t dir_step = StepOfDirName(p.filename().string());
  if (dir_step >= 0 && dir_step != m.step)
    return Status::Corruption(fmt::format("{}: field 'step' is {}, but the directory is {} (step {}); the manifest "
                                          "belongs to another checkpoint", path, m.step, p.filename().string(), dir_step));
  return m;
}

}  // namespace elastrain::ckpt
