// Hostile checkpoint files: manifests with out-of-range or overflowing fields,
// safetensors headers whose lengths and offsets approach 2^63, and retention that meets
// a damaged checkpoint. Each must fail with a message naming the file and the field,
// never crash, and never cost another checkpoint.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/safetensors.h"
#include "common/checked_math.h"
#include "common/files.h"
#include "test_dirs.h"

namespace elastrain::ckpt {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// One replicated tensor "w" (2, 3), saved by the protocol (shard, manifest, COMMITTED, LATEST).
void Save(const std::string& run, int64_t step) {
  const std::string dir = CheckpointDir(run, step);
  const std::vector<float> data = {1, 2, 3, 4, 5, 6};
  std::vector<PieceSpec> pieces = {{"w", {2, 3}, -1, 0, 0, 0, 6}};
  auto info = WriteShardFile(dir + "/" + ShardFileName(StateKind::kParams, 0), StateKind::kParams, pieces, {data.data()});
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  Manifest m;
  m.step = step;
  ASSERT_TRUE(m.AddShard(*info).ok());
  ASSERT_TRUE(WriteManifest(dir, m).ok());
  ASSERT_TRUE(Commit(dir).ok());
  ASSERT_TRUE(SetLatest(run, step).ok());
}

// Rewrites dir/manifest.json through `edit`.
template <typename Edit>
void EditManifest(const std::string& dir, Edit edit) {
  json j = json::parse(ReadFile(dir + "/" + kManifestFile).value());
  edit(j);
  std::ofstream(dir + "/" + kManifestFile, std::ios::trunc) << j.dump(1);
}

TEST(CkptHostileManifest, NegativeStepIsRefusedNamingFileAndField) {
  ScopedTempDir run("neg_step");
  Save(run.path(), 2);
  const std::string dir = CheckpointDir(run.path(), 2);
  EditManifest(dir, [](json& j) { j["step"] = -5; });
  auto m = ReadManifest(dir);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kCorruption);
  EXPECT_TRUE(Contains(m.status().message(), dir + "/manifest.json") && Contains(m.status().message(), "'step'") &&
              Contains(m.status().message(), "-5"))
      << m.status().message();
}

TEST(CkptHostileManifest, StepOtherThanTheDirectorysIsRefused) {
  ScopedTempDir run("step_mismatch");
  Save(run.path(), 2);
  const std::string dir = CheckpointDir(run.path(), 2);
  EditManifest(dir, [](json& j) { j["step"] = 7; });
  auto m = ReadManifest(dir);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(Contains(m.status().message(), "'step' is 7") && Contains(m.status().message(), "step_00000002"))
      << m.status().message();
}

TEST(CkptHostileManifest, OutOfRangeFieldsAreRefused) {
  ScopedTempDir run("ranges");
  Save(run.path(), 1);
  const std::string dir = CheckpointDir(run.path(), 1);
  const std::string good = ReadFile(dir + "/" + kManifestFile).value();
  struct Case {
    const char* field;
    std::function<void(json&)> edit;
  };
  const Case cases[] = {
      {"mesh.world", [](json& j) { j["mesh"]["world"] = 0; }},
      {"mesh.data", [](json& j) { j["mesh"]["data"] = -1; }},
      {"mesh.world", [](json& j) { j["mesh"]["world"] = 3; }},  // not data*fsdp*tensor
      {"data_state.consumed_samples", [](json& j) { j["data_state"]["consumed_samples"] = -1; }},
      {"files[0].bytes", [](json& j) { j["files"][0]["bytes"] = -4; }},
      {"step", [](json& j) { j["step"] = "2"; }},
      {"step", [](json& j) { j["step"] = 18446744073709551615ULL; }},  // wraps to -1 as int64
      {"data_offset", [](json& j) { j["tensors"][0]["pieces"]["params"][0]["data_offset"] = -8; }},
      {"data_offset", [](json& j) { j["tensors"][0]["pieces"]["params"][0]["data_offset"] = INT64_MAX - 8; }},
      {"tensors[0].shape", [](json& j) { j["tensors"][0]["shape"] = {4294967296LL, 4294967296LL}; }},
      {"tensors[0].shape", [](json& j) { j["tensors"][0]["shape"] = {1LL << 31, 1LL << 30}; }},  // 2^63 bytes
  };
  for (const Case& c : cases) {
    std::ofstream(dir + "/" + kManifestFile, std::ios::trunc) << good;
    EditManifest(dir, c.edit);
    auto m = ReadManifest(dir);
    ASSERT_FALSE(m.ok()) << c.field;
    EXPECT_EQ(m.status().code(), StatusCode::kCorruption) << c.field;
    EXPECT_TRUE(Contains(m.status().message(), "manifest.json") && Contains(m.status().message(), c.field))
        << c.field << ": " << m.status().message();
  }
}

