#include "train/worker.h"

#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "comm/collective_mark.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/signals.h"
#include "config/config.h"
#include "wire/channel.h"
#include "wire/exit_codes.h"
#include "wire/protocol.h"
#include "wire/worker_messages.h"
#include "common/process.h"
#include "kernels/gemm.h"  // SetComputeThreads
#include "comm/rendezvous_store.h"  // MakeGlooStore
#include "store/signed_records.h"
#include "store/store.h"
#include "train/mfu_peak.h"
#include "train/trainer.h"

namespace elastrain {

namespace {

// Set on SIGTERM (by the signal thread, common/signals.h): a preemption notice.
std::atomic<bool> g_preempted{false};

// A crash leaves its stack in the worker's log (async-signal-safe calls only), then dies
// of the same signal so that the agent sees what killed it.
void OnCrash(int sig) {
  const char head[] = "worker: fatal signal; stack:\n";
  (void)!::write(STDERR_FILENO, head, sizeof(head) - 1);
  void* frames[64];
  const int n = ::backtrace(frames, 64);
  ::backtrace_symbols_fd(frames, n, STDERR_FILENO);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// How often a worker tells its agent it is alive, whatever it is doing.
constexpr std::chrono::milliseconds kTickInterval{250};
// How long a failed collective looks for a local peer that is exiting (describe_lost_peers).
constexpr std::chrono::milliseconds kLostPeerGrace{100};
// How long a fencing check (GenerationControl::still_current) may wait for the store: a
// cut-off worker's writes are held (metrics, events) or refused (commits) after this.
constexpr std::chrono::milliseconds kFenceRequestTimeout{500};
// How long a fresh worker waits for its job message before giving up.
constexpr std::chrono::milliseconds kJobMessageTimeout{60000};

// The agent's messages, read by a thread of their own so that stop and abort requests
// arrive while the main thread trains.
class Inbox {
 public:
  explicit Inbox(Channel* ch) : ch_(ch) {}
  void Start() {
    reader_ = std::thread([this] { Read(); });
  }
  // Ends the reader thread (within one short poll) before the channel goes away.
  ~Inbox() {
    stopping_ = true;
    if (reader_.joinable()) reader_.join();
  }
  // The next assignment, or nullopt when told to exit or the agent is gone.
  std::optional<AssignMessage> NextAssignment() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !assignments_.empty() || closed_ || g_preempted; });
    if (assignments_.empty()) return std::nullopt;
    AssignMessage a = std::move(assignments_.front());
    assignments_.pop_front();
    return a;
  }
  bool closed() {
    std::lock_guard<std::mutex> lock(mu_);
    return closed_;
  }
  void Wake() {
    std::lock_guard<std::mutex> lock(mu_);  // a waiter between its check and its wait sees it
    cv_.notify_all();
  }
  // Requests for generation g (or later) that arrived.
  std::atomic<int64_t> abort_gen{-1}, resize_gen{-1}, user_stop_gen{-1};

