// One generation's lifecycle: Setup (mesh, memory check, run directory, data, groups,
// model, state, checkpointer), Restore (checkpoint or a replica in memory), Run (the
// step loop, a stop at a step boundary, the final eval and summary). One step's work is
// in train_step.cpp, what crosses generations in carried_state.cpp.
#include "train/trainer.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <memory>
#include <type_traits>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "plan/sharding.h"
#include "common/fault.h"
#include "common/files.h"
#include "common/safe_path.h"
#include "common/log.h"
#include "config/derived.h"
#include "plan/mesh_for_config.h"
#include "train/dataset_for_config.h"
#include "kernels/gemm.h"
#include "model/flops.h"
#include "train/mfu_peak.h"
#include "train/rehearsal.h"
#include "kernels/gemm_matmul.h"
#include "train/trainer_impl.h"
#include "wire/events.h"

namespace elastrain {

// ---------------------------------------------------------------- setup
Status Trainer::Setup() {
  start_ = Clock::now();
  job_started_at_ = ctx_.job_started_at > 0 ? ctx_.job_started_at : WallSeconds();
  Phase(TrainPhase::kSetup);
  ArmRehearsal(cfg_, ctx_.inject_failure);
  SetGemmBackend(cfg_.gemm_backend);
  SetGemmDtype(cfg_.dtype);
  if (cfg_.dtype == ComputeDtype::kBfloat16 && !CpuHasBf16())
    LOG_WARN("dtype=bfloat16: this CPU has no bf16 instructions (oneDNN ISA {}); oneDNN emulates them, slower than "
             "float32", OneDnnIsa());
  ELASTRAIN_RETURN_IF_ERROR(ResolveMeshAndBatch());
  ELASTRAIN_RETURN_IF_ERROR(CheckMemoryFits());
  ELASTRAIN_RETURN_IF_ERROR(OpenRunDirectory());
  ELASTRAIN_RETURN_IF_ERROR(OpenData());
  const double t_data = SecondsSince(start_);
  ELASTRAIN_RETURN_IF_ERROR(ConnectGroups());
  const double t_connect = SecondsSince(start_);
  ELASTRAIN_RETURN_IF_ERROR(TakeOrBuildModel());
  ELASTRAIN_RETURN_IF_ERROR(TakeOrBuildState());
  MakeCheckpointer();
  sample_.resize(T_ + 1);
  inputs_.resize(cfg_.per_device_batch_size * T_);
  targets_.resize(cfg_.per_device_batch_size * T_);
  LOG_INFO("generation {}: set up in {:.3f}s (data {:.3f}s, rendezvous {:.3f}s, buffers {:.3f}s)", ctx_.generation,
           SecondsSince(start_), t_data, t_connect - t_data, SecondsSince(start_) - t_connect);
  flops_per_token_ = TrainingFlopsPerToken(cfg_.model, T_);
  peak_flops_ = GenerationPeakFlops(cfg_, ctx_.world, ctx_.peak_flops);
  LogSetup();
  return Status::OK();
}

Status Trainer::ResolveMeshAndBatch() {
  if (ctx_.mesh) {
    mesh_ = std::make_unique<Mesh>(*ctx_.mesh);
  } else {
    ELASTRAIN_ASSIGN_OR_RETURN(Mesh mesh, ResolveMeshForConfig(cfg_, ctx_.world));
    mesh_ = std::make_unique<Mesh>(mesh);
  }
  if (mesh_->world_size() != ctx_.world)
    return Status::Internal(fmt::format("mesh {} does not hold {} ranks", mesh_->ToString(), ctx_.world));
  coords_ = mesh_->Coords(ctx_.rank);
  batch_shard_ = coords_.data * mesh_->fsdp() + coords_.fsdp;
  gb_ = GlobalBatchSize(cfg_);
  ELASTRAIN_ASSIGN_OR_RETURN(local_model_, TensorLocalConfig(cfg_.model, mesh_->tensor()));
  return Status::OK();
}

Status Trainer::CheckMemoryFits() const {
  PlanBatch plan_batch;
  plan_batch.global_batch = gb_;
  plan_batch.micro_batch = cfg_.per_device_batch_size;
  plan_batch.seq_len = T_;
  plan_batch.remat_full = cfg_.remat_policy == RematPolicy::kFull;
  const RankPlan mem = PlanRank(*mesh_, cfg_.model, plan_batch);
  const int64_t avail = AvailableMemoryBytes() / ctx_.world;
  if (mem.total_bytes() <= avail) return Status::OK();
  return Status::OutOfMemory(fmt::format(
      "model_name={} needs about {:.1f} GiB per worker to train on mesh {} (parameters {:.1f}, gradients {:.1f}, "
      "AdamW state {:.1f}, activations {:.1f} at per_device_batch_size={} max_target_length={}) but this machine "
      "has {:.1f} GiB available per worker; use a smaller model, or more workers with FSDP",
      cfg_.model_name, mem.total_bytes() / 1073741824.0, mesh_->ToString(), mem.param_bytes / 1073741824.0,
      mem.grad_bytes / 1073741824.0, mem.optimizer_bytes / 1073741824.0, mem.activation_bytes / 1073741824.0,
      cfg_.per_device_batch_size, T_, avail / 1073741824.0));
}

Status Trainer::OpenRunDirectory() {
  run_dir_ = (std::filesystem::path(cfg_.base_output_directory) / cfg_.run_name).string();
  GuardDirectory(run_dir_);  // nothing below it is reached through a link (common/safe_path.h)
  if (!is_chief()) return Status::OK();
  ELASTRAIN_RETURN_IF_ERROR(MakeDirs(run_dir_));
  AddLogFile(run_dir_ + "/train.log");
  ELASTRAIN_RETURN_IF_ERROR(WriteFileAtomic(run_dir_ + "/config.yml", ConfigToYaml(cfg_)));
  if (ctx_.control.still_current) events_.set_fence(ctx_.control.still_current);
  return events_.Open(run_dir_ + "/events.jsonl");
}

Status Trainer::OpenData() {
  DatasetOptions dopt = DatasetOptionsForConfig(cfg_);
  dopt.seq_len = T_;
  ELASTRAIN_ASSIGN_OR_RETURN(data_, OpenDataset(dopt));
  sampler_ = std::make_unique<Sampler>(data_->num_samples(Split::kTrain), gb_,
                                       static_cast<uint64_t>(cfg_.data_shuffle_seed));
  return Status::OK();
}

Result<std::shared_ptr<gloo::rendezvous::Store>> Trainer::RendezvousStore() {
  if (!store_) store_ = ctx_.store;
  if (!store_) {
    ELASTRAIN_ASSIGN_OR_RETURN(store_, MakeFileStore(ctx_.rendezvous_dir));
  }
  return store_;
}

GroupOptions Trainer::GroupOpts(bool all_ranks) const {
  GroupOptions opt;
  opt.timeout = std::chrono::milliseconds(static_cast<int64_t>(cfg_.collective_timeout * 1000));
  opt.hostname = ctx_.bind_address;
  opt.describe_lost_peers = ctx_.describe_lost_peers;
  opt.cancelled = ctx_.control.aborted;
  opt.tracker = all_ranks ? tracker_ : nullptr;
  return opt;
}

Status Trainer::ConnectGroups() {
  const int r = ctx_.rank;
  std::shared_ptr<gloo::rendezvous::Store> store;
  if (ctx_.world > 1) {
    ELASTRAIN_ASSIGN_OR_RETURN(store, RendezvousStore());
  }
  const GroupOptions opt = GroupOpts();
  const Mesh& m = *mesh_;
  auto connect = [&](MeshGroup kind, const std::string& name, std::unique_ptr<ProcessGroup>* out) -> Status {
    std::vector<int> members = m.Group(kind, r);
    // The group's lowest rank names it, so that every member derives the same prefix.
    std::string prefix = fmt::format("{}/{}/{}", ctx_.prefix, name, members.front());
    ELASTRAIN_ASSIGN_OR_RETURN(*out, ProcessGroup::Connect(members.size() > 1 ? store : nullptr, prefix,
                                                           m.GroupRank(kind, r), static_cast<int>(members.size()),
                                                           opt));
    return Status::OK();
  };
  ELASTRAIN_ASSIGN_OR_RETURN(world_, ProcessGroup::Connect(ctx_.world > 1 ? store : nullptr, ctx_.prefix + "/world",
                                                           r, ctx_.world, opt));
  ELASTRAIN_RETURN_IF_ERROR(connect(MeshGroup::kTensor, "tensor", &tensor_));
  ELASTRAIN_RETURN_IF_ERROR(connect(MeshGroup::kFsdp, "fsdp", &fsdp_));
  ELASTRAIN_RETURN_IF_ERROR(connect(MeshGroup::kData, "data", &data_group_));
  return ConnectRamTier(store);
}

void Trainer::MakeCheckpointer() {
  CarriedState* carried = ctx_.carried;
  ckpt_ = std::make_unique<Checkpointer>(cfg_, run_dir_, ctx_.rank, *mesh_, coords_, state_.get(), world_.get(),
                                         &events_, carried ? std::move(carried->snapshot) : nullptr);
  ckpt_->set_on_commit(ctx_.control.on_checkpoint);
  ckpt_->set_generation(ctx_.generation);
  if (ctx_.control.still_current) ckpt_->set_fence(ctx_.control.still_current);
  if (!cfg_.checkpoint_period_auto) return;
  if (carried && carried->period_tuner)
    period_tuner_ = std::move(carried->period_tuner);
  else
    period_tuner_ = std::make_unique<CheckpointPeriodTuner>(cfg_.checkpoint_mtti_prior_seconds,
                                                            cfg_.checkpoint_period_min, cfg_.checkpoint_period_max,
                                                            RamTierActive(*mesh_, cfg_.memory_snapshot_period));
}

void Trainer::LogSetup() const {
  LOG_INFO("generation {}: rank {}/{}, mesh {}, coords data={} fsdp={} tensor={}", ctx_.generation, ctx_.rank,
           ctx_.world, mesh_->ToString(), coords_.data, coords_.fsdp, coords_.tensor);
  LOG_INFO("run directory {}", run_dir_);
  LOG_INFO("model {} ({}): {:.2f}M parameters ({:.2f}M on this rank), {} layers, emb {}, heads {}/{} (q/kv), mlp {}, "
           "vocab {}",
           cfg_.model_name, FamilyName(cfg_.model.family), cfg_.model.NumParams() / 1e6,
           state_->local_size() / 1e6, cfg_.model.num_layers, cfg_.model.emb_dim, cfg_.model.num_heads,
           cfg_.model.num_kv_heads, cfg_.model.mlp_dim, cfg_.model.vocab_size);
  LOG_INFO("data: {}", data_->Describe());
  LOG_INFO("batch: global {} x {} tokens over {} batch shards, micro-batch {}; remat {}; activations {:.1f} MiB", gb_,
           T_, mesh_->batch_shards(), cfg_.per_device_batch_size, RematPolicyName(cfg_.remat_policy),
           model_->ActivationBytes() / 1048576.0);
  LOG_INFO("compute: {} threads, gemm {}, dtype {}, peak for MFU {:.1f} GFLOP/s ({})", ComputeThreads(),
           GemmBackendName(cfg_.gemm_backend), ComputeDtypeName(cfg_.dtype), peak_flops_ / 1e9, MfuPeakSource(cfg_));
}

// ---------------------------------------------------------------- restoring
Status Trainer::Restore() {
  Phase(TrainPhase::kRestore);
  const auto restore_start = Clock::now();
  bool from_memory = ctx_.restore.kind == RestoreSpec::Kind::kMemory && holds_replica();
  bool from_peers = ctx_.restore.kind == RestoreSpec::Kind::kPeers;
  if (from_memory || from_peers) {
    // A checkpoint committed after the replica's step (a report the controller missed)
    // wins: continuing from the older replica would fork the run's timeline.
    int64_t latest = is_chief() ? ckpt_->LatestCommittedStep() : -1;
    if (ctx_.world > 1) ELASTRAIN_RETURN_IF_ERROR(world_->Broadcast(&latest, 1, 0));
    if (latest > ctx_.restore.step) {
      LOG_WARN("checkpoint at step {} is newer than the state in memory (step {}); restoring the checkpoint",
               latest, ctx_.restore.step);
      from_memory = from_peers = false;
    }
  }
  if (from_peers) {
    ELASTRAIN_ASSIGN_OR_RETURN(from_peers, RestoreFromPeers());
  }
  old_state_.reset();
  if (from_memory) {
    ELASTRAIN_RETURN_IF_ERROR(RestoreFromMemory());
  } else if (!from_peers) {
    state_step_ = -1;
    if (ctx_.carried) ctx_.carried->shard_step = -1;  // a rebound state's values go
    state_->InitParams(static_cast<uint64_t>(cfg_.init_weights_seed));
    ELASTRAIN_ASSIGN_OR_RETURN(RestoreResult restored, ckpt_->Restore());
    start_step_ = restored.step;
    state_step_ = start_step_;
  }
  if (is_chief() && (from_memory || from_peers)) ckpt_->RemoveUncommitted();
  completed_step_ = start_step_;
  ckpt_->StartPeriodAt(start_step_);
  if (period_tuner_)
    NotePeriodChange(period_tuner_->OnGenerationStart(ctx_.failures, ctx_.covered_failures, JobElapsedSeconds()),
                     start_step_);
  StartSnapshotTuner();
  if (is_chief())
    events_.Emit(StateRestoredEvent{ctx_.generation, start_step_, ctx_.world,
                                    from_memory ? "memory" : from_peers ? "peers"
                                                : start_step_ > 0      ? "checkpoint"
                                                                       : "fresh",
                                    SecondsSince(restore_start)});
  restored_ = true;
  StartRamTier();
  ELASTRAIN_RETURN_IF_ERROR(OpenStepLogs());
  ELASTRAIN_RETURN_IF_ERROR(RecoverStepLine());
  if (logged_.train > start_step_) redo_until_ = logged_.train;
  return Status::OK();
}

// metrics.jsonl (chief), and samples/rank_<r>.jsonl with record_consumed_samples.
Status Trainer::OpenStepLogs() {
  if (is_chief()) {
    const bool resume = start_step_ > 0 || ctx_.generation > 0;
    ELASTRAIN_RETURN_IF_ERROR(metrics_.Open(run_dir_ + "/metrics.jsonl", resume));
    // The lines are in step order, so the tail holds the newest: a step redone after a
    // restore from an older checkpoint must not get a second line.
    constexpr size_t kTailBytes = 64 << 10;  // some 150 lines
    if (resume) {
      ELASTRAIN_ASSIGN_OR_RETURN(const std::string tail, metrics_.TrimTornTail(kTailBytes));
      logged_ = NewestLoggedSteps(tail, cfg_.steps);
    }
    if (ctx_.control.still_current) metrics_.set_fence(ctx_.control.still_current);
  }
  if (cfg_.record_consumed_samples) {
    ELASTRAIN_RETURN_IF_ERROR(MakeDirs(run_dir_ + "/samples"));
    samples_log_ = std::make_unique<MetricsWriter>();
    ELASTRAIN_RETURN_IF_ERROR(samples_log_->Open(fmt::format("{}/samples/rank_{}.jsonl", run_dir_, ctx_.rank),
                                                 /*append=*/true));
  }
  return Status::OK();
}

Status Trainer::RecoverStepLine() {
  static_assert(std::is_trivially_copyable_v<StepLine> && sizeof(StepLine) % sizeof(int64_t) == 0);
  std::vector<int64_t> steps(ctx_.world, line_.step);
  if (ctx_.world > 1) ELASTRAIN_RETURN_IF_ERROR(world_->AllGather(&line_.step, 1, steps.data()));
  const int owner = static_cast<int>(std::max_element(steps.begin(), steps.end()) - steps.begin());
  if (steps[owner] <= 0) return Status::OK();
  // Every rank takes it, so that a survivor can hand it on if this chief dies too.
  if (std::count(steps.begin(), steps.end(), steps[owner]) < ctx_.world) {
    int64_t words[sizeof(StepLine) / sizeof(int64_t)];
    std::memcpy(words, &line_, sizeof(StepLine));
    ELASTRAIN_RETURN_IF_ERROR(world_->Broadcast(words, std::size(words), owner));
    std::memcpy(&line_, words, sizeof(StepLine));
  }
  if (!is_chief() || line_.step <= logged_.train) return Status::OK();
  LOG_WARN("metrics.jsonl has no line for step {}, which generation {} completed: writing the one rank {} kept",
           line_.step, line_.generation, owner);
  events_.Emit(StepLineRecoveredEvent{ctx_.generation, line_.step, line_.generation, owner});
  return WriteStepLine(line_);
}

Status Trainer::RestoreFromMemory() {
  auto t0 = Clock::now();
  const int64_t step = ctx_.restore.step;
  const int source = ctx_.restore.source_rank;
  const int64_t n = state_->shard_size();
  // Survivors hold the state already (the same TrainState, rebound to this mesh);
  // newcomers, and survivors one step behind, receive it from the source over a group
  // of just those ranks.
  const bool have = state_step_ == step;
  std::vector<int64_t> need(ctx_.world, 0);
  const int64_t mine = have ? 0 : 1;
  if (ctx_.world > 1) ELASTRAIN_RETURN_IF_ERROR(world_->AllGather(&mine, 1, need.data()));
  else need[0] = mine;
  if (need[source])
    return Status::Internal(fmt::format("rank {} was named the source of the step-{} state but does not hold it",
                                        source, step));
  std::vector<int> members = {source};
  for (int r = 0; r < ctx_.world; ++r)
    if (need[r]) members.push_back(r);
  const auto it = std::find(members.begin(), members.end(), ctx_.rank);
  if (members.size() > 1 && it != members.end()) {
    if (!have) state_step_ = -1;  // overwritten from here on
    ELASTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<gloo::rendezvous::Store> store, RendezvousStore());
    const int me = static_cast<int>(it - members.begin());
    ELASTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ProcessGroup> transfer,
                               ProcessGroup::Connect(store, ctx_.prefix + "/restore", me,
                                                     static_cast<int>(members.size()), GroupOpts(false)));
    for (float* d : {state_->shard_params(), state_->adam_m(), state_->adam_v()})
      ELASTRAIN_RETURN_IF_ERROR(transfer->Broadcast(d, n, /*root=*/0));
  }
  state_step_ = step;
  start_step_ = step;
  const double secs = SecondsSince(t0);
  const int sent = static_cast<int>(members.size()) - 1;
  LOG_INFO("restored step {} from memory ({}; {} of {} ranks received it from rank {}) in {:.3f}s", step,
           have ? "held it" : "received it", sent, ctx_.world, source, secs);
  if (is_chief()) {
    MemoryRestoredEvent e;
    e.step = step;
    e.generation = ctx_.generation;
    e.source_rank = source;
    e.ranks_sent = sent;
    e.seconds = secs;
    events_.Emit(e);
  }
  return Status::OK();
}

