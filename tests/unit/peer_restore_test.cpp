// The restore from peers' RAM without processes (train/peer_restore.h, train/shard_pieces.h):
// old shards filled from a synthetic global state, the plan applied exactly as
// train/restore_peers.cpp applies it (pack per transfer from the source shard, unpack
// into the destination rank's buffers), and every new rank's buffers checked against
// what ShardOf says that rank holds. ShardOf itself is checked against the data a real
// TrainState holds.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "ckpt/format.h"
#include "plan/mesh.h"
#include "model/layout.h"
#include "model/model_config.h"
#include "train/peer_restore.h"
#include "train/shard_pieces.h"
#include "train/train_state.h"
#include "transformer/transformer.h"

namespace elastrain {
namespace {

using ::testing::HasSubstr;

constexpr int kKinds = 3;                 // params, adam_m, adam_v
constexpr float kUnwritten = -12345.0f;   // what a buffer holds where nothing was written
using ShardBuffers = std::array<std::vector<float>, kKinds>;

// The synthetic global state: distinct in every kind and global flat index, and exact in
// float for models under 2^22 parameters.
float Value(int kind, int64_t global_index) {
  const float g = static_cast<float>(global_index);
  return kind == 0 ? g : kind == 1 ? -g - 1.0f : g + 0.5f;
}

// The global flat index of element `i` (of its local view) of piece `p`.
int64_t GlobalFlat(const ParamLayout& global, const ckpt::PieceSpec& p, int64_t i) {
  const ParamTensor* t = global.Find(p.tensor);
  EXPECT_NE(t, nullptr) << p.tensor;
  return (t ? t->offset : 0) + ckpt::GlobalIndex(p, i);
}

// The old shards of an fsdp x tensor mesh, by shard id (fsdp coordinate * tensor +
// tensor coordinate), each holding what the old rank held (replicated tensors at every
// tensor rank), padding left unwritten.
std::vector<ShardBuffers> OldShards(const ModelConfig& model, int fsdp, int tensor) {
  const ParamLayout global = BuildParamLayout(model);
  const Mesh mesh(1, fsdp, tensor);
  std::vector<ShardBuffers> out(static_cast<size_t>(fsdp * tensor));
  for (int f = 0; f < fsdp; ++f)
    for (int t = 0; t < tensor; ++t) {
      const ShardContents c = ShardOf(model, mesh, MeshCoords{0, f, t}, /*for_saving=*/false);
      ShardBuffers& b = out[static_cast<size_t>(f * tensor + t)];
      for (int k = 0; k < kKinds; ++k) {
        b[k].assign(static_cast<size_t>(c.shard_size), kUnwritten);
        for (size_t j = 0; j < c.pieces.size(); ++j)
          for (int64_t i = 0; i < c.pieces[j].size(); ++i)
            b[k][c.offsets[j] + i] = Value(k, GlobalFlat(global, c.pieces[j], c.pieces[j].flat_begin + i));
      }
    }
  return out;
}

// Applies `plan` as Trainer::RestoreFromPeers does; returns each new rank's buffers.
// Every run is bounds-checked against the buffers it reads and writes.
std::vector<ShardBuffers> ApplyPlan(const ModelConfig& model, const Mesh& mesh, const PeerRestorePlan& plan,
                                    const std::vector<ShardBuffers>& old, const std::vector<int>& sources) {
  std::vector<ShardBuffers> out(static_cast<size_t>(mesh.world_size()));
  for (int r = 0; r < mesh.world_size(); ++r)
    for (auto& b : out[r])
      b.assign(static_cast<size_t>(ShardOf(model, mesh, mesh.Coords(r), false).shard_size), kUnwritten);
  for (const PeerTransfer& t : plan.transfers) {
    const std::string where = "transfer of shard " + std::to_string(t.shard) + " to rank " + std::to_string(t.to);
    if (t.shard < 0 || t.shard >= static_cast<int>(old.size()) || t.to < 0 || t.to >= mesh.world_size()) {
      ADD_FAILURE() << where << ": out of range";
      continue;
    }
    EXPECT_EQ(t.from, sources[t.shard]) << where;
    const ShardBuffers& src = old[t.shard];
    ShardBuffers& dst = out[t.to];
    // Pack (what a sender puts on the wire) ...
    const int64_t f = t.floats();
    std::vector<float> wire;
    for (int k = 0; k < kKinds; ++k)
      for (const ShardRunCopy& c : t.runs) {
        if (c.n <= 0 || c.src < 0 || c.src + c.n > static_cast<int64_t>(src[k].size())) {
          ADD_FAILURE() << where << ": run [" << c.src << ", +" << c.n << ") outside the old shard of "
                        << src[k].size();
          return out;
        }
        wire.insert(wire.end(), src[k].begin() + c.src, src[k].begin() + c.src + c.n);
      }
    EXPECT_EQ(static_cast<int64_t>(wire.size()), kKinds * f) << where;
    // ... and unpack (what the receiver does with it).
    const float* in = wire.data();
    for (int k = 0; k < kKinds; ++k)
      for (const ShardRunCopy& c : t.runs) {
        if (c.dst < 0 || c.dst + c.n > static_cast<int64_t>(dst[k].size())) {
          ADD_FAILURE() << where << ": run [" << c.dst << ", +" << c.n << ") outside the new shard of "
                        << dst[k].size();
          return out;
        }
        std::copy_n(in, c.n, dst[k].begin() + c.dst);
        in += c.n;
      }
  }
  return out;
}

// Counts the elements of rank r's pieces whose value is not the global state's, and
// reports the first few.
int64_t WrongElements(const ModelConfig& model, const Mesh& mesh, int r, const ShardBuffers& got) {
  const ParamLayout global = BuildParamLayout(model);
  const ShardContents want = ShardOf(model, mesh, mesh.Coords(r), /*for_saving=*/false);
  int64_t wrong = 0;
  for (int k = 0; k < kKinds; ++k)
    for (size_t j = 0; j < want.pieces.size(); ++j)
      for (int64_t i = 0; i < want.pieces[j].size(); ++i) {
        const float expected = Value(k, GlobalFlat(global, want.pieces[j], want.pieces[j].flat_begin + i));
        const float actual = got[k][want.offsets[j] + i];
        if (actual == expected) continue;
        if (++wrong <= 3)
          ADD_FAILURE() << "rank " << r << " kind " << k << " tensor " << want.pieces[j].tensor << " element "
                        << i << ": " << actual << ", expected " << expected;
      }
  return wrong;
}

struct OldMesh {
  int fsdp, tensor;
};

class PeerRestorePlanTest : public ::testing::TestWithParam<const char*> {};

// Every old layout onto every new one: each new rank ends with exactly its shard of the
// global state, in all three kinds, whoever served each old shard.
TEST_P(PeerRestorePlanTest, EveryNewRankReceivesExactlyItsShardFromAnyOldLayout) {
  const ModelConfig model = ModelPreset(GetParam()).value();
  for (const OldMesh old : {OldMesh{4, 1}, OldMesh{2, 2}, OldMesh{3, 1}}) {
    const std::vector<ShardBuffers> old_shards = OldShards(model, old.fsdp, old.tensor);
    for (const Mesh& mesh : {Mesh(1, 4, 1), Mesh(1, 3, 1), Mesh(2, 2, 1), Mesh(1, 2, 2), Mesh(1, 1, 1),
                             Mesh(1, 1, 2)}) {
      SCOPED_TRACE("old fsdp=" + std::to_string(old.fsdp) + " tensor=" + std::to_string(old.tensor) +
                   " -> new " + mesh.ToString());
      // Sources in reverse (shard s from rank (shards-1-s) mod world), so that most shards
      // are served by a rank other than the one at their old coordinates.
      const int shards = old.fsdp * old.tensor;
      std::vector<int> sources;
      for (int s = 0; s < shards; ++s) sources.push_back((shards - 1 - s) % mesh.world_size());
      auto plan = PlanPeerRestore(model, old.fsdp, old.tensor, mesh, sources);
      ASSERT_TRUE(plan.ok()) << plan.status().ToString();
      EXPECT_EQ(plan->old_shard_size, static_cast<int64_t>(old_shards[0][0].size()));
      // Ordered by (to, shard), each pair at most once.
      for (size_t i = 1; i < plan->transfers.size(); ++i) {
        const PeerTransfer &a = plan->transfers[i - 1], &b = plan->transfers[i];
        EXPECT_LT(std::make_tuple(a.to, a.shard), std::make_tuple(b.to, b.shard)) << "transfer " << i;
      }
      const std::vector<ShardBuffers> got = ApplyPlan(model, mesh, *plan, old_shards, sources);
      for (int r = 0; r < mesh.world_size(); ++r) EXPECT_EQ(WrongElements(model, mesh, r, got[r]), 0) << "rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, PeerRestorePlanTest, ::testing::Values("tiny", "tiny-gpt2"),
                         [](const auto& info) { return std::string(info.param) == "tiny" ? "Llama" : "Gpt2"; });

// ShardOf describes a rank that this process never was. It must describe the data a
// real TrainState at those coordinates holds: every piece's elements are the global
// parameters at the piece's global indices, and the shard sizes agree.
TEST(ShardOf, DescribesTheDataARealTrainStateHolds) {
  const ModelConfig model = ModelPreset("tiny").value();
  const ParamLayout global = BuildParamLayout(model);
  constexpr uint64_t kSeed = 1234;
  std::vector<float> init(static_cast<size_t>(global.total));
  InitParams(model, global, kSeed, init.data());
  for (const Mesh& mesh : {Mesh(1, 3, 1), Mesh(2, 2, 2), Mesh(1, 1, 2), Mesh(1, 4, 1)}) {
    for (int r = 0; r < mesh.world_size(); ++r) {
      SCOPED_TRACE(mesh.ToString() + " rank " + std::to_string(r));
      TrainState state(model, mesh, mesh.Coords(r), RankGroups{});  // no communication
      state.InitParams(kSeed);
      const ShardContents c = ShardOf(model, mesh, mesh.Coords(r), /*for_saving=*/false);
      ASSERT_EQ(c.shard_size, state.shard_size());
      std::vector<int64_t> offsets;
      const std::vector<ckpt::PieceSpec> pieces =
          PiecesOf(state.OwnedRuns(), state.local_layout(), state.sharding(), state.tensor_rank(), false, &offsets);
      ASSERT_EQ(c.pieces.size(), pieces.size());
      EXPECT_EQ(c.offsets, offsets);
      int64_t held = 0, wrong = 0;
      for (size_t j = 0; j < c.pieces.size(); ++j) {
        const ckpt::PieceSpec &a = c.pieces[j], &b = pieces[j];
        EXPECT_EQ(std::tie(a.tensor, a.global_shape, a.tp_dim, a.tp_begin, a.tp_end, a.flat_begin, a.flat_end),
                  std::tie(b.tensor, b.global_shape, b.tp_dim, b.tp_begin, b.tp_end, b.flat_begin, b.flat_end))
            << "piece " << j;
        held += a.size();
        for (int64_t i = 0; i < a.size(); ++i)
          wrong += state.shard_params()[c.offsets[j] + i] != init[GlobalFlat(global, a, a.flat_begin + i)];
      }
      EXPECT_EQ(wrong, 0);
      // The pieces fill the shard but for the padding of the last fsdp rank's chunks.
      EXPECT_LE(held, c.shard_size);
      if (mesh.fsdp() == 1) {
        EXPECT_EQ(held, c.shard_size);
      }
    }
  }
}

TEST(PlanPeerRestore, BadInputsAreRefusedWithoutACrash) {
  const ModelConfig tiny = ModelPreset("tiny").value();
  const Mesh two(1, 2, 1);
  // Wrong number of sources for 2 x 2 shards.
  auto r = PlanPeerRestore(tiny, 2, 2, two, {0, 1, 0});
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("3 sources"));
  EXPECT_EQ(PlanPeerRestore(tiny, 2, 2, two, {}).status().code(), StatusCode::kInvalidArgument);
  // A source outside the new world.
  r = PlanPeerRestore(tiny, 2, 2, two, {0, 1, 2, 0});
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("source rank 2 outside [0, 2)"));
  EXPECT_EQ(PlanPeerRestore(tiny, 2, 2, two, {0, -1, 1, 0}).status().code(), StatusCode::kInvalidArgument);
  // Old degrees that cannot have run: tiny has 8 heads and 4 kv heads, not divisible by 3.
  r = PlanPeerRestore(tiny, 1, 3, two, {0, 1, 0});
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  EXPECT_EQ(PlanPeerRestore(tiny, 0, 1, two, {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanPeerRestore(tiny, 2, 0, two, {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanPeerRestore(tiny, -2, -1, two, {0, 1}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace elastrain
