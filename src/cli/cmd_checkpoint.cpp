// `elastrain checkpoint list|verify|inspect|export`: look at and consolidate checkpoints
// (docs/checkpoint-format.md). Exit codes: 0 success; 1 a checkpoint that fails
// verification or cannot be read or written; 2 bad usage. Arguments parsed with CLI11.
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/safetensors.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/checked_math.h"
#include "common/files.h"
#include "convert/hf_checkpoint.h"

namespace elastrain {

namespace {

using ckpt::StateKind;

// The model-shape keys `export` copies from the saved config into config.json.
constexpr const char* kModelKeys[] = {"base_emb_dim",     "base_num_query_heads",    "base_num_kv_heads",
                                      "base_mlp_dim",     "base_num_decoder_layers", "head_dim",
                                      "vocab_size",       "decoder_block",           "max_target_length"};

// Runtime failures exit 1 here even for a missing checkpoint: the arguments were
// well-formed, the storage did not hold what they name.
int Fail(const std::string& sub, const Status& st) {
  std::fprintf(stderr, "elastrain checkpoint %s: error: %s\n", sub.c_str(), st.message().c_str());
  return 1;
}

std::string Bytes(int64_t b) { return FormatBytes(b); }

int List(const std::string& run_dir) {
  auto all = ckpt::ListCheckpoints(run_dir);
  if (!all.ok()) return Fail("list", all.status());
  if (all->empty()) {
    std::printf("no checkpoints under %s/%s\n", run_dir.c_str(), ckpt::kCheckpointsDir);
    return 0;
  }
  std::string out = fmt::format("{:>10}  {:<11}  {:>10}  {}\n", "STEP", "STATE", "SIZE", "LATEST");
  for (const ckpt::CheckpointInfo& c : *all)
    out += fmt::format("{:>10}  {:<11}  {:>10}  {}\n", c.step, c.committed ? "committed" : "uncommitted", Bytes(c.bytes),
                       c.latest ? "<- LATEST" : "");
  std::fputs(out.c_str(), stdout);
  return 0;
}

int Verify(const std::string& dir) {
  const std::vector<std::string> problems = ckpt::FindProblems(dir);
  for (const std::string& p : problems) std::printf("%s\n", p.c_str());
  if (!problems.empty()) {
    std::fprintf(stderr, "elastrain checkpoint verify: %s: %zu problem(s)\n", dir.c_str(), problems.size());
    return 1;
  }
  std::printf("%s: ok\n", dir.c_str());
  return 0;
}

std::string PieceLine(const ckpt::PieceRecord& p) {
  const std::string tp = p.spec.tp_dim < 0 ? std::string("replicated")
                                           : fmt::format("tp dim {} [{}, {})", p.spec.tp_dim, p.spec.tp_begin, p.spec.tp_end);
  return fmt::format("      {:<28} {:<22} flat [{}, {})\n", p.file, tp, p.spec.flat_begin, p.spec.flat_end);
}

int Inspect(const std::string& dir, bool json) {
  auto m = ckpt::ReadManifest(dir);
  if (!m.ok()) return Fail("inspect", m.status());
  if (json) {
    std::printf("%s\n", ckpt::ManifestToJson(*m).c_str());
    return 0;
  }
  int64_t bytes = 0;
  for (const ckpt::FileRecord& f : m->files)  // recorded sizes, each >= 0: saturate rather than wrap
    if (__builtin_add_overflow(bytes, f.bytes, &bytes)) bytes = INT64_MAX;
  std::string out = fmt::format("checkpoint {} ({})\n", dir, FileExists(dir + "/" + ckpt::kCommittedFile) ? "committed" : "NOT committed");
  out += fmt::format("step: {}\n", m->step);
  out += fmt::format("mesh: data {} x fsdp {} x tensor {} (world {})\n", m->mesh.data, m->mesh.fsdp, m->mesh.tensor,
                     m->mesh.world);
  out += fmt::format("data state: seed {}, epoch {}, step {}, consumed samples {}\n", m->data.seed, m->data.epoch,
                     m->data.step, m->data.consumed_samples);
  out += fmt::format("rng state: {} bytes\n", m->rng_state.size());
  out += fmt::format("files: {} ({})\n", m->files.size(), Bytes(bytes));
  out += fmt::format("tensors: {}\n", m->tensors.size());
  for (const ckpt::TensorRecord& t : m->tensors) {
    out += fmt::format("  {:<32} {} {}\n", t.name, t.dtype, ckpt::ShapeString(t.global_shape));
    for (StateKind k : ckpt::kAllKinds) {
      if (t.Pieces(k).empty()) continue;
      out += fmt::format("    {}: {} piece(s)\n", ckpt::KindName(k), t.Pieces(k).size());
      if (k == StateKind::kParams)  // the moments follow the same split
        for (const ckpt::PieceRecord& p : t.Pieces(k)) out += PieceLine(p);
    }
  }
  std::fputs(out.c_str(), stdout);
  return 0;
}

// config.json: the model-shape keys of the saved config, numbers as numbers.
Result<std::string> ModelConfigJson(const ckpt::Manifest& m) {
  nlohmann::json j = nlohmann::json::object();
  try {
    const YAML::Node root = YAML::Load(m.config_yaml);
    for (const char* key : kModelKeys) {
      const YAML::Node v = root.IsMap() ? root[key] : YAML::Node();
      if (!v.IsDefined() || !v.IsScalar()) continue;
      int64_t n = 0;
      if (YAML::convert<int64_t>::decode(v, n)) j[key] = n;
      else j[key] = v.as<std::string>();
    }
  } catch (const YAML::Exception& e) {
    return Status::Corruption(fmt::format("manifest config_yaml does not parse: {}", e.what()));
  }
  j["dtype"] = "float32";
  j["step"] = m.step;
  return j.dump(2) + "\n";
}

// The first ancestor of `path` (itself included) that does not exist, or "" if it does.
std::filesystem::path FirstMissing(const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::path missing;
  for (std::filesystem::path p = path; !p.empty() && !std::filesystem::exists(p, ec); p = p.parent_path()) {
    missing = p;
    if (p == p.parent_path()) break;
  }
  return missing;
}

// Everything is checked before anything is written; a failure after that removes what
// this command created (the temp file, a new output directory, the output file), so a
// failed export leaves the disk as it was.
int Export(const std::string& dir, const std::string& out) {
  auto m = ckpt::ReadManifest(dir);
  if (!m.ok()) return Fail("export", m.status());
  if (!FileExists(dir + "/" + ckpt::kCommittedFile))
    return Fail("export", Status::FailedPrecondition(fmt::format("{}: not committed (a partial save); export a "
                                                                 "committed checkpoint", dir)));
  std::vector<ckpt::SafetensorsWriter::Entry> entries;
  int64_t total_bytes = 0;
  for (const ckpt::TensorRecord& t : m->tensors) {
    auto numel = ckpt::GlobalTensorElements(*m, dir, StateKind::kParams, t.name);
    if (!numel.ok()) return Fail("export", numel.status());
    auto sum = CheckedAdd(total_bytes, *numel * ckpt::kF32Bytes, fmt::format("{}: total bytes of the export", dir));
    if (!sum.ok()) return Fail("export", CorruptionOf(sum.status()));
    total_bytes = *sum;
    entries.push_back({t.name, t.global_shape});
  }
  auto config = ModelConfigJson(*m);
  if (!config.ok()) return Fail("export", config.status());
  const std::filesystem::path out_path(out);
  const std::string config_path = (out_path.parent_path() / "config.json").string();
  const std::filesystem::path created = out_path.has_parent_path() ? FirstMissing(out_path.parent_path()) : "";
  bool renamed = false;
  int64_t file_bytes = 0;
  auto fail = [&](const Status& st) {
    std::error_code ec;
    if (renamed) std::filesystem::remove(out_path, ec);
    if (!created.empty()) std::filesystem::remove_all(created, ec);
    return Fail("export", st);
  };
  if (out_path.has_parent_path()) {
    Status st = MakeDirs(out_path.parent_path().string());
    if (!st.ok()) return fail(st);
  }
  {
    // Destroying an unfinished writer removes its temp file.
    auto w = ckpt::SafetensorsWriter::Create(
        out, entries, {{"format", "pt"}, {"source", ckpt::kFormatName}, {"step", std::to_string(m->step)}});
    if (!w.ok()) return fail(w.status());
    for (const ckpt::TensorRecord& t : m->tensors) {  // one tensor in memory at a time
      auto values = ckpt::ReadGlobalTensor(*m, dir, StateKind::kParams, t.name);
      if (!values.ok()) return fail(values.status());
      auto sum = (*w)->Append(values->data(), static_cast<int64_t>(values->size()));
      if (!sum.ok()) return fail(sum.status());
    }
    auto size = (*w)->Finish();
    if (!size.ok()) return fail(size.status());
    renamed = true;
    file_bytes = *size;
  }
  Status st = WriteFileAtomic(config_path, *config);
  if (!st.ok()) return fail(st);
  std::printf("wrote %s (%zu tensors, %s) and %s\n", out.c_str(), m->tensors.size(), Bytes(file_bytes).c_str(),
              config_path.c_str());
  return 0;
}

// "5GB", "500MB", "64KiB", "1000": bytes (HF's max_shard_size spellings; decimal and
// binary units); InvalidArgument naming the value otherwise.
Result<int64_t> ParseShardSize(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  const std::string unit = text.substr(digits);
  static const std::pair<const char*, int64_t> kUnits[] = {
      {"", 1},          {"B", 1},          {"KB", 1000},        {"MB", 1000000},
      {"GB", 1000000000}, {"KiB", 1 << 10}, {"MiB", 1 << 20},    {"GiB", int64_t{1} << 30}};
  const auto bad = Status::InvalidArgument(
      fmt::format("--max-shard-size '{}': expected a positive size such as 5GB, 500MB or 1048576", text));
  if (digits == 0 || digits > 12) return bad;
  const int64_t n = std::stoll(text.substr(0, digits));
  for (const auto& [u, scale] : kUnits)
    if (unit == u) {
      if (n < 1 || n > (int64_t{1} << 50) / scale) return bad;
      return n * scale;
    }
  return bad;
}

int ImportHfCommand(const std::string& hf_dir, const std::string& out) {
  auto r = convert::ImportHf(hf_dir, out);
  if (!r.ok()) return Fail("import", r.status());
  std::printf("wrote %s: %lld tensors (%s), a step-0 checkpoint of the parameters, and %s\n"
              "train it: elastrain train %s load_parameters_path=%s [key=value ...]\n",
              out.c_str(), static_cast<long long>(r->tensors), Bytes(r->bytes).c_str(), r->model_yaml_path.c_str(),
              r->model_yaml_path.c_str(), out.c_str());
  return 0;
}

int ExportHfCommand(const std::string& dir, const std::string& out, const std::string& shard_size) {
  auto limit = ParseShardSize(shard_size);
  if (!limit.ok()) {
    std::fprintf(stderr, "elastrain checkpoint export: error: %s\n", limit.status().message().c_str());
    return 2;
  }
  auto r = convert::ExportHf(dir, out, *limit);
  if (!r.ok()) return Fail("export", r.status());
  std::printf("wrote %s in Hugging Face layout: config.json and %lld tensors in %lld safetensors file(s) (%s)\n",
              out.c_str(), static_cast<long long>(r->tensors), static_cast<long long>(r->files),
              Bytes(r->bytes).c_str());
  return 0;
}

}  // namespace

int RunCheckpointCommand(const std::vector<std::string>& args) {
  CLI::App app{"elastrain checkpoint: list, check, describe or consolidate checkpoints"};
  app.require_subcommand(1, 1);
  std::string dir, out;
  bool json = false;
  CLI::App* list = app.add_subcommand("list", "steps, committed or not, size, which one LATEST names");
  list->add_option("run_dir", dir, "the run directory")->required();
  CLI::App* verify = app.add_subcommand("verify", "check every file, shape and checksum; exit 1 on any problem");
  verify->add_option("ckpt_dir", dir, "a checkpoint directory (<run>/checkpoints/step_N)")->required();
  CLI::App* inspect = app.add_subcommand("inspect", "step, mesh, data state, tensors and their pieces");
  inspect->add_option("ckpt_dir", dir, "a checkpoint directory")->required();
  inspect->add_flag("--json", json, "print the manifest as JSON");
  std::string format = "elastrain", shard_size = "5GB";
  CLI::App* exp = app.add_subcommand("export", "the full parameters: one safetensors file and config.json (model "
                                               "shapes) beside it, or (--format hf) a Hugging Face model directory");
  exp->add_option("ckpt_dir", dir, "a committed checkpoint directory")->required();
  exp->add_option("out", out, "the .safetensors file to write (--format hf: the directory)")->required();
  exp->add_option("--format", format, "elastrain (its own tensor names) | hf (transformers' names and config.json)")
      ->check(CLI::IsMember({"elastrain", "hf"}))
      ->capture_default_str();
  exp->add_option("--max-shard-size", shard_size, "--format hf: the largest safetensors file (5GB, 500MB, ...)")
      ->capture_default_str();
  std::string import_format = "hf";
  CLI::App* imp = app.add_subcommand("import", "a Hugging Face model directory (GPT-2, Llama, Mistral, Qwen2, Qwen3) "
                                               "to a checkpoint for load_parameters_path, and its model.yml");
  imp->add_option("hf_dir", dir, "config.json and model.safetensors (or its shards and index)")->required();
  imp->add_option("out", out, "the checkpoint directory to write (new or empty)")->required();
  imp->add_option("--format", import_format, "hf (the only one)")->check(CLI::IsMember({"hf"}))->capture_default_str();
  if (int rc = ParseArgs(app, "checkpoint", args); rc >= 0) return rc;
  if (list->parsed()) return List(dir);
  if (verify->parsed()) return Verify(dir);
  if (inspect->parsed()) return Inspect(dir, json);
  if (imp->parsed()) return ImportHfCommand(dir, out);
  if (format == "hf") return ExportHfCommand(dir, out, shard_size);
  return Export(dir, out);
}

}  // namespace elastrain
