// What an agent agrees to run (issue 33): the head's token holder may submit any job, but
// an agent's owner decides which programs run as the agent's user and where a job may
// read and write. `elastrain agent --allow-program PATH` (a program, or a directory of
// programs) admits launched programs; without one, only elastrain's own trainer runs.
// `--allow-path DIR` confines the path-valued keys a job sets (its run directory,
// dataset_path, tokenizer_path, load_parameters_path, load_full_state_path,
// final_params_path) to those directories; without one, the agent's working directory.
//
// Paths are compared resolved: symbolic links in the part that exists are followed
// (realpath), the rest is normalised lexically, so `..` and links cannot lead out. A
// program named without a slash is looked up in the agent's PATH, as the worker will.
// Allowing an interpreter (/usr/bin/python3) allows any script it is given: allow a
// directory of executable scripts instead where that matters (docs/security.md).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "config/config.h"

namespace elastrain {

struct Admission {
  std::string agent;                  // the agent's id, for messages
  std::vector<std::string> programs;  // resolved: programs, or directories of them
  std::vector<std::string> paths;     // resolved directories
};

// `path` (relative: to this process's directory) as an absolute path with the links of its
// existing part resolved (it need not exist). InvalidArgument for an empty path.
Result<std::string> ResolveForAdmission(const std::string& path);

// The flags' values, resolved (each must exist; a --allow-path must be a directory).
Result<std::vector<std::string>> ResolveAllowList(const std::vector<std::string>& given, const char* flag,
                                                  bool directories_only);

// OK when `path` (the value of `key`) lies in one of `a.paths`; else PermissionDenied
// naming the key, the path and the agent's directories.
Status AdmitPath(const Admission& a, const std::string& key, const std::string& path);

// The job's program (launch_program; none: the trainer, always admitted) and its
// path-valued data keys; the run directory is the agent's own check (AdmitPath).
Status AdmitJob(const Admission& a, const TrainConfig& cfg);

}  // namespace elastrain
