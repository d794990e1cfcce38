// The token-file readers (src/data/token_files.h): llm.c, nanoGPT and Megatron files
// written here by their published layouts, read back window by window, and hostile
// headers and indexes refused with a message naming the field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/files.h"
#include "data/dataset.h"
#include "data/token_files.h"
#include "test_dirs.h"

namespace elastrain {
namespace {
using ::testing::HasSubstr;

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

// llm.c's write_datafile: int32[256] {magic, version, count, 0...}, then the tokens.
std::string Llmc(const std::vector<uint32_t>& tokens, int32_t version = 1, int64_t count = -1) {
  std::string s;
  Put<int32_t>(&s, kLlmcMagic);
  Put<int32_t>(&s, version);
  Put<int32_t>(&s, static_cast<int32_t>(count < 0 ? static_cast<int64_t>(tokens.size()) : count));
  s.resize(1024, '\0');
  for (uint32_t t : tokens) {
    if (version == 2) Put<uint32_t>(&s, t);
    else Put<uint16_t>(&s, static_cast<uint16_t>(t));
  }
  return s;
}

std::string U16(const std::vector<uint32_t>& tokens) {
  std::string s;
  for (uint32_t t : tokens) Put<uint16_t>(&s, static_cast<uint16_t>(t));
  return s;
}

// Megatron's MMIDIDX index of documents (each one sequence) stored back to back.
struct Mmid {
  uint8_t dtype = 8;  // uint16
  std::vector<int32_t> sizes;
  std::vector<int64_t> pointers;
  std::vector<int64_t> doc_idx;
  std::string Bytes() const {
    std::string s("MMIDIDX\0\0", 9);
    Put<uint64_t>(&s, 1);
    Put<uint8_t>(&s, dtype);
    Put<uint64_t>(&s, sizes.size());
    Put<uint64_t>(&s, doc_idx.size());
    for (int32_t v : sizes) Put(&s, v);
    for (int64_t v : pointers) Put(&s, v);
    for (int64_t v : doc_idx) Put(&s, v);
    return s;
  }
};

Mmid IndexOfDocs(const std::vector<int32_t>& sizes, int64_t elem = 2) {
  Mmid m;
  m.sizes = sizes;
  int64_t p = 0;
  for (int32_t n : sizes) {
    m.pointers.push_back(p);
    p += n * elem;
  }
  for (size_t i = 0; i <= sizes.size(); ++i) m.doc_idx.push_back(static_cast<int64_t>(i));
  return m;
}

std::vector<uint32_t> Seq(size_t n, uint32_t mod = 256) {
  std::vector<uint32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint32_t>((i * 7 + 3) % mod);
  return v;
}

DatasetOptions Options(DatasetType type, const std::string& path, int64_t T = 8, int64_t vocab = 256) {
  DatasetOptions o;
  o.type = type;
  o.path = path;
  o.seq_len = T;
  o.vocab_size = vocab;
  o.eval_split_fraction = 0.1;
  return o;
}

// Every window of both splits, in order: train then eval, as a flat token list of the
// windows' first T tokens plus the last window's last one.
std::vector<int32_t> Stream(const Dataset& ds) {
  const int64_t T = ds.seq_len();
  std::vector<int32_t> out, w(static_cast<size_t>(T + 1));
  for (Split sp : {Split::kTrain, Split::kEval})
    for (int64_t i = 0; i < ds.num_samples(sp); ++i) {
      ds.GetSample(sp, i, w.data());
      if (!out.empty()) {
        EXPECT_EQ(out.back(), w[0]) << "windows overlap by one token";
        out.pop_back();
      }
      out.insert(out.end(), w.begin(), w.end());
    }
  return out;
}

std::vector<int32_t> I32(const std::vector<uint32_t>& v, size_t n) { return std::vector<int32_t>(v.begin(), v.begin() + n); }

TEST(TokenFiles, LlmcVersionsOneAndTwoReadAsOneStreamOfSortedFiles) {
  ScopedTempDir d("tok_llmc");
  const auto a = Seq(100), b = Seq(57, 200);
  // b sorts before a ("0..." < "1..."), both under a directory with a stray text file.
  ASSERT_TRUE(WriteFileAtomic(d.path() + "/1_a.bin", Llmc(a, 1)).ok());
  ASSERT_TRUE(WriteFileAtomic(d.path() + "/0_b.bin", Llmc(b, 2)).ok());
  ASSERT_TRUE(WriteFileAtomic(d.path() + "/README.txt", "not a token file").ok());
  auto ds = OpenDataset(Options(DatasetType::kLlmc, d.path()));
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  // 157 tokens: (157 - 1) / 8 = 19 windows, round(1.9) = 2 eval.
  EXPECT_EQ((*ds)->num_samples(Split::kTrain), 17);
  EXPECT_EQ((*ds)->num_samples(Split::kEval), 2);
  std::vector<uint32_t> all = b;
  all.insert(all.end(), a.begin(), a.end());
  EXPECT_EQ(Stream(**ds), I32(all, 19 * 8 + 1));
  // A glob picks the same files.
  auto g = OpenDataset(Options(DatasetType::kLlmc, d.path() + "/*.bin"));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(Stream(**g), Stream(**ds));
  // The eval split is the last windows: eval 0 starts where train ends.
  std::vector<int32_t> w(9);
  (*ds)->GetSample(Split::kEval, 0, w.data());
  EXPECT_EQ(w[0], static_cast<int32_t>(all[17 * 8]));
}

TEST(TokenFiles, LlmcHostileHeadersAreRefusedNamingTheField) {
  ScopedTempDir d("tok_llmc_bad");
  auto refuse = [&](const std::string& name, const std::string& bytes, const std::string& why) {
    const std::string path = d.path() + "/" + name;
    ASSERT_TRUE(WriteFileAtomic(path, bytes).ok());
    auto ds = OpenDataset(Options(DatasetType::kLlmc, path));
    ASSERT_FALSE(ds.ok()) << name;
    EXPECT_THAT(ds.status().message(), HasSubstr(path)) << name;
    EXPECT_THAT(ds.status().message(), HasSubstr(why)) << name;
  };
  refuse("short.bin", std::string(100, '\0'), "shorter than llm.c's 1024-byte header");
  refuse("nomagic.bin", U16(Seq(600)), "magic");
  std::string v3 = Llmc(Seq(50), 1);
  v3[4] = 3;
  refuse("v3.bin", v3, "version 3, expected 1 (uint16 tokens) or 2 (uint32 tokens)");
  refuse("count_big.bin", Llmc(Seq(50), 1, 51), "header says 51 tokens of 2 bytes, the file holds 100 bytes");
  refuse("count_neg.bin", Llmc(Seq(50), 1, -1 & 0xffffffffLL), "the file holds 100 bytes");
  refuse("count_huge.bin", Llmc(Seq(50), 2, 0x7fffffff), "header says 2147483647 tokens of 4 bytes");
  auto bad = Seq(300);
  bad[123] = 256;
  refuse("vocab.bin", Llmc(bad, 1), "token 123 (byte offset 1270) is 256, not below vocab_size=256");
  auto huge = Seq(300);
  huge[7] = 0x80000000u;  // negative as int32: must not slip under the check
  refuse("vocab2.bin", Llmc(huge, 2), "token 7 (byte offset 1052) is 2147483648");
}

TEST(TokenFiles, NanoGptIsHeaderlessUint16) {
  ScopedTempDir d("tok_nano");
  const auto t = Seq(81);
  ASSERT_TRUE(WriteFileAtomic(d.path() + "/train.bin", U16(t)).ok());
  auto ds = OpenDataset(Options(DatasetType::kNanoGpt, d.path() + "/train.bin"));
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(Stream(**ds), I32(t, 81));
  ASSERT_TRUE(WriteFileAtomic(d.path() + "/odd.bin", U16(t) + "x").ok());
  auto odd = OpenDataset(Options(DatasetType::kNanoGpt, d.path() + "/odd.bin"));
  ASSERT_FALSE(odd.ok());
  EXPECT_THAT(odd.status().message(), HasSubstr("odd size of 163 bytes"));
  // An llm.c file named as nanoGPT is refused, not read as header tokens.
  ASSERT_TRUE(WriteFileAtomic(d.path() + "/llmc.bin", Llmc(t)).ok());
  auto llmc = OpenDataset(Options(DatasetType::kNanoGpt, d.path() + "/llmc.bin", 8, 1 << 30));
  ASSERT_FALSE(llmc.ok());
  EXPECT_THAT(llmc.status().message(), HasSubstr("read it with dataset_type=llmc"));
  auto missing = OpenDataset(Options(DatasetType::kNanoGpt, d.path() + "/none.bin"));
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("no such file"));
  auto empty_glob = OpenDataset(Options(DatasetType::kNanoGpt, d.path() + "/*.nothing"));
  ASSERT_FALSE(empty_glob.ok());
  EXPECT_THAT(empty_glob.status().message(), HasSubstr("no token files found"));
}

TEST(TokenFiles, MegatronDocumentsConcatenateAcrossFilesAndDtypes) {
  ScopedTempDir d("tok_mega");
  const auto t = Seq(90);
  // a: uint16, documents of 10, 30 and 50 tokens (one empty in between).
  ASSERT_TRUE(WriteFileAtomic(d.path() + "/a.bin", U16(t)).ok());
  Mmid a = IndexOfDocs({10, 30, 0, 50});
  ASSERT_TRUE(WriteFileAtomic(d.path() + "/a.idx", a.Bytes()).ok());
  // b: int32, two sequences in one document.
  const auto u = Seq(40, 100);
  std::string b_bin;
  for (uint32_t v : u) Put<int32_t>(&b_bin, static_cast<int32_t>(v));
  Mmid b = IndexOfDocs({25, 15}, 4);
  b.dtype = 4;
  b.doc_idx = {0, 2};
  ASSERT_TRUE(WriteFileAtomic(d.path() + "/b.bin", b_bin).ok());
  ASSERT_TRUE(WriteFileAtomic(d.path() + "/b.idx", b.Bytes()).ok());
  std::vector<uint32_t> all = t;
  all.insert(all.end(), u.begin(), u.end());
  for (const std::string& path : {d.path(), d.path() + "/*.idx", d.path() + "/*"}) {
    auto ds = OpenDataset(Options(DatasetType::kMegatron, path));
    ASSERT_TRUE(ds.ok()) << path << ": " << ds.status().ToString();
    EXPECT_EQ(Stream(**ds), I32(all, 16 * 8 + 1)) << path;
  }
  // One prefix, or either file of the pair.
  for (const std::string& path : {d.path() + "/a", d.path() + "/a.bin", d.path() + "/a.idx"}) {
    auto ds = OpenDataset(Options(DatasetType::kMegatron, path));
    ASSERT_TRUE(ds.ok()) << path << ": " << ds.status().ToString();
    EXPECT_EQ(Stream(**ds), I32(t, 11 * 8 + 1)) << path;
  }
  auto lone = OpenDataset(Options(DatasetType::kMegatron, d.path() + "/c"));
  ASSERT_FALSE(lone.ok());
  EXPECT_THAT(lone.status().message(), HasSubstr("c.bin and " + d.path() + "/c.idx are not both there"));
}

// The parser alone on hostile indexes: a 100-byte .bin (50 uint16 tokens).
TEST(TokenFiles, MegatronHostileIndexesAreRefusedNamingTheField) {
  auto parse = [](const std::string& idx, uint64_t bin = 100) {
    return ParseMegatronIndex(reinterpret_cast<const uint8_t*>(idx.data()), idx.size(), bin, "x.idx");
  };
  const Mmid good = IndexOfDocs({20, 30});
  auto ok = parse(good.Bytes());
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->num_tokens, 50);
  EXPECT_EQ(ok->num_documents, 2);
  auto refuse = [&](const std::string& idx, const std::string& why, uint64_t bin = 100) {
    auto r = parse(idx, bin);
    ASSERT_FALSE(r.ok()) << why;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
    EXPECT_THAT(r.status().message(), ::testing::StartsWith("x.idx: "));
    EXPECT_THAT(r.status().message(), HasSubstr(why));
  };
  refuse(good.Bytes().substr(0, 20), "file of 20 bytes is shorter than the 34-byte MMIDIDX header");
  std::string magic = good.Bytes();
  magic[0] = 'N';
  refuse(magic, "bad magic");
  std::string version = good.Bytes();
  version[9] = 2;
  refuse(version, "index version 2, expected 1");
  for (uint8_t code : {0, 9, 255}) {
    Mmid m = good;
    m.dtype = code;
    refuse(m.Bytes(), "unknown dtype code " + std::to_string(code));
  }
  for (uint8_t code : {6, 7}) {
    Mmid m = good;
    m.dtype = code;
    refuse(m.Bytes(), "is a floating-point type, not token ids");
  }
  // Counts that would overflow 12 x S + 8 x D, or that do not fill the file.
  for (uint64_t seqs : {uint64_t{3}, uint64_t{1} << 62, ~uint64_t{0}, ~uint64_t{0} / 12 + 1}) {
    std::string s = good.Bytes();
    std::memcpy(s.data() + 18, &seqs, 8);
    refuse(s, "header says " + std::to_string(seqs) + " sequences");
  }
  for (uint64_t docs : {uint64_t{4}, uint64_t{1} << 61, ~uint64_t{0}}) {
    std::string s = good.Bytes();
    std::memcpy(s.data() + 26, &docs, 8);
    refuse(s, "and " + std::to_string(docs) + " document indices");
  }
  refuse(good.Bytes() + "x", "header says 2 sequences");
  Mmid neg = good;
  neg.sizes[1] = -5;
  refuse(neg.Bytes(), "sequence 1 has length -5");
  Mmid gap = good;
  gap.pointers[1] = 42;
  refuse(gap.Bytes(), "sequence 1 starts at byte 42 of the .bin, expected 40");
  Mmid past = good;
  past.sizes[1] = 31;
  refuse(past.Bytes(), "sequence 1 (31 tokens at byte 40) ends past the end of the .bin (100 bytes)");
  Mmid huge = good;
  huge.sizes[0] = 0x7fffffff;
  refuse(huge.Bytes(), "sequence 0 (2147483647 tokens at byte 0) ends past the end");
  Mmid far = good;
  far.pointers[0] = INT64_MIN;
  refuse(far.Bytes(), "sequence 0 starts at byte -9223372036854775808");
  refuse(good.Bytes(), "the sequences end at byte 100, the .bin has 102 bytes", 102);
  Mmid docs_first = good;
  docs_first.doc_idx = {1, 2};
  refuse(docs_first.Bytes(), "document index 0 is 1");
  Mmid docs_down = IndexOfDocs({20, 20, 10});
  docs_down.doc_idx = {0, 2, 1, 3};
  refuse(docs_down.Bytes(), "document index 2 is 1, expected non-decreasing");
  Mmid docs_past = good;
  docs_past.doc_idx = {0, 3};
  refuse(docs_past.Bytes(), "document index 1 is 3");
  Mmid docs_short = good;
  docs_short.doc_idx = {0, 1};
  refuse(docs_short.Bytes(), "the last document index is 1, expected the sequence count 2");
  Mmid no_docs = good;
  no_docs.doc_idx = {};
  refuse(no_docs.Bytes(), "no document indices");
}

