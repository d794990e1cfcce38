// Checkpoint pieces written from one fake mesh (tensor x fsdp) and read back for
// another, exactly; the safetensors files parsed independently of the library.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "cli/commands.h"
#include "plan/sharding.h"
#include "common/files.h"
#include "model/layout.h"
#include "test_dirs.h"

namespace elastrain::ckpt {
namespace {

namespace fs = std::filesystem;


// Distinct, exactly representable values per kind and global flat index.
float Value(StateKind k, int64_t global_flat) {
  return static_cast<float>((global_flat * 37 + 11) % 100003) + 0.25f * static_cast<int>(k);
}

// The global tensor, written out independently of ckpt/format (plain loops).
std::vector<float> GlobalValues(const ParamTensor& t, StateKind k) {
  std::vector<float> v(t.size);
  for (int64_t i = 0; i < t.size; ++i) v[i] = Value(k, t.offset + i);
  return v;
}
// The tensor-parallel local view: dim 0 rows [b, e) or dim 1 columns [b, e).
std::vector<float> LocalView(const std::vector<float>& g, const std::vector<int64_t>& shape, int dim, int64_t b, int64_t e) {
  if (dim < 0) return g;
  const int64_t inner = shape.size() > 1 ? shape[1] : 1;
  std::vector<float> out;
  if (dim == 0) return std::vector<float>(g.begin() + b * inner, g.begin() + e * inner);
  for (int64_t r = 0; r < shape[0]; ++r)
    for (int64_t c = b; c < e; ++c) out.push_back(g[r * shape[1] + c]);
  return out;
}

struct FakeRank {
  std::vector<PieceSpec> pieces;
  std::vector<std::vector<float>> data[3];  // per kind, per piece
};

// What rank (t, f) of a tensor x fsdp mesh owns: its fsdp chunk of the tensor-local flat
// buffer, cut at tensor boundaries. Replicated tensors come from tensor rank 0 only.
FakeRank MakeRank(const ModelConfig& m, int tp, int t, int fsdp, int f) {
  const ParamLayout global = BuildParamLayout(m);
  const ParamLayout local = BuildParamLayout(TensorLocalConfig(m, tp).value());
  const IndexRange own = FsdpShardRange(local.total, f, fsdp);
  FakeRank r;
  for (const TensorSharding& s : ShardingTable(m, tp)) {
    const ParamTensor* lt = local.Find(s.name);
    const int64_t b = std::max(own.begin, lt->offset), e = std::min(own.end, lt->offset + lt->size);
    if (b >= e || (s.split_dim < 0 && t != 0)) continue;
    const IndexRange slice = s.GlobalSlice(t);
    PieceSpec p{s.name, s.global_shape, s.split_dim, slice.begin, slice.end, b - lt->offset, e - lt->offset};
    r.pieces.push_back(p);
    for (StateKind k : kAllKinds) {
      std::vector<float> view = LocalView(GlobalValues(*global.Find(s.name), k), s.global_shape, s.split_dim,
                                          slice.begin, slice.end);
      r.data[static_cast<int>(k)].emplace_back(view.begin() + p.flat_begin, view.begin() + p.flat_end);
    }
  }
  return r;
}

// Saves a full fake checkpoint from a tp x fsdp mesh; returns its directory.
std::string SaveFake(const std::string& run, int64_t step, const ModelConfig& m, int tp, int fsdp) {
  const std::string dir = CheckpointDir(run, step);
  Manifest man;
  man.step = step;
  man.config_yaml = "base_emb_dim: 64\nvocab_size: 256\ndecoder_block: llama\nsteps: 9\n";
  man.mesh = {1, fsdp, tp, tp * fsdp};
  man.data = {1234, 0, step, step * 8};
  man.rng_state = "{\"philox\": 7}";
  for (int t = 0; t < tp; ++t)
    for (int f = 0; f < fsdp; ++f) {
      const FakeRank r = MakeRank(m, tp, t, fsdp, f);
      for (StateKind k : kAllKinds) {
        std::vector<const float*> ptrs;
        for (const auto& d : r.data[static_cast<int>(k)]) ptrs.push_back(d.data());
        auto info = WriteShardFile(dir + "/" + ShardFileName(k, t * fsdp + f), k, r.pieces, ptrs);
        EXPECT_TRUE(info.ok()) << info.status().ToString();
        // Through the exchange text, as the trainer moves it between ranks.
        auto back = ShardFileInfoFromJson(ShardFileInfoToJson({*info}));
        EXPECT_TRUE(back.ok()) << back.status().ToString();
        EXPECT_TRUE(man.AddShard(back->at(0)).ok());
      }
    }
  EXPECT_TRUE(WriteManifest(dir, man).ok());
  EXPECT_TRUE(Commit(dir).ok());
  EXPECT_TRUE(SetLatest(run, step).ok());
  return dir;
}

ModelConfig Preset(const char* name) { return ModelPreset(name).value(); }

TEST(CkptFormat, GlobalRunsOfSlices) {
  PieceSpec row{"w", {4, 6}, 1, 2, 5, 1, 8};  // local view (4, 3): elements 1..7
  std::vector<GlobalRun> runs = GlobalRuns(row);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].global, 3);  // (0, 1) -> column 3
  EXPECT_EQ(runs[0].n, 2);
  EXPECT_EQ(runs[1].global, 8);  // row 1, column 2
  EXPECT_EQ(runs[1].n, 3);
  EXPECT_EQ(runs[2].global, 14);
  EXPECT_EQ(runs[2].n, 2);
  for (int64_t i = row.flat_begin; i < row.flat_end; ++i) EXPECT_EQ(GlobalIndex(row, i), (i / 3) * 6 + 2 + i % 3);
  PieceSpec col{"w", {4, 6}, 0, 1, 3, 2, 11};  // rows 1..2 -> one run
  runs = GlobalRuns(col);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].global, 8);
  EXPECT_EQ(runs[0].n, 9);
  EXPECT_FALSE(ValidatePiece({"w", {4, 6}, 1, 2, 7, 0, 1}).ok());
  EXPECT_FALSE(ValidatePiece({"w", {4, 6}, 0, 0, 2, 0, 13}).ok());
}