// ---------------------------------------------------------------- the step loop
Status Trainer::Run(GenerationResult* out) {
  BeginSummary(out);
  Phase(TrainPhase::kTrain);
  if (start_step_ == 0) ELASTRAIN_RETURN_IF_ERROR(EvaluateAndRecord(0, &out->summary));
  if (start_step_ >= cfg_.steps) LOG_INFO("resumed at step {} of {}: nothing left to train", start_step_, cfg_.steps);
  loop_start_ = Clock::now();
  timed_seconds_ = 0;
  for (int64_t step = start_step_; step < cfg_.steps; ++step) {
    ELASTRAIN_ASSIGN_OR_RETURN(const bool stopped, RunStep(step, out));
    if (stopped) return Status::OK();
  }
  return Finish(out);
}

void Trainer::BeginSummary(GenerationResult* out) const {
  TrainSummary& s = out->summary;
  s.run_dir = run_dir_;
  s.global_batch_size = gb_;
  s.micro_batches_per_step = MicroBatches(gb_);
  s.activation_bytes = model_->ActivationBytes();
  s.world_size = ctx_.world;
  s.generation = ctx_.generation;
  s.mesh = mesh_->ToString();
  out->start_step = start_step_;
}

Result<bool> Trainer::RunStep(int64_t step, GenerationResult* out) {
  if (ctx_.control.aborted && ctx_.control.aborted())
    return NameLostPeers(
        Status::Cancelled(fmt::format("generation {} was cancelled by the controller", ctx_.generation)));
  auto t0 = Clock::now();
  int stop = 0;
  const bool copied = copy_in_flight_;  // the copy sent after the step before runs during this one
  copy_in_flight_ = false;
  ELASTRAIN_ASSIGN_OR_RETURN(const double loss, TrainStep(step, &stop));
  const double dt = SecondsSince(t0);
  const int64_t done = step + 1;
  // Every rank measures (a rank that becomes chief later has its own figures); the
  // first step of a generation warms caches and is not a sample.
  if (snapshot_tuner_ && step > start_step_)
    NoteSnapshotPeriodChange(snapshot_tuner_->OnStep(dt, copied, JobElapsedSeconds(), DiskPeriodSteps()), done);
  SnapshotToPeers(done);  // in the background, while what follows and the next step run
  // This rank applied the update: it keeps the step's line before anything can fail, so
  // that if the chief dies before writing it, the next generation's chief can.
  const bool due = done % cfg_.log_period == 0 || done == cfg_.steps || step == start_step_ || stop;
  StepLine line;
  if (due) {
    line = MakeStepLine(done, loss, LearningRate(Schedule(), step), dt);
    KeepLine(line);
  }
  if (step > start_step_) timed_seconds_ += dt;  // the first step warms caches and thread pools
  TrainSummary& s = out->summary;
  if (step == start_step_) s.first_loss = loss;
  s.final_loss = loss;
  if (!std::isfinite(loss))
    return Status::Internal(fmt::format("step {}: loss is {}; lower learning_rate or check the data", done, loss));
  if (ctx_.control.on_step) {
    const double wait = std::min(comm_seconds_, dt);  // measured within the same interval
    ctx_.control.on_step({done, start_step_, loss, dt, WallSeconds(), dt - wait, wait});
  }
  ELASTRAIN_ASSIGN_OR_RETURN(const double stall, CheckpointIfDue(done, dt));
  if (due) ELASTRAIN_RETURN_IF_ERROR(LogStep(line, stall));
  // Goodput's redone time ends here: these steps write no lines to time them by.
  if (is_chief() && done <= redo_until_ && (done == redo_until_ || stop))
    events_.Emit(StepsRedoneEvent{ctx_.generation, start_step_, done});
  const double elapsed = SecondsSince(loop_start_);
  const int64_t run_steps = done - start_step_;
  if (is_chief()) progress_.Update(done, cfg_.steps, loss, gb_ * T_ / dt, elapsed / run_steps * (cfg_.steps - done));
  ELASTRAIN_RETURN_IF_ERROR(MaybeInjectFailure(done, out));
  if (stop && done < cfg_.steps) {
    ELASTRAIN_RETURN_IF_ERROR(StopAtBoundary(done, stop, out));
    return true;
  }
  if (cfg_.eval_interval > 0 && done % cfg_.eval_interval == 0 && done != cfg_.steps)
    ELASTRAIN_RETURN_IF_ERROR(EvaluateAndRecord(done, &s));
  MaybeSample(done);
  return false;
}