TEST(TokenFiles, MegatronTokenOutOfVocabularyNamesItsPlace) {
  ScopedTempDir d("tok_mega_vocab");
  auto t = Seq(90);
  t[77] = 300;
  ASSERT_TRUE(WriteFileAtomic(d.path() + "/a.bin", U16(t)).ok());
  ASSERT_TRUE(WriteFileAtomic(d.path() + "/a.idx", IndexOfDocs({40, 50}).Bytes()).ok());
  auto ds = OpenDataset(Options(DatasetType::kMegatron, d.path() + "/a"));
  ASSERT_FALSE(ds.ok());
  EXPECT_THAT(ds.status().message(), HasSubstr(d.path() + "/a.bin: token 77 (byte offset 154) is 300"));
  // int8 ids below zero are refused too.
  std::string i8(90, '\x05');
  i8[3] = '\xff';
  Mmid m = IndexOfDocs({90}, 1);
  m.dtype = 2;
  ASSERT_TRUE(WriteFileAtomic(d.path() + "/b.bin", i8).ok());
  ASSERT_TRUE(WriteFileAtomic(d.path() + "/b.idx", m.Bytes()).ok());
  auto neg = OpenDataset(Options(DatasetType::kMegatron, d.path() + "/b"));
  ASSERT_FALSE(neg.ok());
  EXPECT_THAT(neg.status().message(), HasSubstr("token 3 (byte offset 3) is -1"));
}

