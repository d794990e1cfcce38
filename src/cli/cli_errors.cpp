#include "cli/cli_errors.h"

#include <cstdio>

namespace elastrain {

int ExitCodeFor(const Status& st) {
  switch (st.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kOutOfMemory:
      return 2;  // the configuration cannot run; retrying will not help
    default:
      return 1;
  }
}

int FailCommand(const std::string& command, const Status& st) {
  std::fprintf(stderr, "elastrain%s%s: error: %s\n", command.empty() ? "" : " ", command.c_str(),
               st.message().c_str());
  return ExitCodeFor(st);
}

}  // namespace elastrain
