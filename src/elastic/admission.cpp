#include "elastic/admission.h"

#include <sys/stat.h>

#include <filesystem>

#include <fmt/format.h>

#include "common/dataset_path.h"
#include "common/process.h"

namespace elastrain {
namespace {

namespace fs = std::filesystem;

bool Within(const std::string& path, const std::string& dir) {
  if (dir == "/") return true;
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/');
}

std::string Joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

Result<std::string> ResolveForAdmission(const std::string& path) {
  if (path.empty()) return Status::InvalidArgument("an empty path");
  std::error_code ec;
  const fs::path p = fs::absolute(path, ec).lexically_normal();  // relative: to this process's directory
  if (ec) return Status::InvalidArgument(fmt::format("'{}': {}", path, ec.message()));
  // The longest existing prefix, resolved; the rest appended (normalised: no `..` left
  // in an absolute path).
  fs::path existing = p, rest;
  while (!existing.empty() && existing != existing.root_path() && !fs::exists(existing, ec)) {
    rest = existing.filename() / rest;
    existing = existing.parent_path();
  }
  fs::path resolved = fs::canonical(existing, ec);
  if (ec) return Status::InvalidArgument(fmt::format("'{}': cannot resolve {}: {}", path, existing.string(), ec.message()));
  if (!rest.empty()) resolved /= rest;
  std::string out = resolved.lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

Result<std::vector<std::string>> ResolveAllowList(const std::vector<std::string>& given, const char* flag,
                                                  bool directories_only) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const std::string& g : given) {
    const std::string abs = fs::absolute(g, ec).lexically_normal().string();
    struct stat st {};
    if (ec || ::stat(abs.c_str(), &st) != 0)
      return Status::InvalidArgument(fmt::format("{} {}: no such file or directory", flag, g));
    if (directories_only && !S_ISDIR(st.st_mode))
      return Status::InvalidArgument(fmt::format("{} {}: expected a directory", flag, g));
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
      return Status::InvalidArgument(fmt::format("{} {}: expected a program or a directory", flag, g));
    ELASTRAIN_ASSIGN_OR_RETURN(std::string r, ResolveForAdmission(abs));
    out.push_back(std::move(r));
  }
  return out;
}

Status AdmitPath(const Admission& a, const std::string& key, const std::string& path) {
  auto resolved = ResolveForAdmission(path);
  if (!resolved.ok())
    return Status::PermissionDenied(fmt::format("agent {} refuses {}={}: {}", a.agent, key, path,
                                                resolved.status().message()));
  for (const std::string& d : a.paths)
    if (Within(resolved.value(), d)) return Status::OK();
  return Status::PermissionDenied(fmt::format(
      "agent {} refuses {}={}{}: outside the directories it allows ({}; elastrain agent --allow-path DIR)", a.agent,
      key, path, resolved.value() == path ? "" : " (" + resolved.value() + ")", Joined(a.paths)));
}

Status AdmitJob(const Admission& a, const TrainConfig& cfg) {
  ELASTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> program, LaunchProgram(cfg));
  if (!program.empty()) {
    if (a.programs.empty())
      return Status::PermissionDenied(fmt::format(
          "agent {} runs only elastrain's own trainer: launch_program {} is not allowed (start the agent with "
          "--allow-program PATH, a program or a directory of programs)",
          a.agent, program.front()));
    ELASTRAIN_ASSIGN_OR_RETURN(std::string found, FindProgram(program.front()));
    std::error_code ec;
    const std::string abs = fs::absolute(found, ec).lexically_normal().string();
    auto resolved = ResolveForAdmission(abs);
    bool ok = false;
    if (resolved.ok())
      for (const std::string& p : a.programs)
        if (Within(resolved.value(), p)) ok = true;
    if (!ok)
      return Status::PermissionDenied(fmt::format(
          "agent {} does not allow launch_program {} ({}): it allows {} (elastrain agent --allow-program)", a.agent,
          program.front(), resolved.ok() ? resolved.value() : found, Joined(a.programs)));
  }
  // dataset_path may be a blend of paths, each maybe a glob: each path's directories
  // before its first glob character are admitted (what a directory dataset_path admits),
  // and a glob may not climb out of them with '..'.
  ELASTRAIN_ASSIGN_OR_RETURN(std::vector<WeightedPath> sources, ParseDatasetPath(cfg.dataset_path));
  for (const WeightedPath& w : sources) {
    const size_t glob = w.path.find_first_of("*?[");
    if (glob != std::string::npos && ("/" + w.path + "/").find("/../") != std::string::npos)
      return Status::PermissionDenied(fmt::format("agent {} refuses dataset_path={}: a glob with a '..' component "
                                                  "(its matches could lead anywhere)",
                                                  a.agent, w.path));
    const std::string fixed =
        glob == std::string::npos ? w.path : w.path.substr(0, w.path.rfind('/', glob) == std::string::npos
                                                                   ? 0
                                                                   : w.path.rfind('/', glob) + 1);
    ELASTRAIN_RETURN_IF_ERROR(AdmitPath(a, "dataset_path", fixed.empty() ? "." : fixed));
  }
  const std::pair<const char*, const std::string*> keys[] = {
      {"tokenizer_path", &cfg.tokenizer_path},
      {"load_parameters_path", &cfg.load_parameters_path},
      {"load_full_state_path", &cfg.load_full_state_path},
      {"final_params_path", &cfg.final_params_path},
  };
  for (const auto& [key, value] : keys)
    if (!value->empty()) ELASTRAIN_RETURN_IF_ERROR(AdmitPath(a, key, *value));
  return Status::OK();
}

}  // namespace elastrain