// A file rewritten in place after the check at open: the mapping shows the new bytes,
// and a sample holding an id past the vocabulary stops the process rather than reach
// the embedding table.
TEST(TokenFiles, AFileRewrittenWhileMappedNeverYieldsAnIdPastTheVocabulary) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ScopedTempDir d("tok_rewrite");
  const std::string path = d.path() + "/a.bin";
  ASSERT_TRUE(WriteFileAtomic(path, Llmc(Seq(200))).ok());
  auto ds = OpenDataset(Options(DatasetType::kLlmc, path));
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  {
    std::FILE* f = std::fopen(path.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    const uint16_t big = 60000;
    std::fseek(f, 1024 + 2 * 10, SEEK_SET);  // token 10: window 1 (tokens 8..16)
    std::fwrite(&big, 2, 1, f);
    std::fclose(f);
  }
  std::vector<int32_t> w(9);
  (*ds)->GetSample(Split::kTrain, 0, w.data());  // tokens 0..8: untouched
  // (The reason, "train sample 1 holds token id 60000, not below vocab_size=256", is
  // logged on stdout, which a death test does not capture.)
  // The death test's child runs this test again from the start and dies in GetSample, so
  // its own directory is removed first (the mapping outlives the unlink).
  EXPECT_EXIT(
      {
        std::error_code ec;
        std::filesystem::remove_all(d.path(), ec);
        (*ds)->GetSample(Split::kTrain, 1, w.data());
      },
      ::testing::KilledBySignal(SIGABRT), "");
}

TEST(TokenFiles, TooFewTokensForOneTrainAndOneEvalWindow) {
  ScopedTempDir d("tok_small");
  ASSERT_TRUE(WriteFileAtomic(d.path() + "/a.bin", Llmc(Seq(9))).ok());
  auto ds = OpenDataset(Options(DatasetType::kLlmc, d.path() + "/a.bin"));
  ASSERT_FALSE(ds.ok());
  EXPECT_THAT(ds.status().message(), HasSubstr("corpus has 9 tokens (1 windows of 9)"));
}

TEST(TokenFiles, FirstTokenOutOfRangeFindsTheFirstAcrossChunks) {
  std::vector<uint16_t> v(3 << 20, 1);
  v[(2 << 20) + 5] = 999;
  v[(1 << 20) + 9] = 700;
  TokenSpan s{reinterpret_cast<const uint8_t*>(v.data()), static_cast<int64_t>(v.size()), TokenDtype::kU16};
  EXPECT_EQ(FirstTokenOutOfRange(s, 512), (1 << 20) + 9);
  EXPECT_EQ(FirstTokenOutOfRange(s, 1000), -1);
}

}  // namespace
}  // namespace elastrain
