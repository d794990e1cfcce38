// How the CLI reports a Status: one line on stderr, and the exit code of main.cpp:
// 2 for a configuration that cannot run (bad key or value, missing file, too big for
// memory), 1 for runtime failures.
#pragma once

#include <string>

#include "common/status.h"

namespace elastrain {

int ExitCodeFor(const Status& st);
// Prints "elastrain <command>: error: <message>" and returns ExitCodeFor(st).
int FailCommand(const std::string& command, const Status& st);

}  // namespace elastrain
