// Starts worker processes of one generation and watches them: the local agent's core.
// A worker is this same binary run as `elastrain worker ...`; its stdout and stderr go
// to a per-rank log file. Not thread-safe: one owner drives Start/Wait/Kill.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace elastrain {

struct WorkerSpec {
  int rank = 0;
  std::vector<std::string> args;            // after the program name
  std::map<std::string, std::string> env;   // added to this process's environment
  std::string log_path;                     // stdout + stderr, appended
};

struct WorkerExit {
  int rank = -1;
  pid_t pid = 0;
  bool signaled = false;  // killed by a signal (then `value` is the signal number)
  int value = 0;          // the exit code, or the signal number
  bool ok() const { return !signaled && value == 0; }
  // "worker rank 2 (pid 1234) was killed by signal 9 (SIGKILL)" / "... exited with code 1"
  std::string Describe() const;
};

class WorkerGroup {
 public:
  WorkerGroup() = default;
  ~WorkerGroup();  // kills what is still running
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  // Forks and execs every worker; on failure kills those already started.
  Status Start(const std::vector<WorkerSpec>& specs);
  // The pids by rank, once started.
  std::map<int, pid_t> pids() const;
  // Polls every `poll` until every worker has exited or one has failed. On the first
  // failure, the rest get `grace` to exit on their own (they notice the lost peer through
  // their collectives) and are then SIGKILLed. Returns every exit, failures first.
  std::vector<WorkerExit> Wait(std::chrono::milliseconds grace = std::chrono::milliseconds(5000),
                               std::chrono::milliseconds poll = std::chrono::milliseconds(20));
  // Sends `sig` to every worker still running.
  void Signal(int sig);

 private:
  struct Running {
    int rank;
    pid_t pid;
  };
  std::vector<Running> running_;
  std::map<int, pid_t> pids_;
};

// The path of this executable (/proc/self/exe), for re-running it as a worker.
std::string SelfExecutable();

}  // namespace elastrain
