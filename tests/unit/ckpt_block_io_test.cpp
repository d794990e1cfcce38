// The block writer and reader of shard files (ckpt/direct_io.h): pieces that cross the
// 8 MiB blocks and the 256 KiB hash slices keep their checksums, files have their true
// size, data starts aligned, slices read back exactly, truncation is caught, and files
// of the older layout (header padded to 8 bytes) still read.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/direct_io.h"
#include "ckpt/safetensors.h"
#include "common/files.h"
#include "test_dirs.h"

namespace elastrain::ckpt {
namespace {

namespace fs = std::filesystem;

std::vector<float> Ramp(int64_t n, float base) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = base + static_cast<float>(i % 100003) * 0.5f;
  return v;
}

struct Written {
  ScopedTempDir scratch;
  std::string dir;
  std::vector<PieceSpec> pieces;
  std::vector<std::vector<float>> data;
  ShardFileInfo info;
};

// Three pieces: one of 12 MiB (crosses a block), a tiny one, one ending mid-block. From
// separate vectors (copied through the block buffer), or `aligned`: back to back in one
// page-aligned buffer as the trainer's snapshot holds them, so that the aligned parts
// go to the disk without a copy.
Written WriteThree(const std::string& name, bool aligned = false) {
  Written w{ScopedTempDir("ckpt_block_" + name), {}, {}, {}, {}};
  w.dir = w.scratch.path();
  const int64_t a = 3 * (int64_t{1} << 20), c = 1500003;
  w.pieces = {{"a", {a}, -1, 0, 0, 0, a}, {"b", {7}, -1, 0, 0, 0, 7}, {"c", {c}, -1, 0, 0, 0, c}};
  w.data = {Ramp(a, 1), Ramp(7, -3), Ramp(c, 7)};
  std::vector<const float*> ptrs = {w.data[0].data(), w.data[1].data(), w.data[2].data()};
  AlignedBuffer snapshot = AllocateAligned((a + 7 + c) * 4);
  if (aligned) {
    float* at = reinterpret_cast<float*>(snapshot.get());
    for (size_t i = 0; i < 3; ++i) {
      std::copy(w.data[i].begin(), w.data[i].end(), at);
      ptrs[i] = at;
      at += w.data[i].size();
    }
  }
  Result<ShardFileInfo> info = WriteShardFile(w.dir + "/params-00000.safetensors", StateKind::kParams, w.pieces, ptrs);
  EXPECT_TRUE(info.ok()) << info.status().message();
  if (info.ok()) w.info = *info;
  return w;
}

class CkptBlockIoSources : public testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(CopiedOrInPlace, CkptBlockIoSources, testing::Bool());

TEST_P(CkptBlockIoSources, PiecesAcrossBlocksKeepChecksumsSizeAndAlignment) {
  const Written w = WriteThree(GetParam() ? "sums_aligned" : "sums", GetParam());
  const std::string path = w.dir + "/" + w.info.file;
  EXPECT_EQ(static_cast<int64_t>(fs::file_size(path)), w.info.bytes);  // the block padding cut off
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  Result<SafetensorsHeader> h = ReadSafetensorsHeader(path);
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->data_start % kIoAlign, 0);
  ASSERT_EQ(w.info.pieces.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const PieceRecord& r = w.info.pieces[i];
    EXPECT_EQ(r.checksum, Hash64(w.data[i].data(), w.data[i].size() * 4)) << r.key;
    Result<std::vector<float>> back = ReadPiece(w.dir, r);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(*back, w.data[i]) << r.key;
  }
}

TEST(CkptBlockIo, SlicesStartingAnywhereReadBackExactly) {
  const Written w = WriteThree("slices");
  Manifest m;
  ASSERT_TRUE(m.AddShard(w.info).ok());
  const int64_t n = w.pieces[0].size();
  // Unaligned begins and ends, one across the block boundary, one whole (read in place).
  for (auto [b, e] : std::vector<std::pair<int64_t, int64_t>>{{1, 2}, {1000003, 2500001}, {n - 5, n}, {0, n}}) {
    PieceSpec want{"a", {n}, -1, 0, 0, b, e};
    std::vector<float> out(static_cast<size_t>(e - b), -1);
    ASSERT_TRUE(ReadTensorSlice(m, w.dir, StateKind::kParams, want, out.data()).ok()) << b;
    EXPECT_TRUE(std::equal(out.begin(), out.end(), w.data[0].begin() + b)) << b << ".." << e;
  }
}

TEST(CkptBlockIo, TruncatedFileIsCorruptionNamingTheFile) {
  const Written w = WriteThree("trunc");
  const std::string path = w.dir + "/" + w.info.file;
  fs::resize_file(path, w.info.pieces[0].data_offset + 5 * (int64_t{1} << 20) + 3);
  Result<std::vector<float>> back = ReadPiece(w.dir, w.info.pieces[0]);
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().code(), StatusCode::kCorruption);
  EXPECT_NE(back.status().message().find("truncated"), std::string::npos) << back.status().message();
  EXPECT_NE(back.status().message().find(path), std::string::npos) << back.status().message();
  back = ReadPiece(w.dir, w.info.pieces[2]);  // wholly past the end
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().code(), StatusCode::kCorruption);
}

TEST(CkptBlockIo, OlderLayoutWithHeaderPaddedToEightReads) {
  ScopedTempDir scratch("ckpt_block_old");
  const std::string dir = scratch.path();
  const std::vector<float> v = Ramp(1001, 2);
  nlohmann::json h = {{"__metadata__", {{"format", kFormatName}, {"kind", "params"}}},
                      {"x@0", {{"dtype", "F32"}, {"shape", {1001}}, {"data_offsets", {0, 4004}}}}};
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t len = text.size();
  {
    std::ofstream f(dir + "/params-00000.safetensors", std::ios::binary);
    f.write(reinterpret_cast<const char*>(&len), 8);
    f.write(text.data(), static_cast<std::streamsize>(text.size()));
    f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
  }
  Result<SafetensorsHeader> hdr = ReadSafetensorsHeader(dir + "/params-00000.safetensors");
  ASSERT_TRUE(hdr.ok()) << hdr.status().message();
  EXPECT_NE(hdr->data_start % kIoAlign, 0);
  PieceRecord r{{"x", {1001}, -1, 0, 0, 0, 1001}, "params-00000.safetensors", "x@0", hdr->data_start,
                Hash64(v.data(), v.size() * 4)};
  Result<std::vector<float>> back = ReadPiece(dir, r);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, v);
}

}  // namespace
}  // namespace elastrain::ckpt
