// The launched worker's executor: the I/O of launch/launch_machine.h, which decides.
#include "launch/launched_worker.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <optional>

#include "common/clock.h"
#include "common/events.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/output_tail.h"
#include "common/process.h"
#include "common/signals.h"
#include "common/wakeup.h"
#include "launch/launch_machine.h"
#include "launch/master_address.h"
#include "launch/rank_env.h"
#include "wire/exit_codes.h"
#include "wire/program_messages.h"
#include "wire/events.h"
#include "wire/protocol.h"

namespace elastrain {

namespace {

using namespace launch;  // NOLINT: the machine's inputs and actions

// The longest the loop sleeps. A program's exit wakes no descriptor here (waitpid sees it;
// its channel may stay open when its children hold fd 3), so this bounds how late a death
// is reaped and reported: 10 ms, as the loop before the machine slept (at 50 ms
// bench/before_after.sh measured launch recovery ~45 ms slower).
constexpr double kPollSliceSeconds = 0.01;
// How long the children get to die after the SIGKILL of the worker's departure.
constexpr double kReapAllSeconds = 1;
// A program's stderr pipe holds this much while the worker does not read it (it waits for
// rank 0's address): a program that writes more blocks until it does. Best effort (Linux
// caps it at /proc/sys/fs/pipe-max-size, 1 MiB by default).
constexpr int kStderrPipeBytes = 1 << 20;

// SIGTERM (a preemption notice), shared with the signal thread: the handler holds it, so
// a late notice after Run returned touches nothing of the executor.
struct Notice {
  std::atomic<bool> raised{false};
  Wakeup wake;
};

class LaunchedWorker {
 public:
  LaunchedWorker(Channel* agent, const JobMessage& job, const TrainConfig& cfg, std::vector<std::string> program);
  int Run();

 private:
  // A program's process, channel and stderr (the machine knows it by `id`). Its stderr
  // is a pipe to this worker, which copies it to its own (the worker's log) and keeps its
  // end for the error of a generation it fails.
  struct ProgramIo {
    int pid = -1;
    std::unique_ptr<Channel> ch;
    bool ch_open = true;
    int err_fd = -1;  // the pipe's read end; -1 once closed
    OutputTail err_tail;
  };

  void Feed(const LaunchInput& in);
  void Execute(const LaunchAction& a);
  std::optional<LaunchInput> Do(const SendToAgent& a);
  std::optional<LaunchInput> Do(const StartProgram& a);
  std::optional<LaunchInput> Do(const AssignSpare& a);
  std::optional<LaunchInput> Do(const TellProgram& a);
  std::optional<LaunchInput> Do(const SignalProgram& a);
  std::optional<LaunchInput> Do(const SignalGroup& a);
  std::optional<LaunchInput> Do(const ResolveMaster& a);
  std::optional<LaunchInput> Do(const PublishMaster& a);
  std::optional<LaunchInput> Do(const ProbeListening& a);
  std::optional<LaunchInput> Do(const OpenRunLogs& a);
  std::optional<LaunchInput> Do(const WriteMetrics& a);
  std::optional<LaunchInput> Do(const EmitEvent& a);
  std::optional<LaunchInput> Do(const SweepOrphans& a);
  std::optional<LaunchInput> Do(const Exit& a);

  void PollOnce();
  bool ReadAgent();                        // queues what the agent sent; false: it is gone
  void FeedAgent();                        // steps the queue while the machine takes it
  void ReadProgram(int id, bool exited);   // steps what program `id` said
  static void CopyStderr(ProgramIo& p);    // what it wrote on stderr, to this worker's stderr
  void CopyAllStderr();
  void Reap();
  bool AwaitingMasterGoesOn();
  void KillAll();