TEST(CkptHostileManifest, ShapeLargerThanItsFilesIsRefusedBeforeAllocating) {
  ScopedTempDir run("big_shape");
  Save(run.path(), 1);
  const std::string dir = CheckpointDir(run.path(), 1);
  // 2^60 elements: fits int64 (and its bytes too), far beyond the 24 bytes on disk.
  EditManifest(dir, [](json& j) { j["tensors"][0]["shape"] = {1LL << 30, 1LL << 30}; });
  auto m = ReadManifest(dir);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto n = GlobalTensorElements(*m, dir, StateKind::kParams, "w");
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kCorruption);
  EXPECT_TRUE(Contains(n.status().message(), "'w'") && Contains(n.status().message(), "hold only"))
      << n.status().message();
  EXPECT_FALSE(ReadGlobalTensor(*m, dir, StateKind::kParams, "w").ok());
  EXPECT_FALSE(FindProblems(dir).empty());
}

TEST(CkptHostileRetention, DamagedCheckpointIsNeitherCountedNorRemoved) {
  ScopedTempDir run("retention");
  for (int64_t s = 1; s <= 4; ++s) Save(run.path(), s);
  // The newest (LATEST) and one more are damaged; before, they counted among the kept
  // and pushed good ones out.
  EditManifest(CheckpointDir(run.path(), 4), [](json& j) { j["step"] = -1; });
  EditManifest(CheckpointDir(run.path(), 3), [](json& j) { j["tensors"][0]["shape"] = {4294967296LL, 4294967296LL}; });
  const std::string damaged4 = ReadFile(CheckpointDir(run.path(), 4) + "/" + kManifestFile).value();
  ASSERT_TRUE(ApplyRetention(run.path(), 2, 2).ok());
  EXPECT_TRUE(fs::exists(CheckpointDir(run.path(), 4) + "/" + kCommittedFile));
  EXPECT_EQ(ReadFile(CheckpointDir(run.path(), 4) + "/" + kManifestFile).value(), damaged4);
  EXPECT_TRUE(fs::exists(CheckpointDir(run.path(), 3) + "/" + kCommittedFile));
  EXPECT_TRUE(fs::exists(CheckpointDir(run.path(), 2) + "/" + kCommittedFile));
  EXPECT_TRUE(fs::exists(CheckpointDir(run.path(), 1) + "/" + kCommittedFile));  // 2 valid ones: 2 and 1
  Save(run.path(), 5);
  ASSERT_TRUE(ApplyRetention(run.path(), 2, 5).ok());
  EXPECT_FALSE(fs::exists(CheckpointDir(run.path(), 1)));  // valid and older than the two kept
  EXPECT_TRUE(fs::exists(CheckpointDir(run.path(), 2)));
  EXPECT_TRUE(fs::exists(CheckpointDir(run.path(), 3)));
  EXPECT_TRUE(fs::exists(CheckpointDir(run.path(), 4)));
}

TEST(CkptHostileRetention, DamagedNewestDoesNotMakePartialSavesStale) {
  ScopedTempDir run("retention_partial");
  Save(run.path(), 1);
  Save(run.path(), 9);
  EditManifest(CheckpointDir(run.path(), 9), [](json& j) { j["step"] = 900; });
  ASSERT_TRUE(MakeDirs(CheckpointDir(run.path(), 5)).ok());  // a save in progress, newer than step 1
  ASSERT_TRUE(ApplyRetention(run.path(), 1, 1).ok());
  EXPECT_TRUE(fs::exists(CheckpointDir(run.path(), 5)));
  EXPECT_TRUE(fs::exists(CheckpointDir(run.path(), 9)));
}

// A safetensors file of `header` (its length field `len`, or the header's real length)
// and `data_bytes` zero bytes of data.
std::string WriteSafetensors(const std::string& dir, const std::string& name, const std::string& header,
                             int64_t data_bytes, std::optional<uint64_t> len = std::nullopt) {
  const std::string path = dir + "/" + name;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  const uint64_t n = len.value_or(header.size());
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << header << std::string(static_cast<size_t>(data_bytes), '\0');
  return path;
}

Status HeaderStatus(const std::string& path) { return ReadSafetensorsHeader(path).status(); }