 private:
  void Read() {
    while (!stopping_) {
      auto m = ch_->Receive(std::chrono::milliseconds(50));
      if (!m.ok()) break;  // the agent is gone
      if (!m.value()) continue;
      AgentMessage msg;
      Status st = FromJson(*m.value(), &msg);
      if (!st.ok()) {
        LOG_WARN("worker: ignored a message from the agent: {}", st.message());
        continue;
      }
      std::lock_guard<std::mutex> lock(mu_);
      std::visit([this](const auto& v) { Take(v); }, msg);
      cv_.notify_all();
      if (closed_) return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    cv_.notify_all();
  }

  // GUARDED_BY(mu_), on the reader thread.
  void Take(const AssignMessage& m) {
    assignments_.push_back(m);
    Raise(&abort_gen, m.generation - 1);  // a newer generation ends whatever older one still runs
  }
  void Take(const StopMessage& m) { Raise(m.reason == kStopUser ? &user_stop_gen : &resize_gen, m.generation); }
  void Take(const AbortMessage& m) { Raise(&abort_gen, m.generation); }
  void Take(const ExitMessage&) { closed_ = true; }
  void Take(const JobMessage&) {}  // only the first message, read by Run

  static void Raise(std::atomic<int64_t>* a, int64_t v) {
    if (a->load() < v) a->store(v);  // only the reader thread writes
  }
  Channel* ch_;
  std::atomic<bool> stopping_{false};
  std::thread reader_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<AssignMessage> assignments_;   // GUARDED_BY(mu_)
  bool closed_ = false;                     // GUARDED_BY(mu_)
};

// What the ticker reports between messages.
struct Progress {
  std::atomic<int64_t> generation{-1};
  std::atomic<int64_t> step{-1};
  std::mutex mu;
  TrainPhase phase = TrainPhase::kIdle;  // GUARDED_BY(mu)
  void SetPhase(TrainPhase p) {
    std::lock_guard<std::mutex> lock(mu);
    phase = p;
  }
  TrainPhase Phase() {
    std::lock_guard<std::mutex> lock(mu);
    return phase;
  }
};

Result<WorkerContext> ContextFor(const AssignMessage& a, const TrainConfig& cfg, const std::string& host,
                                 const std::shared_ptr<const VerifyKey>& head_key) {
  WorkerContext ctx;
  ctx.rank = a.rank;
  ctx.world = a.world;
  ctx.generation = a.generation;
  ctx.prefix = fmt::format("gen/{}", ctx.generation);
  ctx.bind_address = a.address.empty() ? std::string("127.0.0.1") : a.address;
  ctx.mesh = Mesh(a.data, a.fsdp, a.tensor);
  ctx.restore.kind = a.restore.kind == RestoreKind::kMemory  ? RestoreSpec::Kind::kMemory
                     : a.restore.kind == RestoreKind::kPeers ? RestoreSpec::Kind::kPeers
                                                             : RestoreSpec::Kind::kCheckpoint;
  ctx.restore.source_rank = a.restore.source_rank;
  ctx.restore.step = a.restore.step;
  ctx.restore.old_generation = a.restore.old_generation;
  ctx.restore.old_fsdp = a.restore.old_fsdp;
  ctx.restore.old_tensor = a.restore.old_tensor;
  ctx.restore.sources = a.restore.sources;
  ctx.hosts.assign(static_cast<size_t>(std::max(0, a.world)), "");
  for (const AssignPeer& m : a.members)
    if (m.rank >= 0 && m.rank < a.world) ctx.hosts[static_cast<size_t>(m.rank)] = m.host;
  ctx.inject_failure = a.inject_failure;
  ctx.failures = a.failures;
  ctx.covered_failures = a.covered_failures;
  ctx.job_started_at = a.job_started_at;
  if (a.rendezvous.kind == RendezvousAddress::Kind::kFile) {
    ctx.rendezvous_dir = a.rendezvous.dir;
  } else {
    StoreOptions so;
    so.key_scope = keys::kRoot;
    FillStoreCredentialsFromEnv(&so);  // the agent hands them on (AgentOptions::worker_env)
    so.request_timeout = std::chrono::milliseconds(static_cast<int64_t>(
        std::min(cfg.collective_timeout * 1000, static_cast<double>(kDefaultStoreRequestTimeout.count()))));
    ELASTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<Store> store, OpenStore(a.rendezvous.store_url, so));
    ctx.store = MakeGlooStore(store, a.rendezvous.prefix, so);
    so.request_timeout = std::min(so.request_timeout, kFenceRequestTimeout);
    ELASTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<Store> fence_store, OpenStore(a.rendezvous.store_url, so));
    ctx.control.still_current = StillCurrent(fence_store, a.rendezvous, a.generation, head_key);
  }
  // Peers on this host whose process is gone, to name them when a collective fails.
  std::vector<std::pair<int, int>> local_peers;  // rank, pid
  for (const AssignPeer& m : a.members)
    if (m.host == host) local_peers.push_back({m.rank, m.pid});
  // A collective fails the moment a dying peer's sockets close, which is before the
  // kernel marks it a zombie: look again for a short while before saying nobody is gone.
  ctx.describe_lost_peers = [local_peers, host] {
    const auto deadline = std::chrono::steady_clock::now() + kLostPeerGrace;
    for (;;) {
      std::string out;
      for (auto [rank, pid] : local_peers)
        if (pid > 0 && !ProcessRuns(pid))
          out += fmt::format("{}rank {} (pid {}) on host {} is gone", out.empty() ? "" : ", ", rank, pid, host);
      if (!out.empty() || std::chrono::steady_clock::now() >= deadline) return out;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  };
  return ctx;
}

class WorkerProcess {
 public:
  WorkerProcess(Channel* ch, JobMessage job) : ch_(*ch), inbox_(ch), job_(std::move(job)) {}
  int Run();

 private:
  Status Init(const JobMessage& job);
  // Runs one assignment; returns the exit code if the process must end, else -1.
  int RunAssignment(const AssignMessage& a);
  void Send(const WorkerMessage& m) { (void)ch_.Send(ToJson(m)); }
  void Tick();

  Channel& ch_;
  Inbox inbox_;
  JobMessage job_;
  Progress progress_;
  CollectiveTracker tracker_;  // this generation's collectives (comm/collective_mark.h)
  TrainConfig cfg_;
  std::string worker_id_, host_;
  std::shared_ptr<const VerifyKey> head_key_;  // verifies the plan its fencing reads (signed jobs)
  double peak_flops_ = 0;
  CarriedState carried_;
  std::atomic<bool> done_{false};
  std::thread ticker_;
};

