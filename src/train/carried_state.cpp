// The state carried between generations: what a generation takes over from the
// previous one (Trainer::TakeOrBuildModel, TakeOrBuildState), what it hands back
// (Trainer::HandBack), and what a worker builds before its first (PrepareCarriedState).
#include "train/carried_state.h"

#include "plan/mesh_for_config.h"
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
      c->snapshot = std::make_shared<FloatBuffer>(CheckpointSnapshotFloats(c->state->shard_size()));
  }
  c->step = -1;
  return Status::OK();
}

void HeldCopies(const CarriedState& c, int64_t* generation, std::vector<HeldCopy>* copies) {
  copies->clear();
  *generation = c.shard_generation >= 0 ? c.shard_generation : c.ram.generation();
  if (*generation < 0) return;
  if (c.state && c.shard_step >= 0 && c.shard_generation == *generation) copies->push_back({c.shard_id, c.shard_step});
  if (c.ram.generation() == *generation)
    for (const HeldCopy& h : c.ram.Held()) copies->push_back(h);
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
    rebound_ = true;
    state_step_ = carried->step;  // its values are intact until this generation overwrites them
  } else {
    // A restore from peers may need this rank's old shard: keep it until the restore ends.
    // Otherwise free it before allocating the new one.
    if (carried && carried->state && ctx_.restore.kind == RestoreSpec::Kind::kPeers &&
        carried->shard_generation == ctx_.restore.old_generation && carried->shard_step == ctx_.restore.step)
      old_state_ = std::move(carried->state);
    if (carried) carried->state.reset();
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
  // A failed generation's copy in flight gets a moment to land (its peers may be alive),
  // not a collective timeout.
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(cfg_.collective_timeout * 1000));
  c->ram.Stop(clean_exit_ ? timeout : std::min(timeout, std::chrono::milliseconds(2000)));
  if (ckpt_) {
    if (!clean_exit_) ckpt_->Abort();
    c->snapshot = ckpt_->snapshot_buffer();
    ckpt_.reset();  // joins a save in flight before the buffer is reused
  }
  if (period_tuner_) c->period_tuner = std::move(period_tuner_);
  if (snapshot_tuner_) c->snapshot_tuner = std::move(snapshot_tuner_);
  if (model_) {
    c->model = std::move(model_);
    c->model_tensor = mesh_->tensor();
  }
  if (old_state_) {
    // The restore did not finish: the old shard is still what this process holds.
    c->state = std::move(old_state_);
    c->step = -1;
    state_.reset();
    return;
  }
  if (state_) {
    c->step = holds_replica() ? state_step_ : -1;
    if (restored_) {  // else the carried shard_* still describe what a rebound state holds
      c->shard_generation = holds_replica() ? -1 : ctx_.generation;
      c->shard_id = ShardId(coords_.fsdp, coords_.tensor, mesh_->tensor());
      c->shard_step = holds_replica() ? -1 : state_step_;
    }
    c->state = std::move(state_);
  }
}

}  // namespace elastrain