Result<double> Trainer::CheckpointIfDue(int64_t done, double step_seconds) {
  ELASTRAIN_ASSIGN_OR_RETURN(double stall, ckpt_->MaybeSave(done, cfg_.steps, DataStateAt(done)));
  stall += ckpt_->take_snapshot_wait();
  if (period_tuner_ && is_chief()) {
    if (const std::optional<double> save_seconds = ckpt_->TakeCommittedSaveSeconds()) {
      const int64_t timed_steps = done - start_step_ - 1;  // the first step is not timed
      const double mean_step_seconds = timed_steps > 0 ? timed_seconds_ / timed_steps : step_seconds;
      NotePeriodChange(period_tuner_->OnSaveMeasured(*save_seconds, mean_step_seconds, JobElapsedSeconds()), done);
    }
  }
  ckpt_wait_ = ckpt_->last_wait_seconds();
  return stall;
}

Status Trainer::StopAtBoundary(int64_t done, int stop, GenerationResult* out) {
  Phase(TrainPhase::kCheckpoint);
  progress_.Finish();
  LOG_INFO("stopping after step {} ({})", done, DescribeStopReasons(stop));
  ELASTRAIN_RETURN_IF_ERROR(ckpt_->SaveNow(done, DataStateAt(done)).status());
  ELASTRAIN_RETURN_IF_ERROR(ckpt_->Flush());
  out->stop_reasons = stop;
  out->completed_step = done;
  clean_exit_ = true;
  return Status::OK();
}