Status WorkerProcess::Init(const JobMessage& job) {
  worker_id_ = job.worker_id;
  host_ = job.host.empty() ? std::string("localhost") : job.host;
  ELASTRAIN_ASSIGN_OR_RETURN(cfg_, LoadConfigText(job.config_yaml, "job config"));
  if (!job.head_public_key.empty()) {
    ELASTRAIN_ASSIGN_OR_RETURN(head_key_, VerifyKey::FromPem(job.head_public_key, "the head's public key (from the agent)"));
  }
  SetLogLevel(cfg_.log_level);
  SetComputeThreads(job.threads);
  const auto t0 = std::chrono::steady_clock::now();
  auto since = [&] { return SecondsSince(t0); };
  // The MFU denominator (train/mfu_peak.h), decided once per process: nothing measured
  // when the config gives hardware_peak_tflops, else the ceiling an earlier worker of
  // this host measured (its agent hands it on), else measured here once.
  peak_flops_ = RankPeakFlopsForMfu(cfg_, job.peak_flops);
  const double t_peak = since();
  // Allocated before this worker says it is ready, so that joining a generation costs a
  // rendezvous, not page faults. A mesh that cannot be planned yet is not an error here.
  Status st = PrepareCarriedState(cfg_, &carried_);
  if (!st.ok()) LOG_WARN("worker {}: nothing prepared in advance: {}", worker_id_, st.message());
  LOG_INFO("worker {}: ready in {:.3f}s (SGEMM ceiling {:.3f}s, buffers {:.3f}s)", worker_id_, since(), t_peak,
           since() - t_peak);
  return Status::OK();
}

// Runs on a thread of its own, so that the mark it sends is current while the trainer is
// blocked inside a collective (a hang names the rank behind by it).
void WorkerProcess::Tick() {
  while (!done_) {
    const int64_t gen = progress_.generation.load();
    const CollectiveMark mark = tracker_.Mark();  // after the generation: Reset came before it
    Status st = ch_.Send(ToJson(WorkerMessage(ProgressMessage{gen, progress_.step.load(), progress_.Phase(),
                                                              WallSeconds(), mark.seq,
                                                              std::string(CollectiveKindName(mark.kind)),
                                                              mark.inside})));
    if (!st.ok()) return;
    std::this_thread::sleep_for(kTickInterval);
  }
}

int WorkerProcess::RunAssignment(const AssignMessage& a) {
  auto ctx_or = [&]() -> Result<WorkerContext> {
    try {
      return ContextFor(a, cfg_, host_, head_key_);
    } catch (const std::exception& e) {
      return Status::InvalidArgument(std::string("assignment: ") + e.what());
    }
  }();
  const int64_t gen = a.generation;
  if (!ctx_or.ok()) {
    EndedMessage ended;
    ended.generation = gen;
    ended.outcome = GenerationOutcome::kFailed;
    ended.error = ctx_or.status().message();
    ended.state_step = carried_.step;
    HeldCopies(carried_, &ended.copies_generation, &ended.copies);
    Send(ended);
    return -1;
  }
  WorkerContext ctx = std::move(ctx_or.value());
  ctx.carried = &carried_;
  ctx.peak_flops = peak_flops_;
  ctx.tracker = &tracker_;
  // A resize waits for a checkpoint boundary. With checkpoint_period=auto the boundary
  // moves, so it stops after the next step (the stop saves that step anyway).
  const int64_t period = cfg_.enable_checkpointing && !cfg_.checkpoint_period_auto ? cfg_.checkpoint_period : 1;
  ctx.control.stop_reasons = [this, gen, period](int64_t step) {
    int r = g_preempted ? kStopPreemption : 0;
    if (inbox_.user_stop_gen >= gen) r |= kStopUser;
    if (inbox_.resize_gen >= gen && step % period == 0) r |= kStopResize;
    return r;
  };
  ctx.control.aborted = [this, gen] { return inbox_.abort_gen >= gen; };
  ctx.control.on_phase = [this](TrainPhase p) { progress_.SetPhase(p); };
  ctx.control.on_step = [this, gen](const StepReport& r) {
    progress_.step = r.step;
    Send(StepMessage{gen, r.step, r.start_step, r.loss, r.step_seconds, r.wall_time, r.compute_seconds,
                     r.wait_seconds});
  };
  ctx.control.on_checkpoint = [this](int64_t step) { Send(CheckpointMessage{step, WallSeconds()}); };
  tracker_.Reset();  // before the generation changes: a tick never pairs it with the old count
  progress_.generation = gen;
  progress_.step = -1;
  Send(StartedMessage{gen, ctx.rank, ctx.world});
  LOG_INFO("worker {}: generation {} as rank {} of {}", worker_id_, gen, ctx.rank, ctx.world);

  GenerationResult r = RunGeneration(cfg_, ctx);

  EndedMessage ended;
  ended.generation = gen;
  ended.outcome = r.completed ? GenerationOutcome::kCompleted
                  : r.status.ok() ? GenerationOutcome::kStopped : GenerationOutcome::kFailed;
  if (!r.status.ok() && inbox_.abort_gen >= gen) ended.outcome = GenerationOutcome::kAborted;
  if (!r.status.ok()) LOG_ERROR("generation {} failed on rank {}: {}", gen, ctx.rank, r.status.message());
  progress_.SetPhase(TrainPhase::kIdle);
  ended.stop_reasons = r.stop_reasons;
  ended.start_step = r.start_step;
  ended.step = r.completed_step;
  ended.state_step = carried_.step;
  HeldCopies(carried_, &ended.copies_generation, &ended.copies);
  ended.leaving = r.injected_exit || g_preempted != 0;
  ended.error = r.status.ok() ? "" : r.status.message();
  ended.timed_out = r.status.code() == StatusCode::kDeadlineExceeded;
  Send(ended);
  if (r.injected_exit) return kExitFailure;
  if (g_preempted) return kExitPreempted;
  return -1;
}