  Channel* agent_;
  JobMessage job_;
  std::vector<std::string> program_;
  std::string run_dir_;
  LaunchMachine machine_;
  std::shared_ptr<Notice> notice_ = std::make_shared<Notice>();
  bool notice_fed_ = false;
  std::map<int, ProgramIo> programs_;      // by the machine's id; until reaped
  std::deque<AgentMessage> inbox_;         // read from the agent, not yet stepped
  bool agent_gone_ = false;
  std::optional<MasterAddress> rdzv_;      // the current generation's
  int64_t rdzv_generation_ = -1;
  std::optional<int> exit_code_;
  MetricsWriter metrics_;
  EventLog events_;
};

LaunchMachineOptions MachineOptions(const JobMessage& job, const TrainConfig& cfg, const std::string& program) {
  LaunchMachineOptions o;
  o.worker_id = job.worker_id;
  o.program = program;
  o.run_dir = cfg.base_output_directory + "/" + cfg.run_name;
  o.run_id = cfg.run_name;
  o.threads = job.threads > 0 ? job.threads : 1;
  o.warm_spares = cfg.warm_spares;
  o.leads_process_group = ::getpgrp() == ::getpid();
  o.preemption_notice_seconds = cfg.preemption_notice_seconds;
  o.collective_timeout = cfg.collective_timeout;
  o.log_period = cfg.log_period;
  o.max_failures = cfg.max_failures;
  o.min_workers = cfg.min_workers;
  o.max_workers = cfg.max_workers;
  o.checkpoint_period = cfg.checkpoint_period;
  o.checkpoint_period_auto = cfg.checkpoint_period_auto;
  o.checkpoint_mtti_prior_seconds = cfg.checkpoint_mtti_prior_seconds;
  o.checkpoint_period_min = cfg.checkpoint_period_min;
  o.checkpoint_period_max = cfg.checkpoint_period_max;
  return o;
}

LaunchedWorker::LaunchedWorker(Channel* agent, const JobMessage& job, const TrainConfig& cfg,
                               std::vector<std::string> program)
    : agent_(agent), job_(job), program_(std::move(program)),
      run_dir_(cfg.base_output_directory + "/" + cfg.run_name),
      machine_(MachineOptions(job, cfg, program_.front())) {}

// Steps `in` and carries out its actions in order; an action's answer is stepped (and
// its own actions carried out) before the next action runs.
void LaunchedWorker::Feed(const LaunchInput& in) {
  for (const LaunchAction& a : machine_.Step(in, WallSeconds())) Execute(a);
}

void LaunchedWorker::Execute(const LaunchAction& a) {
  std::optional<LaunchInput> answer = std::visit([this](const auto& v) { return Do(v); }, a);
  if (answer) Feed(*answer);
}

std::optional<LaunchInput> LaunchedWorker::Do(const SendToAgent& a) {
  (void)agent_->Send(ToJson(a.message));
  return std::nullopt;
}

std::optional<LaunchInput> LaunchedWorker::Do(const StartProgram& a) {
  auto fail = [&](const Status& st) -> std::optional<LaunchInput> { return ProgramStartFailed{a.program, st}; };
  auto pair = MakeChannelPair();
  if (!pair.ok()) return fail(pair.status());
  auto [mine, theirs] = pair.value();
  int err[2];
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(mine);
    ::close(theirs);
    return fail(Status::IOError(fmt::format("a pipe for the program's stderr: {}", std::strerror(errno))));
  }
  ::fcntl(err[0], F_SETFL, ::fcntl(err[0], F_GETFL) | O_NONBLOCK);  // the child's end stays blocking
  ::fcntl(err[0], F_SETPIPE_SZ, kStderrPipeBytes);
  SpawnSpec spec;
  spec.program = program_[0];
  spec.args.assign(program_.begin() + 1, program_.end());
  spec.env = a.env;
  spec.env.insert_or_assign("ELASTRAIN_CHANNEL_FD", std::string("3"));
  spec.env.insert_or_assign("ELASTRAIN_WARM", std::string(a.spare ? "1" : "0"));
  spec.env_drop_prefixes = SecretEnvironmentPrefixes();
  spec.channel_fd = theirs;
  spec.stderr_fd = err[1];
  spec.own_process_group = false;  // the worker's group: one kill(-pgid) ends the whole tree
  auto pid = SpawnProcess(spec);
  ::close(theirs);
  ::close(err[1]);
  if (!pid.ok()) {
    ::close(mine);
    ::close(err[0]);
    return fail(pid.status());
  }
  ProgramIo& p = programs_[a.program];
  p.pid = pid.value();
  p.ch = std::make_unique<Channel>(mine);
  p.err_fd = err[0];
  LOG_INFO("worker {}: started {} {} (pid {})", job_.worker_id, a.spare ? "spare" : "program", program_[0], p.pid);
  return ProgramStarted{a.program, p.pid};
}

std::optional<LaunchInput> LaunchedWorker::Do(const AssignSpare& a) {
  auto it = programs_.find(a.program);
  if (it == programs_.end()) return SpareAssigned{a.program, Status::Unavailable("the spare is gone")};
  return SpareAssigned{a.program, it->second.ch->Send(AssignToProgram(a.env))};
}

std::optional<LaunchInput> LaunchedWorker::Do(const TellProgram& a) {
  if (auto it = programs_.find(a.program); it != programs_.end()) (void)it->second.ch->Send(ControlToProgram(a.control));
  return std::nullopt;
}

std::optional<LaunchInput> LaunchedWorker::Do(const SignalProgram& a) {
  LOG_INFO("worker {}: signal {} to program pid {} ({})", job_.worker_id, DescribeSignal(a.signal), a.pid, a.why);
  ::kill(a.pid, a.signal);
  return std::nullopt;
}

std::optional<LaunchInput> LaunchedWorker::Do(const SignalGroup& a) {
  LOG_INFO("worker {}: signal {} to its process group ({})", job_.worker_id, DescribeSignal(a.signal), a.why);
  ::kill(-::getpgrp(), a.signal);  // this worker's own handler only notes it again
  return std::nullopt;
}

// Blocks: rank 0 picks a port, the others wait for it, answering the agent's liveness
// ticks meanwhile and giving up (Cancelled) when the machine says the wait is moot.
std::optional<LaunchInput> LaunchedWorker::Do(const ResolveMaster& a) {
  MasterResolved r;
  r.generation = a.generation;
  rdzv_.reset();
  auto rdzv = MasterAddress::Open(a.rendezvous, a.generation);
  if (!rdzv.ok()) {
    r.status = rdzv.status();
    return r;
  }
  rdzv_ = std::move(rdzv.value());
  rdzv_generation_ = a.generation;
  auto master = a.rank == 0 ? rdzv_->Pick(a.address)
                            : rdzv_->Await(a.timeout_seconds, [this] { return AwaitingMasterGoesOn(); });
  if (!master.ok()) {
    r.status = master.status();
    return r;
  }
  r.address = master->first;
  r.port = master->second;
  return r;
}

bool LaunchedWorker::AwaitingMasterGoesOn() {
  CopyAllStderr();  // a spare's, while the rank waits
  Feed(Tick{});
  if (!ReadAgent()) return false;
  if (notice_->raised && !notice_fed_) {
    notice_fed_ = true;
    Feed(PreemptionNotice{});
  }
  return machine_.KeepAwaitingMaster(inbox_);
}

std::optional<LaunchInput> LaunchedWorker::Do(const PublishMaster& a) {
  if (!rdzv_ || rdzv_generation_ != a.generation)
    return MasterPublished{a.generation, Status::Internal("no rendezvous open for this generation")};
  return MasterPublished{a.generation, rdzv_->Publish()};
}

std::optional<LaunchInput> LaunchedWorker::Do(const ProbeListening& a) {
  return ListenProbed{a.generation, PortListening(a.port), ProcessRuns(a.pid)};
}

std::optional<LaunchInput> LaunchedWorker::Do(const OpenRunLogs&) {
  if (Status st = metrics_.Open(run_dir_ + "/metrics.jsonl", /*append=*/true); !st.ok())
    LOG_WARN("worker {}: {}", job_.worker_id, st.message());
  if (Status st = events_.Open(run_dir_ + "/events.jsonl"); !st.ok())
    LOG_WARN("worker {}: {}", job_.worker_id, st.message());
  return std::nullopt;
}

std::optional<LaunchInput> LaunchedWorker::Do(const WriteMetrics& a) {
  (void)metrics_.Write(a.record);
  return std::nullopt;
}

// Every event the launched worker writes passes here.
std::optional<LaunchInput> LaunchedWorker::Do(const EmitEvent& a) {
  std::visit([this](const auto& e) { events_.Emit(e); }, a.event);
  return std::nullopt;
}

// Children that are not a current program: what finished programs left behind.
std::optional<LaunchInput> LaunchedWorker::Do(const SweepOrphans& a) {
  for (pid_t pid : ChildProcesses())
    if (std::find(a.keep.begin(), a.keep.end(), pid) == a.keep.end()) {
      LOG_INFO("worker {}: killing pid {}, left behind by a finished program", job_.worker_id, pid);
      ::kill(pid, SIGKILL);
    }
  return std::nullopt;
}

std::optional<LaunchInput> LaunchedWorker::Do(const Exit& a) {
  exit_code_ = a.code;
  return std::nullopt;
}

bool LaunchedWorker::ReadAgent() {
  std::vector<nlohmann::json> msgs;
  Status st = agent_->ReadAvailable(&msgs);
  for (const auto& j : msgs) {
    AgentMessage m;
    if (Status p = FromJson(j, &m); !p.ok()) {
      LOG_WARN("worker {}: ignored a message from the agent: {}", job_.worker_id, p.message());
      continue;
    }
    inbox_.push_back(std::move(m));
  }
  if (!st.ok()) agent_gone_ = true;
  return st.ok();
}

void LaunchedWorker::FeedAgent() {
  while (!inbox_.empty() && machine_.TakesAgentMessages() && !exit_code_) {
    AgentMessage m = std::move(inbox_.front());
    inbox_.pop_front();
    Feed(AgentSaid{std::move(m)});
  }
}

void LaunchedWorker::ReadProgram(int id, bool exited) {
  auto it = programs_.find(id);
  if (it == programs_.end() || !it->second.ch_open) return;
  std::vector<nlohmann::json> msgs;
  Status st = it->second.ch->ReadAvailable(&msgs);
  const int pid = it->second.pid;
  for (const auto& j : msgs) {
    ProgramMessage m;
    if (Status parsed = ParseProgramMessage(j, &m); !parsed.ok()) {
      LOG_WARN("worker {}: program pid {}: {}", job_.worker_id, pid, parsed.message());
      continue;
    }
    Feed(ProgramSaid{id, m});
  }
  if (st.ok()) return;
  // End of file (it exits, or closed fd 3) or garbage (a line too long: Corruption).
  if (!exited && st.code() == StatusCode::kCorruption)
    LOG_WARN("worker {}: program pid {}: {}", job_.worker_id, pid, st.message());
  if (auto again = programs_.find(id); again != programs_.end()) again->second.ch_open = false;
  Feed(ProgramChannelClosed{id});
}

// Non-blocking: whatever the pipe holds now. Copied as it comes, so the worker's log keeps
// the program's lines in their order among the worker's own.
void LaunchedWorker::CopyStderr(ProgramIo& p) {
  char buf[1 << 16];
  while (p.err_fd >= 0) {
    const ssize_t n = ::read(p.err_fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {  // end of file: it and every child of it closed their stderr
      ::close(p.err_fd);
      p.err_fd = -1;
      return;
    }
    p.err_tail.Append(std::string_view(buf, static_cast<size_t>(n)));
    for (ssize_t done = 0; done < n;) {  // the log; a write that fails loses the copy, not the tail
      const ssize_t w = ::write(STDERR_FILENO, buf + done, static_cast<size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) break;
      done += w;
    }
  }
}

void LaunchedWorker::CopyAllStderr() {
  for (auto& [id, p] : programs_) CopyStderr(p);
}

void LaunchedWorker::Reap() {
  for (;;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) break;
    std::string tail;
    for (auto it = programs_.begin(); it != programs_.end(); ++it) {
      if (it->second.pid != pid) continue;
      ReadProgram(it->first, /*exited=*/true);  // its last words
      if (auto again = programs_.find(it->first); again != programs_.end()) {
        // Everything it wrote is in the pipe now; what its own children write later is
        // theirs (they are swept as orphans).
        CopyStderr(again->second);
        tail = again->second.err_tail.OneLine();
        if (again->second.err_fd >= 0) ::close(again->second.err_fd);
        programs_.erase(again);
      }
      break;
    }
    Feed(ProcessReaped{pid, ProcessExitFromStatus(status), std::move(tail)});
  }
}

void LaunchedWorker::PollOnce() {
  const double now = WallSeconds();
  const double wait = std::clamp(machine_.NextDeadline(now) - now, 0.0, kPollSliceSeconds);
  std::vector<pollfd> fds = {{agent_->fd(), POLLIN, 0}, {notice_->wake.fd(), POLLIN, 0}};
  std::vector<int> ids;
  for (const auto& [id, p] : programs_) {
    ids.push_back(id);
    fds.push_back({p.ch_open ? p.ch->fd() : -1, POLLIN, 0});
    fds.push_back({p.err_fd, POLLIN, 0});
  }
  ::poll(fds.data(), fds.size(), static_cast<int>(wait * 1000));
  if (fds[1].revents) notice_->wake.Drain();
  for (size_t i = 0; i < ids.size() && !exit_code_; ++i) {
    if (fds[2 * i + 3].revents)
      if (auto it = programs_.find(ids[i]); it != programs_.end()) CopyStderr(it->second);
    if (fds[2 * i + 2].revents) ReadProgram(ids[i], /*exited=*/false);
  }
}

void LaunchedWorker::KillAll() {
  for (const auto& [id, p] : programs_) {
    LOG_INFO("worker {}: signal {} to program pid {} (the worker leaves)", job_.worker_id, DescribeSignal(SIGKILL),
             p.pid);
    ::kill(p.pid, SIGKILL);
  }
  for (pid_t pid : ChildProcesses()) ::kill(pid, SIGKILL);
  // Reap them all (they die at once: SIGKILL), kReapAllSeconds at most.
  const double until = WallSeconds() + kReapAllSeconds;
  while (WallSeconds() < until) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid < 0) break;  // no children left
    if (pid > 0) continue;
    pollfd wake{notice_->wake.fd(), POLLIN, 0};
    ::poll(&wake, 1, 10);
  }
}

