#include "train/trainer.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "comm/process_group.h"
#include "comm/sharding.h"
#include "common/files.h"
#include "common/log.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "kernels/gemm.h"
#include "model/flops.h"
#include "transformer/transformer.h"
#include "optim/optim.h"
#include "train/checkpoint_period.h"
#include "train/checkpointer.h"
#include "common/events.h"
#include "common/metrics.h"
#include "train/train_state.h"

namespace elastrain {

namespace {
using Clock = std::chrono::steady_clock;

class Trainer {
 public:
  Trainer(const TrainConfig& c, const WorkerContext& ctx) : cfg_(c), ctx_(ctx), T_(c.max_target_length) {
    cfg_.num_workers = ctx.world;
  }
  ~Trainer() {
    if (ckpt_ && !clean_exit_) ckpt_->Abort();  // a failed generation: do not wait for lost peers' shards
  }
  Status Setup();
  Status Restore();
  Status Run(GenerationResult* out);
  int64_t completed_step() const { return completed_step_; }
  int64_t start_step() const { return start_step_; }
  // Hands the state, model and snapshot buffer back to ctx.carried.
  void HandBack();

 private:
  Status ConnectGroups();
  // This generation's rendezvous store (ctx.store, or the file store) and group options.
  Result<std::shared_ptr<gloo::rendezvous::Store>> RendezvousStore();
  GroupOptions GroupOpts() const;
  Status OpenData();
  Status RestoreFromMemory();
  bool holds_replica() const { return mesh_->fsdp() == 1 && mesh_->tensor() == 1; }
  // Loads samples indices[begin, begin+rows) of `split` into inputs_/targets_.
  void LoadRows(Split split, const std::vector<int64_t>& indices, int64_t begin, int64_t rows);
  // Trains step `step` (0-based); returns the mean token loss of the global batch and
  // sets *stop to the StopReason bits any rank raised for this step.
  Result<double> TrainStep(int64_t step, int* stop);
  Result<double> Evaluate();  // mean token loss over the fixed eval batches
  Status LogStep(int64_t step, double loss, double lr, double grad_norm, double step_seconds, double ckpt_stall);
  Status MaybeInjectFailure(int64_t done, GenerationResult* out);
  // checkpoint_period=auto, chief: logs and records a change of the period it proposes
  // (all ranks adopt it in the next step's collective).
  void NotePeriodChange(const std::optional<CheckpointPeriodChange>& c, int64_t step);
  double JobElapsedSeconds() const { return WallSeconds() - job_started_at_; }
  // A step cancelled because the generation lost a member says which one, when known.
  Status NameLostPeers(const Status& st) const {
    if (st.ok() || !ctx_.describe_lost_peers || st.message().find("cancelled") == std::string::npos) return st;
    const std::string lost = ctx_.describe_lost_peers();
    return lost.empty() ? st : Status::Unavailable(st.message() + "; " + lost);
  }
  void Phase(const std::string& p) {
    if (ctx_.control.on_phase) ctx_.control.on_phase(p);
  }
  // Seconds all of this rank's groups have spent in collectives so far.
  double CommSeconds() const {
    double s = 0;
    for (const auto* g : {&world_, &tensor_, &fsdp_, &data_group_})
      if (*g) s += (*g)->busy_seconds();
    return s;
  }
  Status WriteSummary(const TrainSummary& s);
  void FirstLossesFromMetrics(TrainSummary* s) const;
  bool is_chief() const { return ctx_.rank == 0; }
  // Micro-batches every rank runs for a batch of `rows` split over the batch shards: the
  // largest share (the first one) divided into per_device_batch_size pieces.
  int64_t MicroBatches(int64_t rows) const {
    auto [b, e] = Sampler::ShareRange(rows, 0, mesh_->batch_shards());
    return (e - b + cfg_.per_device_batch_size - 1) / cfg_.per_device_batch_size;
  }
  ScheduleOptions Schedule() const {
    return {cfg_.learning_rate, static_cast<int64_t>(cfg_.warmup_steps_fraction * cfg_.steps), cfg_.steps,
            cfg_.cosine_learning_rate_final_fraction};
  }
  ckpt::DataState DataStateAt(int64_t done) const {
    return {static_cast<uint64_t>(cfg_.data_shuffle_seed), sampler_->Epoch(done), done, done * gb_};
  }

