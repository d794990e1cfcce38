// The state carried between generations: what a generation takes over from the
// previous one (Trainer::TakeOrBuildModel, TakeOrBuildState), what it hands back
// (Trainer::HandBack), and what a worker builds before its first (PrepareCarriedState).
#include "train/carried_state.h"

#include "config/derived.h"
#include "train/trainer_impl.h"

namespace elastrain {

CarriedState::CarriedState() = default;
CarriedState::~CarriedState() = default;

// The pieces a worker's first generation will most likely need, built while it waits.
Status PrepareCarriedState(const TrainConfig& cfg, CarriedState* c) {
  ELASTRAIN_ASSIGN_OR_RETURN(Mesh mesh, ResolveMeshForConfig(cfg, cfg.max_workers));
  ELASTRAIN_ASSIGN_OR_RETURN(ModelConfig local, TensorLocalConfig(cfg.model, mesh.tensor()));
  c->model = std::make_unique<Transformer<float>>(local, cfg.per_device_batch_size, cfg.max_target_length,
                                                  cfg.remat_policy);
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

Status Trainer::TakeOrBuildModel() {
  CarriedState* carried = ctx_.carried;
  if (carried && carried->model && carried->model_tensor == mesh_->tensor()) {
    model_ = std::move(carried->model);
  } else {
    if (carried) carried->model.reset();
    model_ = std::make_unique<Transformer<float>>(local_model_, cfg_.per_device_batch_size, T_,
                                                  cfg_.remat_policy);
  }
  model_->SetTensorParallel(coords_.tensor, nullptr);
  if (mesh_->tensor() > 1) {
    ProcessGroup* tg = tensor_.get();
    model_->SetTensorParallel(coords_.tensor, [tg](float* d, int64_t n) { return tg->AllReduceSum(d, n); });
  }
  model_->SetCancelCheck(ctx_.control.aborted);
  return Status::OK();
}

Status Trainer::TakeOrBuildState() {
  CarriedState* carried = ctx_.carried;
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
  return Status::OK();
}

void Trainer::HandBack() {
  CarriedState* c = ctx_.carried;
  if (!c) return;
  c->line = line_;
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

}  // namespace elastrain