Status Trainer::Finish(GenerationResult* out) {
  TrainSummary& s = out->summary;
  Phase(TrainPhase::kCheckpoint);
  ELASTRAIN_RETURN_IF_ERROR(ckpt_->Flush());
  ELASTRAIN_RETURN_IF_ERROR(EvaluateAndRecord(cfg_.steps, &s));
  progress_.Finish();
  s.steps = cfg_.steps;
  s.start_step = start_step_;
  // Throughput of the steps this invocation trained (none when it resumed at the end).
  const int64_t timed_steps = std::max<int64_t>(1, cfg_.steps - start_step_ - 1);
  if (timed_seconds_ <= 0) timed_seconds_ = SecondsSince(loop_start_);
  s.tokens_per_sec = start_step_ >= cfg_.steps ? 0.0 : static_cast<double>(timed_steps * gb_ * T_) / timed_seconds_;
  s.mfu = s.tokens_per_sec * flops_per_token_ / peak_flops_;
  s.wall_seconds = SecondsSince(start_);
  if (start_step_ > 0 && is_chief()) FirstLossesFromMetrics(&s);
  ELASTRAIN_RETURN_IF_ERROR(WriteSummary(s));
  out->completed = true;
  out->completed_step = completed_step_;
  clean_exit_ = true;
  return Status::OK();
}

