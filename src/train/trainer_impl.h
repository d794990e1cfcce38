// The class behind RunGeneration (trainer.h): one generation of one rank. Internal to
// src/train. Its members are defined by topic:
//   trainer.cpp       the generation's lifecycle: setup, restore, the step loop, stop
//   train_step.cpp    one step: load rows, forward/backward, optimizer, agreement; eval
//   carried_state.cpp what it takes over from the previous generation and hands back
// Not thread-safe: one thread runs a generation from Setup to HandBack.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "plan/mesh.h"
#include "comm/process_group.h"
#include "common/clock.h"
#include "common/events.h"
#include "common/metrics.h"
#include "config/config.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "data/tokenizer.h"
#include "optim/optim.h"
#include "cost/checkpoint_period.h"
#include "cost/snapshot_period.h"
#include "train/checkpointer.h"
#include "train/step_line.h"
#include "train/train_state.h"
#include "train/trainer.h"
#include "transformer/transformer.h"

namespace elastrain {

class Trainer {
 public:
  using Clock = std::chrono::steady_clock;

  Trainer(const TrainConfig& c, const WorkerContext& ctx)
      : cfg_(c), ctx_(ctx), T_(c.max_target_length), tracker_(ctx.tracker ? ctx.tracker : &own_tracker_) {
    cfg_.num_workers = ctx.world;
    if (ctx.carried) line_ = ctx.carried->line;
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
  // --- setup (trainer.cpp), in the order Setup calls them
  Status ResolveMeshAndBatch();
  // Refuses, before touching the disk or allocating, a plan that cannot fit in memory.
  Status CheckMemoryFits() const;
  Status OpenRunDirectory();
  Status OpenData();
  Status ConnectGroups();
  // This generation's rendezvous store (ctx.store, or the file store) and group options:
  // those of a group of every rank (the tracker counts its collectives), or of a group of
  // only some ranks (`all_ranks` false: the tracker does not, so that every rank's count
  // stays comparable; comm/collective_mark.h).
  Result<std::shared_ptr<gloo::rendezvous::Store>> RendezvousStore();
  GroupOptions GroupOpts(bool all_ranks = true) const;
  void MakeCheckpointer();
  void LogSetup() const;
  // --- taking over what the previous generation left (carried_state.cpp)
  // The model: the carried one when built for this tensor degree, else a new one.
  Status TakeOrBuildModel();
  // The training state: the carried one rebound to this mesh when it can be, else a new one.
  Status TakeOrBuildState();
  // --- restoring (trainer.cpp)
  Status RestoreFromMemory();
  // --- the RAM tier (restore_peers.cpp)
  bool RamTierWanted() const;
  Status ConnectRamTier(const std::shared_ptr<gloo::rendezvous::Store>& store);
  // True when restored; false when a source lacks its shard and all ranks fall back.
  Result<bool> RestoreFromPeers();
  // After the restore: starts this generation's copies (and sends the restored state),
  // or drops the old ones when this generation keeps none.
  void StartRamTier();
  void SnapshotToPeers(int64_t done);
  // memory_snapshot_period=auto: the tuner of this generation (from the carried state, or
  // new), told the generation has started.
  void StartSnapshotTuner();
  // The disk checkpoint's period in steps as the tuners see it (0: no periodic saves).
  int64_t DiskPeriodSteps() const;
  // memory_snapshot_period=auto, chief: logs and records a change of the period it proposes.
  void NoteSnapshotPeriodChange(const std::optional<SnapshotPeriodChange>& c, int64_t step);
  Status OpenStepLogs();
  // The newest step line any rank holds goes to every rank; the chief appends it when
  // metrics.jsonl lacks it (the previous chief died between the update and the line).
  Status RecoverStepLine();
  bool holds_replica() const { return mesh_->fsdp() == 1 && mesh_->tensor() == 1; }
  // --- the step loop (trainer.cpp)
  void BeginSummary(GenerationResult* out) const;
  // Trains step `step` and does what follows it (report, checkpoint, log, injected
  // failure, eval); true when the ranks agreed to stop after it.
  Result<bool> RunStep(int64_t step, GenerationResult* out);
  // Saves `done` if it is due; returns the step's checkpoint stall in seconds.
  Result<double> CheckpointIfDue(int64_t done, double step_seconds);
  // Every rank saw the same stop bits: save step `done` (unless just saved) and leave.
  Status StopAtBoundary(int64_t done, int stop, GenerationResult* out);
  // After the last step: flush, the final eval, the summary.
  Status Finish(GenerationResult* out);
  Status EvaluateAndRecord(int64_t step, TrainSummary* s);
  Status MaybeInjectFailure(int64_t done, GenerationResult* out);
  // checkpoint_period=auto, chief: logs and records a change of the period it proposes
  // (all ranks adopt it in the next step's collective).
  void NotePeriodChange(const std::optional<CheckpointPeriodChange>& c, int64_t step);
  // Step `done`'s line as of its update; LogStep adds the checkpoint's figures and the
  // time it is written.
  StepLine MakeStepLine(int64_t done, double loss, double lr, double step_seconds) const;
  // Keeps `l` as line_ unless line_ is of a newer step (this one is being redone).
  void KeepLine(const StepLine& l) {
    if (l.step >= line_.step) line_ = l;
  }
  Status LogStep(StepLine line, double ckpt_stall);
  // Chief: appends `l` to metrics.jsonl unless the file has the step's line already.
  Status WriteStepLine(const StepLine& l);
  Status WriteSummary(const TrainSummary& s);
  void FirstLossesFromMetrics(TrainSummary* s) const;
  // --- one step (train_step.cpp)
  // Trains step `step` (0-based); returns the mean token loss of the global batch and
  // sets *stop to the StopReason bits any rank raised for this step.
  Result<double> TrainStep(int64_t step, int* stop);
  // Loads samples indices[begin, begin+rows) of `split` into inputs_/targets_.
  void LoadRows(Split split, const std::vector<int64_t>& indices, int64_t begin, int64_t rows);
  // Accumulates this rank's share of the step's gradient; returns its summed token loss.
  Result<double> ForwardBackward(int64_t step);
  // Reduces and clips the gradient; returns its norm before clipping.
  Result<double> ReduceGradients();
  // The step's last collective, before its update: sums the loss, ORs the stop requests
  // and shares the chief's checkpoint period. Returns the global loss sum.
  Result<double> AgreeOnStep(int64_t step, double loss_sum, int* stop);
  // AdamW: the state becomes step + 1's. Local, so nothing after it can fail the step.
  void ApplyUpdate(int64_t step);
  Result<double> Evaluate();  // mean token loss over the fixed eval batches
  // --- samples during training (train_sample.cpp)
  // sample_period: the chief logs a greedy continuation of the first eval sample's first
  // tokens every sample_period steps. Never fails the step: a problem is logged once.
  void MaybeSample(int64_t done);

  double JobElapsedSeconds() const { return WallSeconds() - job_started_at_; }
  // A step cancelled because the generation lost a member says which one, when known.
  Status NameLostPeers(const Status& st) const {
    if (!st.cancelled() || !ctx_.describe_lost_peers) return st;
    const std::string lost = ctx_.describe_lost_peers();
    return lost.empty() ? st : Status::Cancelled(st.message() + "; " + lost);
  }
  void Phase(TrainPhase p) {
    if (ctx_.control.on_phase) ctx_.control.on_phase(p);
  }
  // Seconds this rank has been blocked in the collectives of its groups so far.
  double CommSeconds() const { return tracker_->wait_seconds(); }
  bool is_chief() const { return ctx_.rank == 0; }
  // Micro-batches every rank runs for a batch of `rows` split over the batch shards: the
  // largest share (the first one) divided into per_device_batch_size pieces.
  int64_t MicroBatches(int64_t rows) const {
    auto [b, e] = Sampler::ShareRange(rows, 0, mesh_->batch_shards());
    return (e - b + cfg_.per_device_batch_size - 1) / cfg_.per_device_batch_size;
  }
  // MaxText's: warmup over learning_rate_schedule_steps * warmup_steps_fraction, cosine to
  // learning_rate_schedule_steps, then 0. Not steps: a run extended with more steps keeps
  // its schedule when learning_rate_schedule_steps is set (LoadConfig resolves -1 to steps).
  ScheduleOptions Schedule() const {
    const int64_t len = cfg_.learning_rate_schedule_steps > 0 ? cfg_.learning_rate_schedule_steps : cfg_.steps;
    return {cfg_.learning_rate, static_cast<int64_t>(cfg_.warmup_steps_fraction * len), len,
            cfg_.cosine_learning_rate_final_fraction};
  }
  ckpt::DataState DataStateAt(int64_t done) const {
    return {static_cast<uint64_t>(cfg_.data_shuffle_seed), sampler_->Epoch(done), done, done * gb_};
  }

  TrainConfig cfg_;  // a copy: num_workers is this generation's world
  const WorkerContext ctx_;
  const int64_t T_;
  CollectiveTracker own_tracker_;      // when the context brings none
  CollectiveTracker* const tracker_;   // ctx.tracker or own_tracker_
  std::string run_dir_;
  int64_t gb_ = 0;
  std::unique_ptr<Mesh> mesh_;
  ModelConfig local_model_;  // this rank's slice of the model (heads and MLP rows / tensor)
  MeshCoords coords_;
  int batch_shard_ = 0;  // d*fsdp + f: which share of each global batch this rank reads
  std::shared_ptr<gloo::rendezvous::Store> store_;
  std::unique_ptr<ProcessGroup> world_, tensor_, fsdp_, data_group_;
  std::unique_ptr<Dataset> data_;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<Transformer<float>> model_;
  std::unique_ptr<TrainState> state_;
  std::unique_ptr<TrainState> old_state_;  // a peers restore's own old shard, until it ends
  bool rebound_ = false;                   // state_ is the carried state, rebound to this mesh
  std::unique_ptr<ProcessGroup> ram_group_;  // the RAM tier's group, until StartRamTier
  std::unique_ptr<Checkpointer> ckpt_;
  std::unique_ptr<CheckpointPeriodTuner> period_tuner_;  // checkpoint_period=auto
  std::unique_ptr<SnapshotPeriodTuner> snapshot_tuner_;  // memory_snapshot_period=auto
  // The RAM tier's period as the ranks agreed it in the last step's collective (with auto:
  // the chief's proposal; 0: no copies); a copy went out during the step now running.
  int64_t snapshot_period_ = 0;
  bool copy_in_flight_ = false;
  double job_started_at_ = 0;  // wall seconds
  EventLog events_;
  int64_t start_step_ = 0;      // steps done before this generation (restored)
  int64_t completed_step_ = 0;  // steps done so far: the state's step
  std::vector<int32_t> sample_, inputs_, targets_;
  MetricsWriter metrics_;
  // The line of the newest step that log_period logs and that this rank applied or was
  // handed (RecoverStepLine); carried across generations.
  StepLine line_;
  LoggedSteps logged_;         // chief: the newest steps metrics.jsonl has lines for
  int64_t redo_until_ = 0;     // chief: steps up to this one are redone (they have lines)
  ProgressLine progress_;
  double peak_flops_ = 0, flops_per_token_ = 0;
  double last_grad_norm_ = 0;
  double comm_seconds_ = 0;  // time blocked in collectives during the last step (TrainStep)
  double ckpt_wait_ = 0;     // part of the last checkpoint stall spent waiting for the previous save
  std::unique_ptr<MetricsWriter> samples_log_;  // record_consumed_samples
  std::unique_ptr<Tokenizer> sample_tokenizer_;  // sample_period, loaded on first use
  bool sample_off_ = false;                      // sample_period: a problem was logged; no more samples
  bool clean_exit_ = false;
  bool restored_ = false;  // the state holds a restored (or trained) step
  int64_t state_step_ = -1;  // the step state_'s values hold (-1: unknown or being overwritten)
  Clock::time_point start_;
  // The step loop's clock: when it began, and the seconds of its steps after the first
  // (the first warms caches and thread pools, so throughput leaves it out).
  Clock::time_point loop_start_;
  double timed_seconds_ = 0;
};

}  // namespace elastrain