class CkptReshard : public ::testing::TestWithParam<std::tuple<const char*, int, int, int, int>> {};

TEST_P(CkptReshard, ReadsEveryRankOfAnotherMeshExactly) {
  const auto [model, tp, fsdp, tp2, fsdp2] = GetParam();
  const ModelConfig m = Preset(model);
  ScopedTempDir run_dir(std::string("ckpt_reshard_") + model + std::to_string(tp) + std::to_string(tp2));
  const std::string run = run_dir.path();
  const std::string dir = SaveFake(run, 10, m, tp, fsdp);
  ASSERT_TRUE(VerifyCheckpoint(dir).ok()) << VerifyCheckpoint(dir).ToString();
  auto man = ReadManifest(dir);
  ASSERT_TRUE(man.ok()) << man.status().ToString();
  EXPECT_EQ(man->mesh.tensor, tp);
  EXPECT_EQ(man->data.consumed_samples, 80);
  EXPECT_EQ(man->rng_state, "{\"philox\": 7}");
  for (int t = 0; t < tp2; ++t)
    for (int f = 0; f < fsdp2; ++f) {
      const FakeRank want = MakeRank(m, tp2, t, fsdp2, f);
      for (size_t i = 0; i < want.pieces.size(); ++i)
        for (StateKind k : kAllKinds) {
          const PieceSpec& p = want.pieces[i];
          std::vector<float> got(p.size(), -1.0f);
          Status st = ReadTensorSlice(*man, dir, k, p, got.data());
          ASSERT_TRUE(st.ok()) << st.ToString();
          ASSERT_EQ(got, want.data[static_cast<int>(k)][i]) << p.tensor << " " << KindName(k) << " rank " << t << "," << f;
        }
    }
  for (const ParamTensor& t : BuildParamLayout(m).tensors) {
    auto g = ReadGlobalTensor(*man, dir, StateKind::kAdamV, t.name);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_EQ(*g, GlobalValues(t, StateKind::kAdamV)) << t.name;
  }
}

INSTANTIATE_TEST_SUITE_P(CkptMeshes, CkptReshard,
                         ::testing::Values(std::make_tuple("tiny", 2, 2, 1, 1), std::make_tuple("tiny", 2, 2, 4, 1),
                                           std::make_tuple("tiny", 2, 2, 4, 3), std::make_tuple("tiny", 1, 3, 2, 2),
                                           std::make_tuple("tiny-gpt2", 2, 2, 1, 2),
                                           std::make_tuple("tiny-gpt2", 4, 1, 2, 3)));

