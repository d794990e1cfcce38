// What every job command (status, stop, chaos, submit) shares: the flags that reach the
// controller's API (cli/api_client.h), the refusal of a token on the command line, and
// how a failed API call ends the command.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cli/api_client.h"
#include "common/status.h"

namespace elastrain {

// --head, --run-dir, --token-file, --ca-cert.
struct ApiFlags {
  std::string head, run_dir, token_file, ca_cert;
  void Add(CLI::App& app);
  Result<ApiTarget> Target() const;
};

// `--token T` is gone: argv is readable by every user of the machine (ps, /proc).
Status RefuseTokenArgument(const std::vector<std::string>& args);

// How a job command fails after asking the API: an answer it could not read (a
// Corruption of cli/api_client.h: not JSON, wrong types, missing fields) exits
// kExitBadAnswer; anything else as FailCommand.
int FailApiCall(const std::string& command, const Status& st);

}  // namespace elastrain
