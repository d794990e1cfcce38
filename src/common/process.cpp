#include "common/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
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

bool ProcessRuns(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return false;
  size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z' && stat[close + 2] != 'X';
}

Result<pid_t> SpawnSelf(const SpawnSpec& s) {
  const std::string exe = SelfExecutable();
  // Everything the child needs is prepared before fork: only async-signal-safe calls after.
  std::vector<std::string> argv_s = {exe};
  argv_s.insert(argv_s.end(), s.args.begin(), s.args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (!s.env.count(kv.substr(0, kv.find('=')))) env_s.push_back(kv);
  }
  for (auto& [k, v] : s.env) env_s.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  auto opened = OpenFile(s.log_path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0644);
  if (!opened.ok()) return opened.status();
  const int log_fd = opened->release();
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log_fd);
    return Status::IOError(std::string("fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) _exit(127);  // the parent died before prctl took effect
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    if (s.channel_fd == 3) ::fcntl(3, F_SETFD, 0);      // already fd 3: clear close-on-exec
    else if (s.channel_fd >= 0) ::dup2(s.channel_fd, 3);  // dup2 clears close-on-exec on fd 3
    ResetSignalMaskInChild();  // the parent blocks SIGTERM and SIGINT (common/signals.h)
    ::execve(exe.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  ::close(log_fd);
  return pid;
}

}  // namespace elastrain
