// One training step of one rank, read top to bottom: load its rows, forward/backward
// over its micro-batches, the gradient reduction, the collective on which all ranks
// agree on the step's loss and whether to stop, and the update; and the evaluation over
// the fixed eval batches.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <string>

#include "common/fault.h"
#include "common/log.h"
#include "train/eval_loss.h"
#include "train/trainer_impl.h"

namespace elastrain {

Result<double> Trainer::TrainStep(int64_t step, int* stop) {
  state_->ZeroGrads();
  const double comm_before = CommSeconds();
  ELASTRAIN_ASSIGN_OR_RETURN(const double local_loss_sum, ForwardBackward(step));
  ELASTRAIN_ASSIGN_OR_RETURN(const double grad_norm, ReduceGradients());
  // The step's last collective comes before its update, so that every rank that applies
  // the update knows the step's loss and stop votes: whoever dies after it, a survivor
  // holds the step's metrics line (RecoverStepLine).
  ELASTRAIN_ASSIGN_OR_RETURN(const double loss_sum, AgreeOnStep(step, local_loss_sum, stop));
  ApplyUpdate(step);
  last_grad_norm_ = grad_norm;
  comm_seconds_ = CommSeconds() - comm_before;
  return loss_sum / static_cast<double>(gb_ * T_);
}

// inputs_, targets_ (rows, T): each sample of T+1 tokens shifted by one.
void Trainer::LoadRows(Split split, const std::vector<int64_t>& indices, int64_t begin, int64_t rows) {
  LoadSampleRows(*data_, split, indices, begin, rows, T_, sample_.data(), inputs_.data(), targets_.data());
}

Result<double> Trainer::ForwardBackward(int64_t step) {
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
  return loss_sum;
}

Result<double> Trainer::ReduceGradients() {
  ELASTRAIN_RETURN_IF_ERROR(state_->ReduceGradients());
  return state_->ClipGradients(cfg_.gradient_clipping_threshold);
}

void Trainer::ApplyUpdate(int64_t step) {
  AdamWOptions opt{cfg_.adam_b1, cfg_.adam_b2, cfg_.adam_eps, cfg_.adam_weight_decay};
  ckpt_->WaitForSnapshot();  // a save in flight must have copied the state first
  if (ctx_.carried) ctx_.carried->ram.Wait();  // and the RAM tier's copy must have gone out
  state_step_ = -1;  // a crash inside the update would leave a mix of two steps
  state_->Update(step + 1, LearningRate(Schedule(), step), opt);
  // The step is done here, on this rank: the update is local, so whatever fails later
  // leaves a consistent state at step + 1.
  completed_step_ = step + 1;
  state_step_ = completed_step_;
  // Fault kill_after_update: the death between a step's update and its metrics line that
  // a kill storm hits only by chance (docs/faults.md).
  fault::CrashIfFires(fault::Point::kKillAfterUpdate,
                      {.generation = ctx_.generation, .rank = ctx_.rank, .step = completed_step_});
}

Result<double> Trainer::AgreeOnStep(int64_t step, double loss_sum, int* stop) {
  // Tensor peers computed the same loss: the world sum counts each batch shard `tensor`
  // times. The same collective carries every rank's stop requests, so that all ranks
  // agree to stop after the same step.
  const int asked = ctx_.control.stop_reasons ? ctx_.control.stop_reasons(step + 1) : 0;
  // The payload: the loss sum, then how many ranks ask for each StopReason, then the
  // checkpoint period the chief proposes (checkpoint_period=auto; 0 from the others), so
  // that every rank saves at the same steps.
  // Then the RAM tier's period the chief proposes (memory_snapshot_period=auto), so that
  // buddies exchange copies at the same steps.
  constexpr size_t kPeriodSlot = 1 + std::size(kAllStopReasons);
  constexpr size_t kSnapshotSlot = kPeriodSlot + 1;
  double payload[kSnapshotSlot + 1] = {loss_sum / mesh_->tensor()};
  for (size_t i = 0; i < std::size(kAllStopReasons); ++i) payload[1 + i] = (asked & kAllStopReasons[i]) ? 1 : 0;
  payload[kPeriodSlot] = is_chief() && period_tuner_ ? static_cast<double>(period_tuner_->period()) : 0;
  payload[kSnapshotSlot] = is_chief() && snapshot_tuner_ ? static_cast<double>(snapshot_tuner_->period()) : 0;
  if (ctx_.world > 1) ELASTRAIN_RETURN_IF_ERROR(world_->AllReduceSum(payload, std::size(payload)));
  if (cfg_.checkpoint_period_auto) ckpt_->SetAutoPeriod(std::llround(payload[kPeriodSlot]));
  if (snapshot_tuner_) snapshot_period_ = std::max<int64_t>(0, std::llround(payload[kSnapshotSlot]));
  *stop = 0;
  for (size_t i = 0; i < std::size(kAllStopReasons); ++i)
    if (payload[1 + i] > 0) *stop |= kAllStopReasons[i];
  return payload[0];
}

Result<double> Trainer::Evaluate() {
  Phase(TrainPhase::kEval);
  const int64_t want = EvalSampleCount(*data_, cfg_.eval_steps, cfg_.per_device_batch_size);
  std::vector<int64_t> idx;
  auto [b, e] = Sampler::ShareRange(want, batch_shard_, mesh_->batch_shards());
  for (int64_t i = b; i < e; ++i) idx.push_back(i);
  ELASTRAIN_ASSIGN_OR_RETURN(double loss_sum,
                             EvalLossSum(*model_, state_->params(), *data_, idx, MicroBatches(want),
                                         cfg_.per_device_batch_size,
                                         [&] { return NameLostPeers(model_->comm_status()); }));
  loss_sum /= mesh_->tensor();
  if (ctx_.world > 1) ELASTRAIN_RETURN_IF_ERROR(world_->AllReduceSum(&loss_sum, 1));
  Phase(TrainPhase::kTrain);
  return loss_sum / static_cast<double>(want * T_);
}

}  // namespace elastrain