  TrainConfig cfg_;  // a copy: num_workers is this generation's world
  const WorkerContext ctx_;
  const int64_t T_;
  std::string run_dir_;
  int64_t gb_ = 0;
  std::unique_ptr<Mesh> mesh_;
  MeshCoords coords_;
  int batch_shard_ = 0;  // d*fsdp + f: which share of each global batch this rank reads
  std::shared_ptr<gloo::rendezvous::Store> store_;
  std::unique_ptr<ProcessGroup> world_, tensor_, fsdp_, data_group_;
  std::unique_ptr<Dataset> data_;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<Transformer<float>> model_;
  std::unique_ptr<TrainState> state_;
  std::unique_ptr<Checkpointer> ckpt_;
  std::unique_ptr<CheckpointPeriodTuner> period_tuner_;  // checkpoint_period=auto
  double job_started_at_ = 0;  // wall seconds
  EventLog events_;
  int64_t start_step_ = 0;      // steps done before this generation (restored)
  int64_t completed_step_ = 0;  // steps done so far: the state's step
  std::vector<int32_t> sample_, inputs_, targets_;
  MetricsWriter metrics_;
  ProgressLine progress_;
  double peak_flops_ = 0, flops_per_token_ = 0;
  double last_grad_norm_ = 0;
  double comm_seconds_ = 0;  // time in collectives during the last step
  double ckpt_wait_ = 0;     // part of the last checkpoint stall spent waiting for the previous save
  std::unique_ptr<MetricsWriter> samples_log_;  // record_consumed_samples
  bool clean_exit_ = false;
  bool restored_ = false;  // the state holds a restored (or trained) step
  int64_t state_step_ = -1;  // the step state_'s values hold (-1: unknown or being overwritten)
  Clock::time_point start_;
};

Result<std::shared_ptr<gloo::rendezvous::Store>> Trainer::RendezvousStore() {
  if (!store_) store_ = ctx_.store;
  if (!store_) {
    ELASTRAIN_ASSIGN_OR_RETURN(store_, MakeFileStore(ctx_.rendezvous_dir));
  }
  return store_;
}

GroupOptions Trainer::GroupOpts() const {
  GroupOptions opt;
  opt.timeout = std::chrono::milliseconds(static_cast<int64_t>(cfg_.collective_timeout * 1000));
  opt.hostname = ctx_.bind_address;
  opt.describe_lost_peers = ctx_.describe_lost_peers;
  opt.cancelled = ctx_.control.aborted;
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
  return Status::OK();
}

Status Trainer::OpenData() {
  DatasetOptions dopt;
  dopt.type = cfg_.dataset_type;
  dopt.path = cfg_.dataset_path;
  dopt.tokenizer_path = cfg_.tokenizer_path;
  dopt.cache_dir = (std::filesystem::path(cfg_.base_output_directory) / ".cache").string();
  dopt.seq_len = T_;
  dopt.vocab_size = cfg_.model.vocab_size;
  dopt.eval_split_fraction = cfg_.eval_split_fraction;
  dopt.seed = static_cast<uint64_t>(cfg_.data_shuffle_seed);
  ELASTRAIN_ASSIGN_OR_RETURN(data_, OpenDataset(dopt));
  sampler_ = std::make_unique<Sampler>(data_->num_samples(Split::kTrain), gb_,
                                       static_cast<uint64_t>(cfg_.data_shuffle_seed));
  return Status::OK();
}

Status Trainer::Setup() {
  start_ = Clock::now();
  job_started_at_ = ctx_.job_started_at > 0 ? ctx_.job_started_at : WallSeconds();
  Phase("setup");
  ELASTRAIN_ASSIGN_OR_RETURN(GemmBackend backend, ParseGemmBackend(cfg_.gemm_backend));
  SetGemmBackend(backend);
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
  const bool remat = cfg_.remat_policy == "full";
  ELASTRAIN_ASSIGN_OR_RETURN(ModelConfig local, TensorLocalConfig(cfg_.model, mesh_->tensor()));

  // Refuse what cannot fit before touching the disk or allocating.
  PlanBatch plan_batch;
  plan_batch.global_batch = gb_;
  plan_batch.micro_batch = cfg_.per_device_batch_size;
  plan_batch.seq_len = T_;
  plan_batch.remat_full = remat;
  const RankPlan mem = PlanRank(*mesh_, cfg_.model, plan_batch);
  const int64_t avail = AvailableMemoryBytes() / ctx_.world;
  if (mem.total_bytes() > avail) {
    return Status::OutOfMemory(fmt::format(
        "model_name={} needs about {:.1f} GiB per worker to train on mesh {} (parameters {:.1f}, gradients {:.1f}, "
        "AdamW state {:.1f}, activations {:.1f} at per_device_batch_size={} max_target_length={}) but this machine "
        "has {:.1f} GiB available per worker; use a smaller model, or more workers with FSDP",
        cfg_.model_name, mem.total_bytes() / 1073741824.0, mesh_->ToString(), mem.param_bytes / 1073741824.0,
        mem.grad_bytes / 1073741824.0, mem.optimizer_bytes / 1073741824.0, mem.activation_bytes / 1073741824.0,
        cfg_.per_device_batch_size, T_, avail / 1073741824.0));
  }

  run_dir_ = (std::filesystem::path(cfg_.base_output_directory) / cfg_.run_name).string();
  if (is_chief()) {
    ELASTRAIN_RETURN_IF_ERROR(MakeDirs(run_dir_));
    AddLogFile(run_dir_ + "/train.log");
    ELASTRAIN_RETURN_IF_ERROR(WriteFileAtomic(run_dir_ + "/config.yml", ConfigToYaml(cfg_)));
    ELASTRAIN_RETURN_IF_ERROR(events_.Open(run_dir_ + "/events.jsonl"));
  }
  ELASTRAIN_RETURN_IF_ERROR(OpenData());
  const double t_data = SecondsSince(start_);
  ELASTRAIN_RETURN_IF_ERROR(ConnectGroups());
  const double t_connect = SecondsSince(start_);

  CarriedState* carried = ctx_.carried;
  if (carried && carried->model && carried->model_tensor == mesh_->tensor()) {
    model_ = std::move(carried->model);
  } else {
    if (carried) carried->model.reset();
    model_ = std::make_unique<Transformer<float>>(local, cfg_.per_device_batch_size, T_,
                                                  remat ? RematPolicy::kFull : RematPolicy::kNone);
  }
  model_->SetTensorParallel(coords_.tensor, nullptr);
  if (mesh_->tensor() > 1) {
    ProcessGroup* tg = tensor_.get();
    model_->SetTensorParallel(coords_.tensor, [tg](float* d, int64_t n) { return tg->AllReduceSum(d, n); });
  }
  model_->SetCancelCheck(ctx_.control.aborted);
  RankGroups groups{world_.get(), tensor_.get(), fsdp_.get(), data_group_.get()};
  if (carried && carried->state && carried->state->CanRebind(*mesh_, coords_)) {
    state_ = std::move(carried->state);
    ELASTRAIN_RETURN_IF_ERROR(state_->Rebind(*mesh_, coords_, groups));
    state_step_ = carried->step;  // its values are intact until this generation overwrites them
  } else {
    if (carried) carried->state.reset();  // free it before allocating the new one
    state_ = std::make_unique<TrainState>(cfg_.model, *mesh_, coords_, groups);
    state_step_ = -1;
  }
  if (carried) carried->step = -1;  // the state is this generation's now; HandBack says what it holds
  model_->SetUnitHooks(state_->Hooks());
  ckpt_ = std::make_unique<Checkpointer>(cfg_, run_dir_, ctx_.rank, *mesh_, coords_, state_.get(), world_.get(),
                                         &events_, carried ? std::move(carried->snapshot) : nullptr);
  ckpt_->set_on_commit(ctx_.control.on_checkpoint);
  if (cfg_.checkpoint_period_auto) {
    if (carried && carried->period_tuner) period_tuner_ = std::move(carried->period_tuner);
    else
      period_tuner_ = std::make_unique<CheckpointPeriodTuner>(cfg_.checkpoint_mtti_prior_seconds,
                                                              cfg_.checkpoint_period_min, cfg_.checkpoint_period_max);
  }
  sample_.resize(T_ + 1);
  inputs_.resize(cfg_.per_device_batch_size * T_);
  targets_.resize(cfg_.per_device_batch_size * T_);
  LOG_INFO("generation {}: set up in {:.3f}s (data {:.3f}s, rendezvous {:.3f}s, buffers {:.3f}s)", ctx_.generation,
           SecondsSince(start_), t_data, t_connect - t_data, SecondsSince(start_) - t_connect);

  flops_per_token_ = TrainingFlopsPerToken(cfg_.model, T_);
  const double rank_peak = ctx_.peak_flops > 0 ? ctx_.peak_flops : MeasureSgemmGflops() * 1e9;
  peak_flops_ = cfg_.hardware_peak_tflops > 0 ? cfg_.hardware_peak_tflops * 1e12 : rank_peak * ctx_.world;
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
           T_, mesh_->batch_shards(), cfg_.per_device_batch_size, cfg_.remat_policy,
           model_->ActivationBytes() / 1048576.0);
  LOG_INFO("compute: {} threads, gemm {}, peak for MFU {:.1f} GFLOP/s ({})", ComputeThreads(), cfg_.gemm_backend,
           peak_flops_ / 1e9, cfg_.hardware_peak_tflops > 0 ? "hardware_peak_tflops" : "measured SGEMM ceiling");
  return Status::OK();
}

// ---------------------------------------------------------------- restoring
Status Trainer::Restore() {
  Phase("restore");
  const auto restore_start = Clock::now();
  bool from_memory = ctx_.restore.kind == RestoreSpec::Kind::kMemory && holds_replica();
  if (from_memory) {
    // A checkpoint committed after the replica's step (a report the controller missed)
    // wins: continuing from the older replica would fork the run's timeline.
    int64_t latest = is_chief() ? ckpt_->LatestCommittedStep() : -1;
    if (ctx_.world > 1) ELASTRAIN_RETURN_IF_ERROR(world_->Broadcast(&latest, 1, 0));
    if (latest > ctx_.restore.step) {
      LOG_WARN("checkpoint at step {} is newer than the in-memory replica (step {}); restoring the checkpoint",
               latest, ctx_.restore.step);
      from_memory = false;
    }
  }
  if (from_memory) {
    ELASTRAIN_RETURN_IF_ERROR(RestoreFromMemory());
  } else {
    state_step_ = -1;
    state_->InitParams(static_cast<uint64_t>(cfg_.init_weights_seed));
    ELASTRAIN_ASSIGN_OR_RETURN(RestoreResult restored, ckpt_->Restore());
    start_step_ = restored.step;
    state_step_ = start_step_;
  }
  if (is_chief() && from_memory) ckpt_->RemoveUncommitted();
  completed_step_ = start_step_;
  ckpt_->StartPeriodAt(start_step_);
  if (period_tuner_) NotePeriodChange(period_tuner_->OnGenerationStart(ctx_.failures, JobElapsedSeconds()), start_step_);
  if (is_chief())
    events_.Emit("state_restored", {{"generation", ctx_.generation}, {"step", start_step_}, {"world", ctx_.world},
                                    {"kind", from_memory ? "memory" : start_step_ > 0 ? "checkpoint" : "fresh"},
                                    {"seconds", SecondsSince(restore_start)}});
  restored_ = true;
  if (is_chief())
    ELASTRAIN_RETURN_IF_ERROR(
        metrics_.Open(run_dir_ + "/metrics.jsonl", /*append=*/start_step_ > 0 || ctx_.generation > 0));
  if (cfg_.record_consumed_samples) {
    ELASTRAIN_RETURN_IF_ERROR(MakeDirs(run_dir_ + "/samples"));
    samples_log_ = std::make_unique<MetricsWriter>();
    ELASTRAIN_RETURN_IF_ERROR(samples_log_->Open(fmt::format("{}/samples/rank_{}.jsonl", run_dir_, ctx_.rank),
                                                 /*append=*/true));
  }
  return Status::OK();
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
                                                     static_cast<int>(members.size()), GroupOpts()));
    for (float* d : {state_->shard_params(), state_->adam_m(), state_->adam_v()})
      ELASTRAIN_RETURN_IF_ERROR(transfer->Broadcast(d, n, /*root=*/0));
  }
  state_step_ = step;
  start_step_ = step;
  const double secs = SecondsSince(t0);
  const int sent = static_cast<int>(members.size()) - 1;
  LOG_INFO("restored step {} from memory ({}; {} of {} ranks received it from rank {}) in {:.3f}s", step,
           have ? "held it" : "received it", sent, ctx_.world, source, secs);
  if (is_chief())
    events_.Emit("memory_restored", {{"step", step}, {"generation", ctx_.generation}, {"source_rank", source},
                                     {"ranks_sent", sent}, {"seconds", secs}});
  return Status::OK();
}

