#include "cli/cli_common.h"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "wire/exit_codes.h"

#include <fmt/format.h>

#include "common/log.h"

namespace elastrain {

int ExitCodeFor(const Status& st) {
  switch (st.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kOutOfMemory:
    case StatusCode::kPermissionDenied:
      return 2;  // the configuration cannot run; retrying will not help
    default:
      return 1;
  }
}

int ExitCodeForJobState(JobState state) {
  switch (state) {
    case JobState::kSucceeded: return kExitSuccess;
    case JobState::kStopped: return kExitStopped;
    default: return kExitFailure;
  }
}

int FailCommand(const std::string& command, const Status& st) {
  std::fprintf(stderr, "elastrain%s%s: error: %s\n", command.empty() ? "" : " ", command.c_str(),
               st.message().c_str());
  return ExitCodeFor(st);
}

std::string FormatBytes(int64_t b) {
  const double d = static_cast<double>(b);
  if (d >= (1LL << 30)) return fmt::format("{:.2f} GiB", d / (1LL << 30));
  if (d >= (1LL << 20)) return fmt::format("{:.1f} MiB", d / (1LL << 20));
  if (d >= 1024) return fmt::format("{:.1f} KiB", d / 1024);
  return fmt::format("{} B", b);
}

Result<TrainConfig> LoadConfigFromArgs(const std::vector<std::string>& args) {
  std::string config_path;
  std::vector<std::string> overrides;
  for (size_t i = 0; i < args.size(); ++i) {
    if (i == 0 && args[i].find('=') == std::string::npos) config_path = args[i];
    else overrides.push_back(args[i]);
  }
  std::vector<std::string> ignored;
  auto cfg = LoadConfig(config_path, overrides, &ignored);
  if (cfg.ok() && !ignored.empty()) LOG_WARN("{}", IgnoredKeysSummary(ignored));
  return cfg;
}

void AddConfigArgs(CLI::App& app, std::vector<std::string>* config_args) {
  app.add_option("config", *config_args, "[CONFIG.yml] [key=value ...]: a config file, then overrides");
  app.footer("Every key, its default and meaning: configs/base.yml");
}

int ParseArgs(CLI::App& app, const std::string& name, std::vector<std::string> args) {
  app.name("elastrain " + name);  // the "Usage:" line of --help
  std::reverse(args.begin(), args.end());  // CLI11 takes the vector in reverse order
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    return kExitSuccess;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "elastrain %s: error: %s (see elastrain %s --help)\n", name.c_str(), e.what(), name.c_str());
    return kExitBadConfig;
  }
  return -1;
}

bool SplitProgramArgs(std::vector<std::string>* args, std::vector<std::string>* program) {
  auto dash = std::find(args->begin(), args->end(), "--");
  if (dash == args->end()) return false;
  program->assign(dash + 1, args->end());
  args->erase(dash, args->end());
  return true;
}

Status SetLaunchProgram(const std::vector<std::string>& program, TrainConfig* cfg) {
  if (program.empty())
    return Status::InvalidArgument("expected the program after `--`: elastrain launch [CONFIG.yml] [key=value ...] -- "
                                   "PROGRAM ARGS (e.g. -- python3 train.py)");
  cfg->launch_program = nlohmann::json(program).dump();
  return LaunchProgram(*cfg).status();
}

}  // namespace elastrain