// eval_interval <= 0 turns evaluation off, as in MaxText (its base.yml: eval_interval: -1):
// neither at the start, nor between steps, nor at the end.
Status Trainer::EvaluateAndRecord(int64_t step, TrainSummary* s) {
  if (cfg_.eval_interval <= 0) return Status::OK();
  ELASTRAIN_ASSIGN_OR_RETURN(double l, Evaluate());
  if (step == 0) s->first_eval_loss = l;
  s->final_eval_loss = l;
  progress_.Finish();
  LOG_INFO("step {}: eval loss {:.4f}", step, l);
  if (!is_chief() || step <= logged_.eval) return Status::OK();  // logged before this step was redone
  ELASTRAIN_RETURN_IF_ERROR(metrics_.Write({{"step", step}, {"eval_loss", l}, {"time", SecondsSince(start_)}}));
  logged_.eval = step;
  return Status::OK();
}

// The fault points after a step (docs/faults.md; fail_at_step and fail_mode arm them).
Status Trainer::MaybeInjectFailure(int64_t done, GenerationResult* out) {
  using fault::Point;
  const fault::Context here{.generation = ctx_.generation, .rank = ctx_.rank, .step = done};
  const bool ram_tier = ctx_.carried && ctx_.carried->ram.generation() == ctx_.generation;
  if (fault::Fires(Point::kKillAfterStep, here)) {
    if (ctx_.carried) ctx_.carried->ram.Wait();  // after the step's RAM-tier copy went out
    fault::Crash();
  }
  // The RAM tier's thread kills this process halfway through sending this step's copy
  // (train/ram_tier_copies.cpp); without a RAM tier this is a plain kill.
  if (fault::Fires(Point::kKillMidSnapshot, here)) {
    if (!ram_tier) fault::Crash();
    ctx_.carried->ram.Wait();
  }
  if (fault::Fires(Point::kHangAfterStep, here)) ::raise(SIGSTOP);  // resumes only on SIGCONT
  // To the process, not this thread: the signal thread (common/signals.h) takes it and
  // turns it into a preemption notice, seen by the next step's stop check.
  if (fault::Fires(Point::kPreemptAfterStep, here)) ::kill(::getpid(), SIGTERM);
  if (fault::Fires(Point::kExitAfterStep, here)) {
    out->injected_exit = true;
    return Status::Internal(fmt::format("injected failure after step {} (fault exit_after_step)", done));
  }
  return Status::OK();
}