void Trainer::HandBack() {
  CarriedState* c = ctx_.carried;
  if (!c) return;
  if (ckpt_) {
    if (!clean_exit_) ckpt_->Abort();
    c->snapshot = ckpt_->snapshot_buffer();
    ckpt_.reset();  // joins a save in flight before the buffer is reused
  }
  if (period_tuner_) c->period_tuner = std::move(period_tuner_);
  if (model_) {
    c->model = std::move(model_);
    c->model_tensor = mesh_->tensor();
  }
  if (state_) {
    c->step = holds_replica() ? state_step_ : -1;
    c->state = std::move(state_);
  }
}

// The pieces a worker's first generation will most likely need, built while it waits.
Status PrepareCarriedStateImpl(const TrainConfig& cfg, CarriedState* c) {
  ELASTRAIN_ASSIGN_OR_RETURN(Mesh mesh, ResolveMeshForConfig(cfg, cfg.max_workers));
  ELASTRAIN_ASSIGN_OR_RETURN(ModelConfig local, TensorLocalConfig(cfg.model, mesh.tensor()));
  c->model = std::make_unique<Transformer<float>>(local, cfg.per_device_batch_size, cfg.max_target_length,
                                                  cfg.remat_policy == "full" ? RematPolicy::kFull : RematPolicy::kNone);
  c->model_tensor = mesh.tensor();
  if (mesh.fsdp() == 1 && mesh.tensor() == 1) {  // data parallel: a whole state, rebound later
    const Mesh one(1, 1, 1);
    c->state = std::make_unique<TrainState>(cfg.model, one, one.Coords(0), RankGroups{});
    if (cfg.enable_checkpointing)
      c->snapshot = std::make_shared<FloatBuffer>(3 * c->state->shard_size());
  }
  c->step = -1;
  return Status::OK();
}