int LaunchedWorker::Run() {
  SetSignalHandler(SIGTERM, [notice = notice_](int) {
    notice->raised = true;
    notice->wake.Notify();
  });
  IgnoreSignal(SIGINT);  // the agent decides
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  Feed(Begin{static_cast<int>(::getpid())});
  while (!exit_code_) {
    PollOnce();
    if (!exit_code_ && !ReadAgent()) Feed(AgentGone{});
    if (!exit_code_) FeedAgent();
    if (!exit_code_ && notice_->raised && !notice_fed_) {
      notice_fed_ = true;
      Feed(PreemptionNotice{});
    }
    if (!exit_code_) Reap();
    if (!exit_code_) Feed(Tick{});
  }
  KillAll();
  return *exit_code_;
}

}  // namespace

int RunLaunchedWorker(Channel* agent, const JobMessage& job, const TrainConfig& cfg) {
  auto program = LaunchProgram(cfg);
  if (!program.ok() || program->empty()) {
    const std::string error = program.ok() ? "launch_program is empty" : program.status().message();
    (void)agent->Send(ToJson(WorkerMessage(FatalMessage{error})));
    return kExitBadConfig;
  }
  // A program that cannot be run fails the job once, here, not every generation.
  if (auto found = FindProgram(program->front()); !found.ok()) {
    (void)agent->Send(ToJson(WorkerMessage(FatalMessage{found.status().message()})));
    return kExitBadConfig;
  }
  LaunchedWorker w(agent, job, cfg, std::move(program.value()));
  return w.Run();
}

}  // namespace elastrain