TEST(CkptHostileSafetensors, HeaderLengthNear2To63IsCorruption) {
  ScopedTempDir dir("st_len");
  const std::string header = R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  for (uint64_t len : {uint64_t{1} << 63, (uint64_t{1} << 63) + 8, ~uint64_t{0}, uint64_t{1} << 40}) {
    const std::string path = WriteSafetensors(dir.path(), "len.safetensors", header, 4, len);
    Status st = HeaderStatus(path);
    EXPECT_EQ(st.code(), StatusCode::kCorruption) << len;
    EXPECT_TRUE(Contains(st.message(), path) && Contains(st.message(), "header length")) << st.message();
  }
  EXPECT_EQ(HeaderStatus(WriteSafetensors(dir.path(), "short.safetensors", "", 0, 0)).code(), StatusCode::kCorruption);
  std::ofstream(dir.path() + "/tiny.safetensors") << "abc";
  EXPECT_EQ(HeaderStatus(dir.path() + "/tiny.safetensors").code(), StatusCode::kCorruption);
}

TEST(CkptHostileSafetensors, BadOffsetsShapesAndDtypesAreCorruption) {
  ScopedTempDir dir("st_offsets");
  struct Case {
    std::string header, expect;
  };
  const Case cases[] = {
      {R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[9223372036854775000,9223372036854775807]}})", "data_offsets"},
      {R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551615]}})", "data_offsets"},
      {R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", "data_offsets"},
      {R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", "data_offsets"},
      {R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", "needs 8"},
      {R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", "overflows"},
      {R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "shape"},
      {R"({"t":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,4]}})", "shape"},
      {R"({"t":{"dtype":"Q4","shape":[1],"data_offsets":[0,4]}})", "unknown dtype"},
      {R"({"t":{"dtype":"F32","shape":[1],"data_offsets":["0",4]}})", "data_offsets"},
  };
  for (const Case& c : cases) {
    const std::string path = WriteSafetensors(dir.path(), "bad.safetensors", c.header, 8);
    Status st = HeaderStatus(path);
    EXPECT_EQ(st.code(), StatusCode::kCorruption) << c.header;
    EXPECT_TRUE(Contains(st.message(), path) && Contains(st.message(), "'t'") && Contains(st.message(), c.expect))
        << c.header << ": " << st.message();
  }
  // The good header of the same shape still reads.
  auto h = ReadSafetensorsHeader(
      WriteSafetensors(dir.path(), "good.safetensors", R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8));
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->entries.at(0).end, 8);
}

TEST(CkptHostileSafetensors, WriterRefusesOverflowingShapes) {
  ScopedTempDir dir("st_writer");
  const std::string path = dir.path() + "/out.safetensors";
  auto w = SafetensorsWriter::Create(path, {{"t", {4294967296LL, 4294967296LL}}}, {});
  ASSERT_FALSE(w.ok());
  EXPECT_TRUE(Contains(w.status().message(), "'t'") && Contains(w.status().message(), "overflows"))
      << w.status().message();
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST(CkptHostilePiece, ValidatePieceRefusesOverflowingShapes) {
  Status st = ValidatePiece({"w", {INT64_MAX / 2, 3}, -1, 0, 0, 0, 1});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(st.message(), "overflows")) << st.message();
  EXPECT_FALSE(ValidatePiece({"w", {1LL << 31, 1LL << 30}, -1, 0, 0, 0, 1}).ok());  // 2^61 floats: 2^63 bytes
  EXPECT_TRUE(ValidatePiece({"w", {1LL << 30, 1LL << 30}, 1, 0, 1, 0, 1}).ok());
}

TEST(CheckedMath, ReportsOverflowNamingTheQuantity) {
  EXPECT_EQ(CheckedMul(3, 4, "x").value(), 12);
  auto m = CheckedMul(INT64_MAX / 2, 3, "parameter count");
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(Contains(m.status().message(), "parameter count")) << m.status().message();
  EXPECT_FALSE(CheckedMul(INT64_MIN, -1, "x").ok());
  EXPECT_EQ(CheckedAdd(INT64_MAX - 1, 1, "x").value(), INT64_MAX);
  EXPECT_FALSE(CheckedAdd(INT64_MAX, 1, "offset").ok());
  EXPECT_EQ(CheckedProduct({}, "x").value(), 1);
  EXPECT_EQ(CheckedProduct({2, 0, INT64_MAX}, "x").value(), 0);
  EXPECT_FALSE(CheckedProduct({1LL << 32, 1LL << 32}, "shape").ok());
  EXPECT_FALSE(CheckedProduct({2, -1}, "shape").ok());
  EXPECT_EQ(CorruptionOf(CheckedProduct({1LL << 32, 1LL << 32}, "s").status()).code(), StatusCode::kCorruption);
}

}  // namespace
}  // namespace elastrain::ckpt