TEST(CkptSafetensors, HeaderIsValidJsonWithContiguousOffsets) {
  ScopedTempDir run_dir("ckpt_st");
  const std::string run = run_dir.path();
  const std::string dir = SaveFake(run, 3, Preset("tiny"), 2, 2);
  const FakeRank r = MakeRank(Preset("tiny"), 2, 1, 2, 0);  // rank 2's file
  const std::string bytes = ReadFile(dir + "/" + ShardFileName(StateKind::kParams, 2)).value();
  ASSERT_GE(bytes.size(), 8u);
  uint64_t len = 0;
  for (int i = 7; i >= 0; --i) len = (len << 8) | static_cast<uint8_t>(bytes[i]);  // little-endian
  ASSERT_LE(8 + len, bytes.size());
  const nlohmann::json h = nlohmann::json::parse(bytes.substr(8, len));  // throws if not JSON
  const size_t data_start = 8 + len;
  EXPECT_EQ(h["__metadata__"]["kind"], "params");
  EXPECT_EQ(h.size(), r.pieces.size() + 1);
  std::vector<std::pair<int64_t, int64_t>> offsets;
  for (size_t i = 0; i < r.pieces.size(); ++i) {
    const PieceSpec& p = r.pieces[i];
    const nlohmann::json& e = h.at(p.tensor + "@" + std::to_string(p.flat_begin));
    EXPECT_EQ(e["dtype"], "F32");
    EXPECT_EQ(e["shape"], nlohmann::json::array({p.size()}));
    const int64_t b = e["data_offsets"][0], end = e["data_offsets"][1];
    EXPECT_EQ(end - b, p.size() * 4);
    std::vector<float> v(p.size());
    std::memcpy(v.data(), bytes.data() + data_start + b, end - b);
    EXPECT_EQ(v, r.data[0][i]) << p.tensor;
    offsets.push_back({b, end});
  }
  std::sort(offsets.begin(), offsets.end());
  int64_t at = 0;
  for (auto [b, e] : offsets) {
    EXPECT_EQ(b, at);  // no holes, no overlaps
    at = e;
  }
  EXPECT_EQ(static_cast<size_t>(at), bytes.size() - data_start);
}

TEST(CkptManifest, RoundTripsAndNamesBadFields) {
  ScopedTempDir run_dir("ckpt_manifest");
  const std::string run = run_dir.path();
  const std::string dir = SaveFake(run, 5, Preset("tiny"), 2, 1);
  auto m = ReadManifest(dir);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(ManifestToJson(ManifestFromJson(ManifestToJson(*m), "x").value()), ManifestToJson(*m));
  nlohmann::json j = nlohmann::json::parse(ManifestToJson(*m));
  j["version"] = 2;
  auto bad = ManifestFromJson(j.dump(), dir + "/manifest.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("manifest.json"), std::string::npos);
  EXPECT_NE(bad.status().message().find("version"), std::string::npos);
  j["version"] = 1;
  j["tensors"][1]["pieces"]["params"][0].erase("flat_end");
  bad = ManifestFromJson(j.dump(), "m.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tensors[1].pieces.params[0].flat_end"), std::string::npos)
      << bad.status().message();
  j = nlohmann::json::parse(ManifestToJson(*m));
  j["mesh"]["tensor"] = "two";
  bad = ManifestFromJson(j.dump(), "m.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("mesh.tensor"), std::string::npos) << bad.status().message();
}

TEST(CkptCli, ExportWritesFullTensorsAndConfig) {
  ScopedTempDir run_dir("ckpt_export");
  const std::string run = run_dir.path();
  const ModelConfig m = Preset("tiny");
  const std::string dir = SaveFake(run, 8, m, 2, 2);
  EXPECT_EQ(RunCheckpointCommand({"verify", dir}), 0);
  EXPECT_EQ(RunCheckpointCommand({"list", run}), 0);
  EXPECT_EQ(RunCheckpointCommand({"inspect", dir}), 0);
  EXPECT_EQ(RunCheckpointCommand({"inspect", dir, "--json"}), 0);
  EXPECT_EQ(RunCheckpointCommand({"verify"}), 2);
  const std::string out = run + "/export/model.safetensors";
  ASSERT_EQ(RunCheckpointCommand({"export", dir, out}), 0);
  const std::string bytes = ReadFile(out).value();
  uint64_t len = 0;
  std::memcpy(&len, bytes.data(), 8);
  const nlohmann::json h = nlohmann::json::parse(bytes.substr(8, len));
  for (const ParamTensor& t : BuildParamLayout(m).tensors) {
    const nlohmann::json& e = h.at(t.name);
    EXPECT_EQ(e["shape"].get<std::vector<int64_t>>(), t.shape) << t.name;
    std::vector<float> v(t.size);
    std::memcpy(v.data(), bytes.data() + 8 + len + e["data_offsets"][0].get<int64_t>(), t.size * 4);
    EXPECT_EQ(v, GlobalValues(t, StateKind::kParams)) << t.name;
  }
  const nlohmann::json config = nlohmann::json::parse(ReadFile(run + "/export/config.json").value());
  EXPECT_EQ(config["base_emb_dim"], 64);
  EXPECT_EQ(config["decoder_block"], "llama");
  EXPECT_FALSE(config.contains("steps"));
  // One flipped byte: verify exits 1.
  const std::string shard = dir + "/" + ShardFileName(StateKind::kAdamM, 3);
  std::string data = ReadFile(shard).value();
  data[data.size() - 3] ^= 1;
  ASSERT_TRUE(WriteFileAtomic(shard, data).ok());
  EXPECT_EQ(RunCheckpointCommand({"verify", dir}), 1);
}

}  // namespace
}  // namespace elastrain::ckpt
