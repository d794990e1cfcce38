// TrainState::Rebind: a state carried into the next generation (a data-parallel resize or
// a survivor of a failure) starts it with zero working buffers, whatever step the last
// generation died in.
#include <gtest/gtest.h>

#include <algorithm>

#include "plan/mesh.h"
#include "model/model_config.h"
#include "train/train_state.h"

namespace elastrain {
namespace {

TEST(TrainStateRebind, AnFsdpStateDropsTheGradientsOfAStepThatDiedMidBackward) {
  const ModelConfig model = ModelPreset("tiny").value();
  const Mesh mesh(1, 2, 1);
  TrainState st(model, mesh, mesh.Coords(1), RankGroups{});
  const int64_t n = st.local_size();
  // A backward that failed before reducing these units leaves their gradients behind.
  std::fill(st.grads(), st.grads() + n, 0.5f);
  std::fill(st.params(), st.params() + n, 0.25f);
  ASSERT_TRUE(st.Rebind(mesh, mesh.Coords(1), RankGroups{}).ok());
  EXPECT_EQ(std::count(st.grads(), st.grads() + n, 0.f), n);
  EXPECT_EQ(std::count(st.params(), st.params() + n, 0.f), n);
}

TEST(TrainStateRebind, AReplicaKeepsItsValues) {
  const ModelConfig model = ModelPreset("tiny").value();
  const Mesh mesh(2, 1, 1);
  TrainState st(model, mesh, mesh.Coords(0), RankGroups{});
  std::fill(st.shard_params(), st.shard_params() + st.shard_size(), 0.25f);
  ASSERT_TRUE(st.Rebind(Mesh(4, 1, 1), Mesh(4, 1, 1).Coords(3), RankGroups{}).ok());
  EXPECT_EQ(std::count(st.shard_params(), st.shard_params() + st.shard_size(), 0.25f), st.shard_size());
}

}  // namespace
}  // namespace elastrain