void Trainer::NotePeriodChange(const std::optional<CheckpointPeriodChange>& c, int64_t step) {
  if (!c || !is_chief()) return;
  LOG_INFO("checkpoint_period=auto: {} -> {} steps after step {} ({}: {} failure{}, MTTI {:.1f}s, save {:.3f}s, "
           "step {:.4f}s)",
           c->from, c->to, step, c->reason, c->failures, c->failures == 1 ? "" : "s", c->mtti_seconds,
           c->stall_seconds, c->step_seconds);
  events_.Emit(CheckpointPeriodChangedEvent{c->from, c->to, c->failures, c->covered_failures, c->mtti_seconds,
                                            c->stall_seconds, c->step_seconds, c->reason, ctx_.generation, step});
}


// A run that resumed (or a later generation) did not see the first losses itself: the
// run's metrics.jsonl has them.
void Trainer::FirstLossesFromMetrics(TrainSummary* s) const {
  auto text = ReadFile(run_dir_ + "/metrics.jsonl");
  if (!text.ok()) return;
  bool loss = false, eval = false;
  size_t begin = 0;
  const std::string& t = text.value();
  while (begin < t.size() && !(loss && eval)) {
    size_t end = t.find('\n', begin);
    if (end == std::string::npos) end = t.size();
    auto j = nlohmann::json::parse(t.begin() + begin, t.begin() + end, nullptr, false);
    begin = end + 1;
    if (!j.is_object()) continue;
    // The file is read back, not trusted: a field of another type is skipped, not thrown.
    if (!loss && j.contains("loss") && j["loss"].is_number()) s->first_loss = j["loss"].get<double>(), loss = true;
    if (!eval && j.contains("eval_loss") && j["eval_loss"].is_number())
      s->first_eval_loss = j["eval_loss"].get<double>(), eval = true;
  }
}

