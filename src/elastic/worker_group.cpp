#include "elastic/worker_group.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "common/log.h"

namespace elastrain {

std::string WorkerExit::Describe() const {
  if (signaled)
    return fmt::format("worker rank {} (pid {}) was killed by signal {} ({})", rank, pid, value, sigabbrev_np(value)
                           ? fmt::format("SIG{}", sigabbrev_np(value))
                           : "unknown");
  return fmt::format("worker rank {} (pid {}) exited with code {}", rank, pid, value);
}

std::string SelfExecutable() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "elastrain";
  buf[n] = '\0';
  return buf;
}

WorkerGroup::~WorkerGroup() {
  if (running_.empty()) return;
  Signal(SIGKILL);
  for (auto& r : running_) ::waitpid(r.pid, nullptr, 0);
}

Status WorkerGroup::Start(const std::vector<WorkerSpec>& specs) {
  const std::string exe = SelfExecutable();
  for (const WorkerSpec& s : specs) {
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
    int log_fd = ::open(s.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
      Signal(SIGKILL);
      return Status::IOError(s.log_path + ": cannot open worker log (" + std::strerror(errno) + ")");
    }
    pid_t pid = ::fork();
    if (pid < 0) {
      ::close(log_fd);
      Signal(SIGKILL);
      return Status::IOError(std::string("fork failed: ") + std::strerror(errno));
    }
    if (pid == 0) {
      ::dup2(log_fd, STDOUT_FILENO);
      ::dup2(log_fd, STDERR_FILENO);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a worker never outlives its launcher
      ::execve(exe.c_str(), argv.data(), envp.data());
      _exit(127);
    }
    ::close(log_fd);
    running_.push_back({s.rank, pid});
    pids_[s.rank] = pid;
  }
  return Status::OK();
}

std::map<int, pid_t> WorkerGroup::pids() const { return pids_; }

void WorkerGroup::Signal(int sig) {
  for (auto& r : running_) ::kill(r.pid, sig);
}

std::vector<WorkerExit> WorkerGroup::Wait(std::chrono::milliseconds grace, std::chrono::milliseconds poll) {
  std::vector<WorkerExit> failures, successes;
  auto reap = [&](bool block) {
    for (size_t i = 0; i < running_.size();) {
      int status = 0;
      pid_t r = ::waitpid(running_[i].pid, &status, block ? 0 : WNOHANG);
      if (r == running_[i].pid) {
        WorkerExit e;
        e.rank = running_[i].rank;
        e.pid = running_[i].pid;
        e.signaled = WIFSIGNALED(status);
        e.value = e.signaled ? WTERMSIG(status) : WEXITSTATUS(status);
        (e.ok() ? successes : failures).push_back(e);
        running_.erase(running_.begin() + i);
      } else {
        ++i;
      }
    }
  };
  while (!running_.empty() && failures.empty()) {
    reap(false);
    if (!running_.empty() && failures.empty()) std::this_thread::sleep_for(poll);
  }
  if (!running_.empty()) {
    LOG_WARN("{}; waiting up to {} ms for the other workers to stop", failures.front().Describe(), grace.count());
    auto deadline = std::chrono::steady_clock::now() + grace;
    while (!running_.empty() && std::chrono::steady_clock::now() < deadline) {
      reap(false);
      if (!running_.empty()) std::this_thread::sleep_for(poll);
    }
    Signal(SIGKILL);
    reap(true);
  }
  failures.insert(failures.end(), successes.begin(), successes.end());
  return failures;
}

}  // namespace elastrain
