// The device mesh (plan/mesh.h) and sharding (plan/sharding.h): resolution of the ici_*
// keys for world sizes 1..8, -1 fill, the automatic rule, every error naming its keys,
// rank <-> coordinates, group membership, tensor-parallel slices of real layouts and
// FSDP shard ranges.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "plan/mesh.h"
#include "plan/sharding.h"
#include "config/config.h"
#include "model/flops.h"
#include "model/layout.h"

namespace elastrain {
namespace {
using ::testing::HasSubstr;

ModelConfig Preset(const char* name) {
  auto m = ModelPreset(name);
  EXPECT_TRUE(m.ok()) << name;
  return m.value();
}

// tiny with 8 kv heads: tensor degrees 1, 2, 4, 8 divide it; 3, 5, 6, 7 do not.
ModelConfig Tiny8() {
  ModelConfig m = Preset("tiny");
  m.num_kv_heads = 8;
  return m;
}

const AutoMeshBudget kNoBudget{};  // explicit meshes never read it

std::string MeshError(int world, int64_t d, int64_t f, int64_t t, const ModelConfig& m = Tiny8()) {
  auto r = ResolveMesh(world, d, f, t, m, kNoBudget);
  EXPECT_FALSE(r.ok()) << "world " << world << " " << d << "x" << f << "x" << t;
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << "one line";
  return r.status().message();
}

void ExpectMesh(const Result<Mesh>& r, int d, int f, int t) {
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->data(), d);
  EXPECT_EQ(r->fsdp(), f);
  EXPECT_EQ(r->tensor(), t);
}

TEST(MeshResolve, EveryFactorisationOfWorldSizesOneToEight) {
  const ModelConfig m = Tiny8();
  for (int w = 1; w <= 8; ++w)
    for (int d = 1; d <= w; ++d)
      for (int f = 1; f <= w; ++f)
        for (int t = 1; t <= w; ++t) {
          SCOPED_TRACE(testing::Message() << "world " << w << " mesh " << d << "x" << f << "x" << t);
          if (d * f * t != w) {
            EXPECT_THAT(MeshError(w, d, f, t), HasSubstr(fmt::format("= {} != num_workers={}", d * f * t, w)));
            continue;
          }
          if (8 % t != 0) {
            EXPECT_THAT(MeshError(w, d, f, t), HasSubstr(fmt::format("ici_tensor_parallelism={} does not divide", t)));
            continue;
          }
          ExpectMesh(ResolveMesh(w, d, f, t, m, kNoBudget), d, f, t);
          // Any one axis as -1 fills to the same mesh; axes of 1 may be left out (0).
          ExpectMesh(ResolveMesh(w, -1, f, t, m, kNoBudget), d, f, t);
          ExpectMesh(ResolveMesh(w, d, -1, t, m, kNoBudget), d, f, t);
          ExpectMesh(ResolveMesh(w, d, f, -1, m, kNoBudget), d, f, t);
          ExpectMesh(ResolveMesh(w, d == 1 ? 0 : d, f == 1 ? 0 : f, t == 1 ? 0 : t, m, kNoBudget), d, f, t);
        }
}

TEST(MeshResolve, MinusOneFillsWhatIsLeft) {
  const ModelConfig m = Tiny8();
  ExpectMesh(ResolveMesh(6, 2, -1, 0, m, kNoBudget), 2, 3, 1);
  ExpectMesh(ResolveMesh(8, 0, -1, 2, m, kNoBudget), 1, 4, 2);
  ExpectMesh(ResolveMesh(8, -1, 0, 0, m, kNoBudget), 8, 1, 1);
  ExpectMesh(ResolveMesh(4, 0, 0, -1, m, kNoBudget), 1, 1, 4);
  auto r = ResolveMesh(6, 2, -1, 0, m, kNoBudget);
  EXPECT_THAT(r->origin, HasSubstr("ici_fsdp_parallelism=-1 filled as 3"));
  EXPECT_THAT(r->origin, HasSubstr("ici_tensor_parallelism not given: 1"));
}

TEST(MeshResolve, AutomaticRuleBothBranches) {
  const ModelConfig m = Preset("small");
  AutoMeshBudget b{0, 4, 64, false};
  const int64_t state = EstimateTrainingMemory(m, 4, 64, false).total();
  // Fits in 80% of the budget: pure data parallelism.
  b.memory_bytes_per_worker = static_cast<int64_t>(state / kAutoMeshMemoryFraction) + 16;
  for (int w : {2, 3, 8}) {
    auto r = ResolveMesh(w, 0, 0, 0, m, b);
    ExpectMesh(r, w, 1, 1);
    EXPECT_THAT(r->origin, HasSubstr("data parallel"));
  }
  // Does not fit: pure FSDP over every worker.
  b.memory_bytes_per_worker = state;
  for (int w : {2, 3, 8}) {
    auto r = ResolveMesh(w, 0, 0, 0, m, b);
    ExpectMesh(r, 1, w, 1);
    EXPECT_THAT(r->origin, HasSubstr("FSDP"));
  }
  // remat=full shrinks the activations, which can tip the decision back.
  const int64_t remat_state = EstimateTrainingMemory(m, 4, 64, true).total();
  ASSERT_LT(remat_state, state);
  b.memory_bytes_per_worker = static_cast<int64_t>(remat_state / kAutoMeshMemoryFraction) + 16;
  ExpectMesh(ResolveMesh(4, 0, 0, 0, m, b), 1, 4, 1);
  b.remat_full = true;
  ExpectMesh(ResolveMesh(4, 0, 0, 0, m, b), 4, 1, 1);
  ExpectMesh(ResolveMesh(1, 0, 0, 0, m, AutoMeshBudget{}), 1, 1, 1);
}

TEST(MeshResolve, ErrorsNameTheKeysAndValues) {
  EXPECT_THAT(MeshError(4, 2, 2, 2),
              HasSubstr("ici_data_parallelism=2 x ici_fsdp_parallelism=2 x ici_tensor_parallelism=2 = 8 != "
                        "num_workers=4"));
  EXPECT_THAT(MeshError(4, 0, 3, 0), HasSubstr("ici_data_parallelism=1 (not given) x ici_fsdp_parallelism=3 x "
                                               "ici_tensor_parallelism=1 (not given) = 3 != num_workers=4"));
  EXPECT_THAT(MeshError(6, 4, -1, 0),
              HasSubstr("ici_fsdp_parallelism=-1 cannot be filled: num_workers=6 is not divisible by "
                        "ici_data_parallelism=4 x ici_tensor_parallelism=1 (not given) = 4"));
  EXPECT_THAT(MeshError(4, -1, 2, -1), HasSubstr("ici_data_parallelism=-1 and ici_tensor_parallelism=-1: at most one"));
  EXPECT_THAT(MeshError(4, 1, -2, 2), HasSubstr("ici_fsdp_parallelism=-2: expected a positive integer, 0"));
  EXPECT_THAT(MeshError(0, 1, 1, 1), HasSubstr("num_workers=0"));
  EXPECT_THAT(MeshError(4, 1, 1, 1LL << 62), HasSubstr("!= num_workers=4"));  // no overflow
  // Tensor degree against the model: heads, kv heads and MLP rows, each named.
  const ModelConfig small = Preset("small");  // 6 heads, 2 kv heads, mlp 1024
  EXPECT_THAT(MeshError(4, 1, 1, 4, small),
              HasSubstr("ici_tensor_parallelism=4 does not divide base_num_query_heads=6"));
  EXPECT_THAT(MeshError(3, 1, 1, 3, small), HasSubstr("ici_tensor_parallelism=3 does not divide base_num_kv_heads=2"));
  ModelConfig odd_mlp = Tiny8();
  odd_mlp.mlp_dim = 100;
  EXPECT_THAT(MeshError(8, 1, 1, 8, odd_mlp), HasSubstr("ici_tensor_parallelism=8 does not divide base_mlp_dim=100"));
  EXPECT_THAT(MeshError(6, 2, 0, -1, Tiny8()), HasSubstr("ici_tensor_parallelism=-1 (filled as 3) does not divide"));
}

TEST(MeshLayout, RankCoordsRoundTripTensorFastest) {
  for (int d = 1; d <= 3; ++d)
    for (int f = 1; f <= 3; ++f)
      for (int t = 1; t <= 3; ++t) {
        const Mesh mesh(d, f, t);
        for (int r = 0; r < mesh.world_size(); ++r) {
          const MeshCoords c = mesh.Coords(r);
          EXPECT_EQ(mesh.Rank(c), r);
          EXPECT_EQ(r, (c.data * f + c.fsdp) * t + c.tensor);
        }
      }
  const Mesh mesh(2, 2, 2);
  EXPECT_EQ(mesh.Coords(1), (MeshCoords{0, 0, 1}));  // tensor peers are neighbours
  EXPECT_EQ(mesh.Coords(2), (MeshCoords{0, 1, 0}));
  EXPECT_EQ(mesh.Coords(4), (MeshCoords{1, 0, 0}));
  EXPECT_EQ(mesh.ToString(), "data=2 x fsdp=2 x tensor=2 = 8 ranks (rank = (d*2 + f)*2 + t)");
}

TEST(MeshLayout, GroupsPartitionTheWorldAndFixTheRightCoordinates) {
  const Mesh mesh(2, 3, 2);  // 12 ranks
  EXPECT_EQ(mesh.Group(MeshGroup::kTensor, 5), (std::vector<int>{4, 5}));
  EXPECT_EQ(mesh.Group(MeshGroup::kFsdp, 5), (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(mesh.Group(MeshGroup::kData, 5), (std::vector<int>{5, 11}));
  EXPECT_EQ(mesh.Group(MeshGroup::kGradient, 5), (std::vector<int>{1, 3, 5, 7, 9, 11}));
  for (MeshGroup kind : {MeshGroup::kTensor, MeshGroup::kFsdp, MeshGroup::kData, MeshGroup::kGradient}) {
    SCOPED_TRACE(MeshGroupName(kind));
    std::set<std::vector<int>> groups;
    for (int r = 0; r < mesh.world_size(); ++r) {
      const std::vector<int> g = mesh.Group(kind, r);
      EXPECT_TRUE(std::is_sorted(g.begin(), g.end()));
      ASSERT_LT(mesh.GroupRank(kind, r), static_cast<int>(g.size()));
      EXPECT_EQ(g[mesh.GroupRank(kind, r)], r);
      const MeshCoords me = mesh.Coords(r);
      for (int peer : g) {
        const MeshCoords c = mesh.Coords(peer);
        if (kind != MeshGroup::kData && kind != MeshGroup::kGradient) { EXPECT_EQ(c.data, me.data); }
        if (kind != MeshGroup::kFsdp && kind != MeshGroup::kGradient) { EXPECT_EQ(c.fsdp, me.fsdp); }
        if (kind != MeshGroup::kTensor) { EXPECT_EQ(c.tensor, me.tensor); }
      }
      groups.insert(g);
    }
    const size_t group_size = kind == MeshGroup::kTensor ? 2
                              : kind == MeshGroup::kFsdp ? 3
                              : kind == MeshGroup::kData ? 2
                                                         : 6;
    EXPECT_EQ(groups.size() * group_size, 12u);  // disjoint groups that cover the world
  }
}

TEST(MeshSharding, RulesByName) {
  EXPECT_EQ(TensorSplitFor("layers.3.attn.wq"), TensorSplit::kColumn);
  EXPECT_EQ(TensorSplitFor("layers.3.attn.bv"), TensorSplit::kColumn);
  EXPECT_EQ(TensorSplitFor("layers.0.mlp.w_gate"), TensorSplit::kColumn);
  EXPECT_EQ(TensorSplitFor("layers.0.mlp.b_up"), TensorSplit::kColumn);
  EXPECT_EQ(TensorSplitFor("layers.10.attn.wo"), TensorSplit::kRow);
  EXPECT_EQ(TensorSplitFor("layers.10.mlp.w_down"), TensorSplit::kRow);
  for (const char* n : {"layers.1.attn.bo", "layers.1.mlp.b_down", "layers.1.attn_norm.w", "layers.1.mlp_norm.b",
                        "embed.wte", "embed.wpe", "final_norm.w", "lm_head.w"})
    EXPECT_EQ(TensorSplitFor(n), TensorSplit::kReplicated) << n;
}

TEST(MeshSharding, LocalSlicesTileTheGlobalTensors) {
  struct Case {
    const char* model;
    std::vector<int> degrees;
  };
  for (const Case& cs : {Case{"tiny", {1, 2, 4}}, Case{"tiny-gpt2", {1, 2, 4, 8}}, Case{"small", {1, 2}},
                         Case{"llama3-8b", {1, 2, 4, 8}}}) {
    const ModelConfig m = Preset(cs.model);
    const ParamLayout global = BuildParamLayout(m);
    for (int tp : cs.degrees) {
      SCOPED_TRACE(testing::Message() << cs.model << " tensor=" << tp);
      auto local = TensorLocalConfig(m, tp);
      ASSERT_TRUE(local.ok()) << local.status().ToString();
      EXPECT_EQ(local->num_heads * tp, m.num_heads);
      EXPECT_EQ(local->emb_dim, m.emb_dim);
      EXPECT_EQ(local->vocab_size, m.vocab_size);
      const std::vector<TensorSharding> table = ShardingTable(m, tp);
      ASSERT_EQ(table.size(), global.tensors.size());
      int64_t local_sum = 0, replicated = 0, sharded = 0;
      for (size_t i = 0; i < table.size(); ++i) {
        const TensorSharding& s = table[i];
        EXPECT_EQ(s.name, global.tensors[i].name);
        EXPECT_EQ(s.global_shape, global.tensors[i].shape);
        int64_t local_size = 1;
        for (int64_t d : s.local_shape) local_size *= d;
        local_sum += local_size;
        (s.split == TensorSplit::kReplicated ? replicated : sharded) += global.tensors[i].size;
        // The slices of tensor ranks 0..tp-1 are adjacent and cover the split dim exactly.
        const int dim = std::max(s.split_dim, 0);
        int64_t next = 0;
        for (int t = 0; t < tp; ++t) {
          const IndexRange r = s.GlobalSlice(t);
          if (s.split_dim < 0) {
            EXPECT_EQ(r, (IndexRange{0, s.global_shape[0]})) << s.name;
            continue;
          }
          EXPECT_EQ(r.begin, next) << s.name;
          EXPECT_EQ(r.size(), s.local_shape[dim]) << s.name;
          next = r.end;
        }
        if (s.split_dim >= 0) { EXPECT_EQ(next, s.global_shape[dim]) << s.name; }
      }
      EXPECT_EQ(BuildParamLayout(local.value()).total, local_sum);
      EXPECT_EQ(local_sum, replicated + sharded / tp);  // N_tp_local
    }
  }
  EXPECT_FALSE(TensorLocalConfig(Preset("small"), 4).ok());
}

TEST(MeshSharding, TableNamesTheSplits) {
  const std::string text = ShardingTableToString(ShardingTable(Preset("llama3-8b"), 4), 1);
  EXPECT_THAT(text, HasSubstr("layers.0.attn.wq"));
  EXPECT_THAT(text, HasSubstr("(4096, 4096)       column (dim 0)   (1024, 4096)"));
  EXPECT_THAT(text, HasSubstr("(layers 1..31 follow the same rules)"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("layers.1.")));
}

TEST(MeshFsdp, ShardRangesCoverThePaddedBufferExactly) {
  for (int64_t total : {0, 1, 7, 8, 9, 1000, 12345}) {
    for (int fsdp = 1; fsdp <= 8; ++fsdp) {
      const int64_t padded = FsdpPaddedSize(total, fsdp);
      EXPECT_EQ(padded % fsdp, 0);
      EXPECT_GE(padded, total);
      EXPECT_LT(padded - total, fsdp);
      int64_t next = 0;
      for (int f = 0; f < fsdp; ++f) {
        const IndexRange r = FsdpShardRange(total, f, fsdp);
        EXPECT_EQ(r.begin, next);
        EXPECT_EQ(r.size(), padded / fsdp);
        next = r.end;
      }
      EXPECT_EQ(next, padded);
    }
  }
}

TEST(MeshPlan, Llama3_8bFiguresByHand) {
  const ModelConfig m = Preset("llama3-8b");
  const Mesh mesh(1, 8, 4);
  const PlanBatch batch{256, 8, 128, false};
  const RankPlan p = PlanRank(mesh, m, batch);
  // 2 V C (embedding + head) + C (final norm) + L (2 C + (wq + wk + wv + wo + 3 mlp) / 4)
  const int64_t V = 128256, C = 4096, L = 32, F = 14336;
  const int64_t per_layer = 2 * C + (C * C + 2 * 1024 * C + C * C + 3 * F * C) / 4;
  EXPECT_EQ(p.params_tp_local, 2 * V * C + C + L * per_layer);
  EXPECT_EQ(p.params_tp_local, 2795769856);
  EXPECT_EQ(p.params_per_rank, 2795769856 / 8);
  EXPECT_EQ(p.param_bytes, 4 * p.params_per_rank);
  EXPECT_EQ(p.optimizer_bytes, 8 * p.params_per_rank);
  EXPECT_EQ(p.batch_rows_per_rank, 32);
  EXPECT_EQ(p.micro_batches, 4);
  EXPECT_DOUBLE_EQ(p.model_flops_per_rank, TrainingFlopsPerToken(m, 128) * 256 * 128 / 32);
  EXPECT_GT(p.rank_flops, p.model_flops_per_rank);  // the replicated head
  ASSERT_EQ(p.collectives.size(), 3u);              // tensor allreduce, fsdp allgather + reduce-scatter
  EXPECT_EQ(p.collectives[0].calls, 4 * L * 4);
  EXPECT_EQ(p.collectives[0].payload_bytes, 4 * 8 * 128 * C);
  EXPECT_EQ(p.collectives[1].payload_bytes, 4 * p.params_tp_local);
}

TEST(MeshPlan, DataParallelAllreducesTheGradientOnce) {
  const RankPlan p = PlanRank(Mesh(4, 1, 1), Preset("tiny"), PlanBatch{32, 8, 16, false});
  ASSERT_EQ(p.collectives.size(), 1u);
  EXPECT_EQ(p.collectives[0].axis, MeshAxis::kData);
  EXPECT_EQ(p.collectives[0].calls, 1);
  EXPECT_EQ(p.collectives[0].payload_bytes, 4 * Preset("tiny").NumParams());
  EXPECT_EQ(p.collectives[0].sent_bytes, p.collectives[0].payload_bytes * 2 * 3 / 4);
  EXPECT_TRUE(PlanRank(Mesh(1, 1, 1), Preset("tiny"), PlanBatch{8, 8, 16, false}).collectives.empty());
}

TEST(MeshConfig, KeysLoadValidateAndResolve) {
  auto c = LoadConfig("", {"model_name=llama3-8b", "num_workers=32", "ici_fsdp_parallelism=8",
                           "ici_tensor_parallelism=4"}, nullptr);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->ici_data_parallelism, 0);
  EXPECT_DOUBLE_EQ(c->collective_timeout, 60);
  ExpectMesh(ResolveMesh(static_cast<int>(c->num_workers), c->ici_data_parallelism, c->ici_fsdp_parallelism,
                         c->ici_tensor_parallelism, c->model, kNoBudget),
             1, 8, 4);
  auto err = [](std::vector<std::string> o) {
    auto r = LoadConfig("", o, nullptr);
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_THAT(err({"num_workers=0"}), HasSubstr("num_workers=0: expected a positive integer"));
  EXPECT_THAT(err({"ici_tensor_parallelism=-3"}), HasSubstr("ici_tensor_parallelism=-3: expected a positive"));
  EXPECT_THAT(err({"ici_data_parallelism=-1", "ici_fsdp_parallelism=-1"}), HasSubstr("at most one mesh axis"));
  EXPECT_THAT(err({"collective_timeout=0"}), HasSubstr("collective_timeout=0: expected a number of seconds > 0"));
}

}  // namespace
}  // namespace elastrain
