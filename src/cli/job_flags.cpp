#include "cli/job_flags.h"

#include <cstdlib>

#include "cli/cli_common.h"
#include "jobctl/run_token.h"
#include "wire/exit_codes.h"

namespace elastrain {

void ApiFlags::Add(CLI::App& app) {
  app.add_option("--head", head,
                 "the head's URL, or several heads' URL1,URL2,... tried in turn (default: the one recorded in "
                 "~/.elastrain/head_url)");
  app.add_option("--run-dir", run_dir, "the run directory of an embedded `elastrain train` (its head_url and token)");
  app.add_option("--token-file", token_file,
                 "a file holding the API token, for --head (default: $ELASTRAIN_TOKEN, or ~/.elastrain/head_token "
                 "for the head recorded beside it)");
  app.add_option("--ca-cert", ca_cert, "PEM CA certificate that signed an https head's certificate "
                                       "(default: $ELASTRAIN_CA_CERT, else the system's CAs)");
}

Result<ApiTarget> ApiFlags::Target() const {
  ApiTargetArgs a;
  a.head = head;
  a.run_dir = run_dir;
  a.token_file = token_file;
  if (const char* env = std::getenv("ELASTRAIN_TOKEN"); env) a.env_token = env;
  a.default_token_file = DefaultHeadTokenPath();
  return ResolveApiTarget(a);
}

Status RefuseTokenArgument(const std::vector<std::string>& args) {
  for (const std::string& a : args)
    if (a == "--token" || a.rfind("--token=", 0) == 0)
      return Status::InvalidArgument("--token is not accepted (a command line is visible to every user in ps); put "
                                     "the token in a file of mode 0600 and pass --token-file PATH, or set "
                                     "ELASTRAIN_TOKEN; with --run-dir the run's own token is used");
  return Status::OK();
}

int FailApiCall(const std::string& command, const Status& st) {
  const int rc = FailCommand(command, st);
  return st.code() == StatusCode::kCorruption ? kExitBadAnswer : rc;
}

}  // namespace elastrain