// ---------------------------------------------------------------- a step
void Trainer::LoadRows(Split split, const std::vector<int64_t>& indices, int64_t begin, int64_t rows) {
  for (int64_t r = 0; r < rows; ++r) {
    data_->GetSample(split, indices[begin + r], sample_.data());
    std::copy(sample_.begin(), sample_.begin() + T_, inputs_.begin() + r * T_);
    std::copy(sample_.begin() + 1, sample_.end(), targets_.begin() + r * T_);
  }
}

Result<double> Trainer::TrainStep(int64_t step, int* stop) {
  state_->ZeroGrads();
  const double comm_before = CommSeconds();
  const std::vector<int64_t> rows = sampler_->RankShare(step, batch_shard_, mesh_->batch_shards());
  if (samples_log_)
    ELASTRAIN_RETURN_IF_ERROR(samples_log_->Write({{"generation", ctx_.generation},
                                                   {"step", step},
                                                   {"rank", ctx_.rank},
                                                   {"shard", batch_shard_},
                                                   {"shards", mesh_->batch_shards()},
                                                   {"tensor_rank", coords_.tensor},
                                                   {"num_samples", sampler_->num_samples()},
                                                   {"indices", rows}}));
  const float dloss = static_cast<float>(1.0 / static_cast<double>(gb_ * T_));
  double loss_sum = 0;
  // Every rank runs the same number of micro-batches (FSDP gathers are collective); a
  // rank whose share is smaller runs empty ones at the end.
  for (int64_t mb = 0, begin = 0; mb < MicroBatches(gb_); ++mb, begin += cfg_.per_device_batch_size) {
    const int64_t n = std::clamp<int64_t>(static_cast<int64_t>(rows.size()) - begin, 0, cfg_.per_device_batch_size);
    LoadRows(Split::kTrain, rows, begin, n);
    loss_sum += model_->ForwardBackward(state_->params(), state_->grads(), inputs_.data(), targets_.data(), n, dloss);
    ELASTRAIN_RETURN_IF_ERROR(NameLostPeers(model_->comm_status()));
  }
  ELASTRAIN_RETURN_IF_ERROR(state_->ReduceGradients());
  ELASTRAIN_ASSIGN_OR_RETURN(const double grad_norm, state_->ClipGradients(cfg_.gradient_clipping_threshold));
  AdamWOptions opt{cfg_.adam_b1, cfg_.adam_b2, cfg_.adam_eps, cfg_.adam_weight_decay};
  ckpt_->WaitForSnapshot();  // a save in flight must have copied the state first
  state_step_ = -1;  // a crash inside the update would leave a mix of two steps
  state_->Update(step + 1, LearningRate(Schedule(), step), opt);
  // The step is done here, on this rank: the update is local, so whatever fails later
  // leaves a consistent state at step + 1.
  completed_step_ = step + 1;
  state_step_ = completed_step_;
  // Tensor peers computed the same loss: the world sum counts each batch shard `tensor`
  // times. The same collective carries every rank's stop requests, so that all ranks
  // agree to stop after the same step.
  const int asked = ctx_.control.stop_reasons ? ctx_.control.stop_reasons(step + 1) : 0;
  // The payload: the loss sum, then how many ranks ask for each StopReason, then the
  // checkpoint period the chief proposes (checkpoint_period=auto; 0 from the others), so
  // that every rank saves at the same steps.
  constexpr size_t kPeriodSlot = 1 + std::size(kAllStopReasons);
  double payload[kPeriodSlot + 1] = {loss_sum / mesh_->tensor()};
  for (size_t i = 0; i < std::size(kAllStopReasons); ++i) payload[1 + i] = (asked & kAllStopReasons[i]) ? 1 : 0;
  payload[kPeriodSlot] = is_chief() && period_tuner_ ? static_cast<double>(period_tuner_->period()) : 0;
  if (ctx_.world > 1) ELASTRAIN_RETURN_IF_ERROR(world_->AllReduceSum(payload, std::size(payload)));
  if (cfg_.checkpoint_period_auto) ckpt_->SetAutoPeriod(std::llround(payload[kPeriodSlot]));
  *stop = 0;
  for (size_t i = 0; i < std::size(kAllStopReasons); ++i)
    if (payload[1 + i] > 0) *stop |= kAllStopReasons[i];
  last_grad_norm_ = grad_norm;
  comm_seconds_ = CommSeconds() - comm_before;
  return payload[0] / static_cast<double>(gb_ * T_);
}

