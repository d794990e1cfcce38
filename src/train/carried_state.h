// What a worker process keeps between generations (the training state, the model and
// the checkpoint snapshot buffer), and how a generation takes it over and hands it back.
#pragma once

#include <cstdint>
#include <memory>

#include "common/memory.h"
#include "common/status.h"
#include "config/config.h"
#include "train/ram_tier_copies.h"
#include "train/step_line.h"
#include "wire/protocol.h"

namespace elastrain {

class TrainState;
class CheckpointPeriodTuner;
class SnapshotPeriodTuner;
template <typename T>
class Transformer;

// What a worker process keeps between generations: the training state, the model (its
// activation buffers) and the checkpoint snapshot buffer. A generation reuses each when
// its shapes allow -- a survivor of a data-parallel resize then allocates and faults in
// nothing, and needs no copy of its state -- and hands them back when it ends.
struct CarriedState {
  CarriedState();
  ~CarriedState();
  CarriedState(const CarriedState&) = delete;
  CarriedState& operator=(const CarriedState&) = delete;
  // Steps done in `state` when it is a full replica (pure data-parallel mesh: every rank
  // owns the whole state) whose values are intact; -1 otherwise.
  int64_t step = -1;
  bool valid() const { return step >= 0 && state != nullptr; }
  std::unique_ptr<TrainState> state;
  // A sharded `state`'s own shard as a RAM-tier copy: the generation whose layout it has,
  // its shard id there and the step its values hold (-1: none, or being overwritten).
  int64_t shard_generation = -1;
  int shard_id = -1;
  int64_t shard_step = -1;
  // The copies of other ranks' shards this process holds (the RAM tier).
  RamTierCopies ram;
  std::unique_ptr<Transformer<float>> model;
  int model_tensor = 0;  // the tensor degree `model` was built for
  std::shared_ptr<FloatBuffer> snapshot;
  // checkpoint_period=auto: the period and the save and step times this process measured.
  std::unique_ptr<CheckpointPeriodTuner> period_tuner;
  // memory_snapshot_period=auto: the RAM tier's period and the step times with and
  // without a copy that this process measured.
  std::unique_ptr<SnapshotPeriodTuner> snapshot_tuner;
  // The metrics line of the newest logged step this process applied (or was handed):
  // the chief may have died before writing it (train/step_line.h).
  StepLine line;
};

// What the process holds of one sharded generation's state for the controller: its own
// shard and the RAM tier's copies of the same generation (*generation -1: nothing).
void HeldCopies(const CarriedState& carried, int64_t* generation, std::vector<HeldCopy>* copies);

// Builds, while a worker waits for its first assignment, what its first generation
// will most likely need (the model, and a data-parallel state with its pages faulted
// in), so that a replacement worker joins a recovery as fast as a survivor.
Status PrepareCarriedState(const TrainConfig& cfg, CarriedState* carried);

}  // namespace elastrain
