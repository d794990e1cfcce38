// Child processes of an agent: start this binary as a worker, read how it ended.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace elastrain {

struct SpawnSpec {
  std::string program;                     // a path, or a name looked up in PATH; empty: this executable
  std::vector<std::string> args;           // after the program name
  std::map<std::string, std::string> env;  // added to (or replacing in) this environment
  std::vector<std::string> env_drop_prefixes;  // variables of this environment left out ("ELASTRAIN_ETCD_")
  std::string log_path;                    // stdout + stderr, appended; empty: inherited
  int stderr_fd = -1;                      // becomes fd 2 of the child, after log_path (-1: as above)
  int channel_fd = -1;                     // becomes fd 3 of the child (-1: none)
  bool own_process_group = true;           // false: stays in the caller's process group
};

// Forks and execs `spec.program`. The child is the leader of its own process group (a
// terminal's Ctrl-C reaches the agent only, which decides; a worker's whole tree is
// signalled at once) and gets SIGKILL when the thread that spawned it ends
// (PR_SET_PDEATHSIG): a worker never outlives its agent, so losing an agent loses its
// host's workers, as losing the host would. It starts with every signal unblocked and
// SIGPIPE at its default action. A program that cannot be found or executed is an error
// here (NotFound / PermissionDenied naming it), not an exit code 127 later.
Result<pid_t> SpawnProcess(const SpawnSpec& spec);
// SpawnProcess of this executable (`spec.program` is ignored).
Result<pid_t> SpawnSelf(const SpawnSpec& spec);
// `name` as execvp would run it: itself when it holds a '/', else the first executable
// regular file of that name in PATH. NotFound / PermissionDenied name it otherwise.
Result<std::string> FindProgram(const std::string& name);

struct ProcessExit {
  bool signaled = false;  // killed by a signal: `value` is the signal number
  int value = 0;          // else the exit code
  bool ok() const { return !signaled && value == 0; }
  // "was killed by signal 9 (SIGKILL)" / "exited with code 1"
  std::string Describe() const;
};
ProcessExit ProcessExitFromStatus(int wait_status);

// "9 (SIGKILL)"
std::string DescribeSignal(int sig);
// True while `pid` runs (a zombie, dead but not yet reaped, counts as gone).
bool ProcessRuns(pid_t pid);
// The processes whose parent is this one (zombies included), from /proc.
std::vector<pid_t> ChildProcesses();
// The path of this executable (/proc/self/exe), for re-running it as a worker.
std::string SelfExecutable();

}  // namespace elastrain