Result<double> Trainer::Evaluate() {
  Phase("eval");
  const int64_t available = data_->num_samples(Split::kEval);
  const int64_t want = std::min(available, cfg_.eval_steps * cfg_.per_device_batch_size);
  std::vector<int64_t> idx;
  auto [b, e] = Sampler::ShareRange(want, batch_shard_, mesh_->batch_shards());
  for (int64_t i = b; i < e; ++i) idx.push_back(i);
  double loss_sum = 0;
  for (int64_t mb = 0, begin = 0; mb < MicroBatches(want); ++mb, begin += cfg_.per_device_batch_size) {
    const int64_t n = std::clamp<int64_t>(static_cast<int64_t>(idx.size()) - begin, 0, cfg_.per_device_batch_size);
    LoadRows(Split::kEval, idx, begin, n);
    loss_sum += model_->Forward(state_->params(), inputs_.data(), targets_.data(), n);
    ELASTRAIN_RETURN_IF_ERROR(NameLostPeers(model_->comm_status()));
  }
  loss_sum /= mesh_->tensor();
  if (ctx_.world > 1) ELASTRAIN_RETURN_IF_ERROR(world_->AllReduceSum(&loss_sum, 1));
  Phase("train");
  return loss_sum / static_cast<double>(want * T_);
}