int WorkerProcess::Run() {
  WorkerNotice notice(&g_preempted, [this] { inbox_.Wake(); });
  signal(SIGPIPE, SIG_IGN);
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) signal(sig, OnCrash);

  Status st = Init(job_);
  if (!st.ok()) {
    LOG_ERROR("worker: {}", st.message());
    Send(FatalMessage{st.message()});
    return kExitBadConfig;
  }
  inbox_.Start();
  ticker_ = std::thread([this] { Tick(); });
  Send(ReadyMessage{static_cast<int>(::getpid()), carried_.step, peak_flops_});
  int code = kExitSuccess;
  for (;;) {
    if (g_preempted) {
      LOG_WARN("worker {}: preemption notice while idle; leaving", worker_id_);
      code = kExitPreempted;
      break;
    }
    auto a = inbox_.NextAssignment();
    if (!a) {
      if (g_preempted) continue;
      break;  // told to exit, or the agent is gone
    }
    const int c = RunAssignment(*a);
    if (c >= 0) {
      code = c;
      break;
    }
  }
  done_ = true;
  if (ticker_.joinable()) ticker_.join();
  return code;
}

}  // namespace

Result<JobMessage> ReceiveJobMessage(Channel* ch) {
  auto received = ch->Receive(kJobMessageTimeout);
  AgentMessage first;
  if (!received.ok() || !received.value() || !FromJson(*received.value(), &first).ok() ||
      !std::holds_alternative<JobMessage>(first))
    return Status::DeadlineExceeded(
        fmt::format("worker: no job message from the agent within {} ms", kJobMessageTimeout.count()));
  return std::get<JobMessage>(first);
}

std::function<Status()> StillCurrent(std::shared_ptr<Store> store, RendezvousAddress rendezvous, int64_t gen,
                                     std::shared_ptr<const VerifyKey> head_key) {
  // The newest signing time accepted (shared by the copies of the check; called from the
  // checkpointer's, the events' and the metrics' threads).
  struct Newest {
    std::mutex mu;
    double at = 0;
  };
  auto newest = std::make_shared<Newest>();
  return [store = std::move(store), rendezvous = std::move(rendezvous), gen, head_key = std::move(head_key),
          newest]() -> Status {
    auto kv = store->Get(keys::JobPlan());
    if (!kv.ok()) return Status::Unavailable("cannot confirm generation " + std::to_string(gen) + " is current: " +
                                             kv.status().message());
    if (head_key && kv->has_value()) {
      auto at = VerifyRecord(*head_key, keys::JobPlan(), kv->value().value);
      if (!at.ok())
        return Status::FailedPrecondition(fmt::format("generation {} cannot be confirmed: the job's plan is refused: {}",
                                                      gen, at.status().message()));
      std::lock_guard<std::mutex> lock(newest->mu);
      if (at.value() < newest->at)
        return Status::FailedPrecondition(fmt::format(
            "generation {} cannot be confirmed: the job's plan was signed at {:.6f}, before one already seen ({:.6f}): "
            "a replay", gen, at.value(), newest->at));
      newest->at = at.value();
    }
    Plan plan;
    if (!kv->has_value() || !FromJson(kv->value().value, &plan).ok() || !(plan.rendezvous == rendezvous))
      return Status::FailedPrecondition(fmt::format("generation {} is no longer current: the job's plan is gone", gen));
    if (plan.generation != gen)
      return Status::FailedPrecondition(
          fmt::format("generation {} is no longer current: the job is at generation {}", gen, plan.generation));
    return Status::OK();
  };
}

int RunWorkerProcess(Channel* ch, const JobMessage& job) {
  WorkerProcess w(ch, job);
  return w.Run();
}

}  // namespace elastrain
