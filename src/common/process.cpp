#include "common/process.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "common/safe_path.h"

#include "common/signals.h"

namespace elastrain {

std::string DescribeSignal(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return fmt::format("{} ({})", sig, abbrev ? fmt::format("SIG{}", abbrev) : "unknown");
}

std::string ProcessExit::Describe() const {
  if (signaled) return "was killed by signal " + DescribeSignal(value);
  return fmt::format("exited with code {}", value);
}

ProcessExit ProcessExitFromStatus(int status) {
  ProcessExit e;
  e.signaled = WIFSIGNALED(status);
  e.value = e.signaled ? WTERMSIG(status) : WEXITSTATUS(status);
  return e;
}

std::string SelfExecutable() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "elastrain";
  buf[n] = '\0';
  return buf;
}

namespace {
// The state letter and parent of `pid` from /proc/<pid>/stat (false when it is gone).
// The command name before them may hold spaces and parentheses: read after the last ')'.
bool ReadStat(pid_t pid, char* state, long* ppid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return false;
  const size_t close = stat.rfind(')');
  return close != std::string::npos && std::sscanf(stat.c_str() + close + 1, " %c %ld", state, ppid) == 2;
}
}  // namespace

bool ProcessRuns(pid_t pid) {
  char state = 0;
  long ppid = 0;
  return ReadStat(pid, &state, &ppid) && state != 'Z' && state != 'X';
}

std::vector<pid_t> ChildProcesses() {
  std::vector<pid_t> out;
  const pid_t me = ::getpid();
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    char state = 0;
    long ppid = 0;
    if (pid > 0 && *end == '\0' && ReadStat(static_cast<pid_t>(pid), &state, &ppid) && ppid == me)
      out.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(d);
  return out;
}

Result<std::string> FindProgram(const std::string& name) {
  if (name.empty()) return Status::InvalidArgument("no program given");
  auto check = [](const std::string& path) -> Status {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return Status::NotFound(fmt::format("program {}: no such file", path));
    if (!S_ISREG(st.st_mode)) return Status::InvalidArgument(fmt::format("program {}: not a regular file", path));
    if (::access(path.c_str(), X_OK) != 0)
      return Status::PermissionDenied(fmt::format("program {}: not executable", path));
    return Status::OK();
  };
  if (name.find('/') != std::string::npos) {
    ELASTRAIN_RETURN_IF_ERROR(check(name));
    return name;
  }
  const char* path_env = std::getenv("PATH");
  const std::string path = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
  size_t begin = 0;
  for (;;) {
    const size_t colon = path.find(':', begin);
    const std::string dir = path.substr(begin, colon == std::string::npos ? std::string::npos : colon - begin);
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;  // "" is the cwd
    if (check(candidate).ok()) return candidate;
    if (colon == std::string::npos) break;
    begin = colon + 1;
  }
  return Status::NotFound(fmt::format("program {}: not found in PATH ({})", name, path));
}

Result<pid_t> SpawnProcess(const SpawnSpec& s) {
  std::string exe = s.program;
  if (exe.empty()) {
    exe = SelfExecutable();
  } else {
    ELASTRAIN_ASSIGN_OR_RETURN(exe, FindProgram(exe));
  }
  // Everything the child needs is prepared before fork: only async-signal-safe calls after.
  std::vector<std::string> argv_s = {s.program.empty() ? exe : s.program};
  argv_s.insert(argv_s.end(), s.args.begin(), s.args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    const std::string key = kv.substr(0, kv.find('='));
    bool drop = s.env.count(key) > 0;
    for (const std::string& p : s.env_drop_prefixes) drop |= key.rfind(p, 0) == 0;
    if (!drop) env_s.push_back(kv);
  }
  for (auto& [k, v] : s.env) env_s.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  int log_fd = -1;
  if (!s.log_path.empty()) {
    auto opened = OpenFile(s.log_path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0644);
    if (!opened.ok()) return opened.status();
    log_fd = opened->release();
  }
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    if (log_fd >= 0) ::close(log_fd);
    return Status::IOError(std::string("fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    if (s.own_process_group) ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) _exit(127);  // the parent died before prctl took effect
    if (log_fd >= 0) {
      ::dup2(log_fd, STDOUT_FILENO);
      ::dup2(log_fd, STDERR_FILENO);
    }
    if (s.stderr_fd >= 0) ::dup2(s.stderr_fd, STDERR_FILENO);
    if (s.channel_fd == 3) ::fcntl(3, F_SETFD, 0);      // already fd 3: clear close-on-exec
    else if (s.channel_fd >= 0) ::dup2(s.channel_fd, 3);  // dup2 clears close-on-exec on fd 3
    ResetSignalMaskInChild();  // the parent blocks SIGTERM and SIGINT (common/signals.h)
    ::signal(SIGPIPE, SIG_DFL);  // an ignored signal stays ignored across exec
    ::execve(exe.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  // The parent sets the group too: a kill(-pid) right after the fork (a check cancelled at
  // once, a worker killed at birth) must find the group. EACCES once the child has exec'd:
  // it had set it itself by then.
  if (s.own_process_group) ::setpgid(pid, pid);
  if (log_fd >= 0) ::close(log_fd);
  return pid;
}

Result<pid_t> SpawnSelf(const SpawnSpec& spec) {
  SpawnSpec self = spec;
  self.program.clear();
  return SpawnProcess(self);
}

}  // namespace elastrain