// fail_at_step: rehearse a failure of rank fail_rank right after that step.
Status Trainer::MaybeInjectFailure(int64_t done, GenerationResult* out) {
  if (cfg_.fail_at_step != done || ctx_.rank != cfg_.fail_rank || !ctx_.inject_failure) return Status::OK();
  LOG_WARN("fail_at_step={}: injecting a failure ({}) on rank {}", done, cfg_.fail_mode, ctx_.rank);
  if (cfg_.fail_mode == "kill") ::raise(SIGKILL);
  if (cfg_.fail_mode == "hang") ::raise(SIGSTOP);  // resumes only if someone sends SIGCONT
  if (cfg_.fail_mode == "preempt") {
    // To the process, not this thread: the signal thread (common/signals.h) takes it and
    // turns it into a preemption notice, seen by the next step's stop check.
    ::kill(::getpid(), SIGTERM);
    return Status::OK();
  }
  if (cfg_.fail_mode != "exit") return Status::OK();
  out->injected_exit = true;
  return Status::Internal(fmt::format("fail_at_step={}: injected failure after step {}", done, done));
}

void Trainer::NotePeriodChange(const std::optional<CheckpointPeriodChange>& c, int64_t step) {
  if (!c || !is_chief()) return;
  LOG_INFO("checkpoint_period=auto: {} -> {} steps after step {} ({}: {} failure{}, MTTI {:.1f}s, save {:.3f}s, "
           "step {:.4f}s)",
           c->from, c->to, step, c->reason, c->failures, c->failures == 1 ? "" : "s", c->mtti_seconds,
           c->stall_seconds, c->step_seconds);
  events_.Emit("checkpoint_period_changed", {{"from", c->from},
                                             {"to", c->to},
                                             {"failures", c->failures},
                                             {"mtti_seconds", c->mtti_seconds},
                                             {"stall_seconds", c->stall_seconds},
                                             {"step_seconds", c->step_seconds},
                                             {"reason", c->reason},
                                             {"generation", ctx_.generation},
                                             {"step", step}});
}