Status Trainer::WriteSummary(const TrainSummary& s) {
  if (!cfg_.final_params_path.empty()) {
    ELASTRAIN_ASSIGN_OR_RETURN(std::vector<float> global, state_->GatherGlobalParams());
    if (is_chief()) {
      std::string bytes(reinterpret_cast<const char*>(global.data()), global.size() * sizeof(float));
      ELASTRAIN_RETURN_IF_ERROR(WriteFileAtomic(cfg_.final_params_path, bytes));
    }
  }
  return is_chief() ? WriteRunSummary(s) : Status::OK();
}

StepLine Trainer::MakeStepLine(int64_t done, double loss, double lr, double dt) const {
  StepLine l;
  l.step = done;
  l.loss = loss;
  l.lr = lr;
  l.grad_norm = last_grad_norm_;
  l.step_time = dt;
  l.comm_time = comm_seconds_;
  l.tokens_per_sec = gb_ * T_ / dt;
  l.mfu = l.tokens_per_sec * flops_per_token_ / peak_flops_;
  l.generation = ctx_.generation;
  l.world_size = ctx_.world;
  l.time = SecondsSince(start_);
  l.wall_time = WallSeconds();
  return l;
}

Status Trainer::LogStep(StepLine line, double ckpt_stall) {
  line.checkpoint_stall = ckpt_stall;
  line.checkpoint_wait = ckpt_wait_;
  line.time = SecondsSince(start_);
  line.wall_time = WallSeconds();
  KeepLine(line);
  const double tps = line.tokens_per_sec;
  if (!progress_.enabled() || line.step == cfg_.steps)
    LOG_INFO("step {}/{} loss {:.4f} lr {:.3e} grad_norm {:.3f} | {:.0f} tok/s | {:.1f} GFLOP/s | MFU {:.1f}%",
             line.step, cfg_.steps, line.loss, line.lr, line.grad_norm, tps, tps * flops_per_token_ / 1e9,
             100 * line.mfu);
  if (!is_chief()) return Status::OK();
  return WriteStepLine(line);
}

Status Trainer::WriteStepLine(const StepLine& l) {
  if (l.step <= logged_.train) return Status::OK();  // redone, or recovered: it has its line
  ELASTRAIN_RETURN_IF_ERROR(metrics_.Write(l.ToJson()));
  logged_.train = l.step;
  return Status::OK();
}

GenerationResult RunGeneration(const TrainConfig& cfg, const WorkerContext& ctx) {
  GenerationResult out;
  Trainer t(cfg, ctx);
  out.status = t.Setup();
  if (out.status.ok()) out.status = t.Restore();
  if (out.status.ok()) out.status = t.Run(&out);
  out.start_step = t.start_step();
  out.completed_step = t.completed_step();
  t.HandBack();
  return out;
}

Result<TrainSummary> Train(const TrainConfig& cfg) {
  SetComputeThreads(static_cast<int>(cfg.threads_per_worker));
  WorkerContext ctx;
  ctx.world = 1;
  GenerationResult r = RunGeneration(cfg, ctx);
  if (!r.status.ok()) return r.status;
  return r.summary;
}

}  // namespace elastrain