Status Trainer::Run(GenerationResult* out) {
  TrainSummary& s = out->summary;
  s.run_dir = run_dir_;
  s.global_batch_size = gb_;
  s.micro_batches_per_step = MicroBatches(gb_);
  s.activation_bytes = model_->ActivationBytes();
  out->start_step = start_step_;
  auto eval = [&](int64_t step) -> Status {
    ELASTRAIN_ASSIGN_OR_RETURN(double l, Evaluate());
    if (step == 0) s.first_eval_loss = l;
    s.final_eval_loss = l;
    progress_.Finish();
    LOG_INFO("step {}: eval loss {:.4f}", step, l);
    if (!is_chief()) return Status::OK();
    return metrics_.Write({{"step", step}, {"eval_loss", l}, {"time", SecondsSince(start_)}});
  };
  Phase("train");
  if (start_step_ == 0) ELASTRAIN_RETURN_IF_ERROR(eval(0));
  if (start_step_ >= cfg_.steps) LOG_INFO("resumed at step {} of {}: nothing left to train", start_step_, cfg_.steps);
  auto loop_start = Clock::now();
  double timed_seconds = 0;
  for (int64_t step = start_step_; step < cfg_.steps; ++step) {
    if (ctx_.control.aborted && ctx_.control.aborted())
      return NameLostPeers(
          Status::Unavailable(fmt::format("generation {} was cancelled by the controller", ctx_.generation)));
    auto t0 = Clock::now();
    int stop = 0;
    ELASTRAIN_ASSIGN_OR_RETURN(const double loss, TrainStep(step, &stop));
    const double dt = SecondsSince(t0);
    if (step > start_step_) timed_seconds += dt;  // the first step warms caches and thread pools
    if (step == start_step_) s.first_loss = loss;
    s.final_loss = loss;
    const int64_t done = step + 1;
    if (!std::isfinite(loss))
      return Status::Internal(fmt::format("step {}: loss is {}; lower learning_rate or check the data", done, loss));
    if (ctx_.control.on_step) ctx_.control.on_step({done, start_step_, loss, dt, WallSeconds()});
    ELASTRAIN_ASSIGN_OR_RETURN(double stall, ckpt_->MaybeSave(done, cfg_.steps, DataStateAt(done)));
    stall += ckpt_->take_snapshot_wait();
    if (period_tuner_ && is_chief()) {
      if (const std::optional<double> save_seconds = ckpt_->TakeCommittedSaveSeconds()) {
        const int64_t timed_steps = done - start_step_ - 1;  // the first step is not timed
        const double step_seconds = timed_steps > 0 ? timed_seconds / timed_steps : dt;
        NotePeriodChange(period_tuner_->OnSaveMeasured(*save_seconds, step_seconds, JobElapsedSeconds()), done);
      }
    }
    ckpt_wait_ = ckpt_->last_wait_seconds();
    if (done % cfg_.log_period == 0 || done == cfg_.steps || step == start_step_ || stop)
      ELASTRAIN_RETURN_IF_ERROR(LogStep(done, loss, LearningRate(Schedule(), step), last_grad_norm_, dt, stall));
    const double elapsed = SecondsSince(loop_start);
    const int64_t run_steps = done - start_step_;
    if (is_chief()) progress_.Update(done, cfg_.steps, loss, gb_ * T_ / dt, elapsed / run_steps * (cfg_.steps - done));
    ELASTRAIN_RETURN_IF_ERROR(MaybeInjectFailure(done, out));
    if (stop && done < cfg_.steps) {
      // Every rank saw the same bits: save this step (unless it was just saved) and leave.
      Phase("checkpoint");
      progress_.Finish();
      LOG_INFO("stopping after step {} ({})", done, DescribeStopReasons(stop));
      ELASTRAIN_RETURN_IF_ERROR(ckpt_->SaveNow(done, DataStateAt(done)).status());
      ELASTRAIN_RETURN_IF_ERROR(ckpt_->Flush());
      out->stop_reasons = stop;
      out->completed_step = done;
      clean_exit_ = true;
      return Status::OK();
    }
    if (cfg_.eval_interval > 0 && done % cfg_.eval_interval == 0 && done != cfg_.steps)
      ELASTRAIN_RETURN_IF_ERROR(eval(done));
  }
  Phase("checkpoint");
  ELASTRAIN_RETURN_IF_ERROR(ckpt_->Flush());
  ELASTRAIN_RETURN_IF_ERROR(eval(cfg_.steps));
  progress_.Finish();
  s.steps = cfg_.steps;
  const int64_t timed_steps = std::max<int64_t>(1, cfg_.steps - start_step_ - 1);
  if (timed_seconds <= 0) timed_seconds = SecondsSince(loop_start);
  s.tokens_per_sec = static_cast<double>(timed_steps * gb_ * T_) / timed_seconds;
  s.mfu = s.tokens_per_sec * flops_per_token_ / peak_flops_;
  s.wall_seconds = SecondsSince(start_);
  if (start_step_ > 0 && is_chief()) FirstLossesFromMetrics(&s);
  ELASTRAIN_RETURN_IF_ERROR(WriteSummary(s));
  out->completed = true;
  out->completed_step = completed_step_;
  clean_exit_ = true;
  return Status::OK();
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
    if (!loss && j.contains("loss")) s->first_loss = j["loss"].get<double>(), loss = true;
    if (!eval && j.contains("eval_loss")) s->first_eval_loss = j["eval_loss"].get<double>(), eval = true;
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
  if (!is_chief()) return Status::OK();
  nlohmann::json j = {{"steps", s.steps},
                      {"global_batch_size", s.global_batch_size},
                      {"micro_batches_per_step", s.micro_batches_per_step},
                      {"first_loss", s.first_loss},
                      {"final_loss", s.final_loss},
                      {"first_eval_loss", s.first_eval_loss},
                      {"final_eval_loss", s.final_eval_loss},
                      {"tokens_per_sec", s.tokens_per_sec},
                      {"mfu", s.mfu},
                      {"wall_seconds", s.wall_seconds},
                      {"world_size", ctx_.world},
                      {"generation", ctx_.generation},
                      {"mesh", mesh_->ToString()}};
  return WriteFileAtomic(run_dir_ + "/summary.json", j.dump(2) + "\n");
}

Status Trainer::LogStep(int64_t step, double loss, double lr, double grad_norm, double dt, double ckpt_stall) {
  const double tps = gb_ * T_ / dt;
  const double mfu = tps * flops_per_token_ / peak_flops_;
  if (!progress_.enabled() || step == cfg_.steps)
    LOG_INFO("step {}/{} loss {:.4f} lr {:.3e} grad_norm {:.3f} | {:.0f} tok/s | {:.1f} GFLOP/s | MFU {:.1f}%", step,
             cfg_.steps, loss, lr, grad_norm, tps, tps * flops_per_token_ / 1e9, 100 * mfu);
  if (!is_chief()) return Status::OK();
  return metrics_.Write({{"step", step},
                         {"loss", loss},
                         {"lr", lr},
                         {"grad_norm", grad_norm},
                         {"step_time", dt},
                         {"comm_time", comm_seconds_},
                         {"checkpoint_stall", ckpt_stall},
                         {"checkpoint_wait", ckpt_wait_},
                         {"tokens_per_sec", tps},
                         {"mfu", mfu},
                         {"generation", ctx_.generation},
                         {"world_size", ctx_.world},
                         {"time", SecondsSince(start_)},
                         {"wall_time", WallSeconds()}});
}
}  // namespace

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

CarriedState::CarriedState() = default;
CarriedState::~CarriedState() = default;

Status PrepareCarriedState(const TrainConfig& cfg, CarriedState* carried) {
  return PrepareCarriedStateImpl(cfg, carried);
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
