#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "common/files.h"
#include "data/tokenizer.h"
#include "test_dirs.h"

namespace elastrain {
namespace {
namespace fs = std::filesystem;


// A few KB of deterministic English-like text.
std::string SmallCorpus() {
  const char* words[] = {"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "and",
                         "runs", "into", "forest", "where", "trees", "grow", "tall", "green", "light"};
  std::string text;
  uint64_t x = 42;
  for (int line = 0; line < 150; ++line) {
    for (int w = 0; w < 8; ++w) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      text += words[(x >> 33) % 18];
      text += w == 7 ? ".\n" : " ";
    }
  }
  return text;
}

TEST(TokenizerTest, ByteRoundTrip) {
  ByteTokenizer t;
  std::string text = "hello\n\0world \xff\x80 é";
  text.push_back('\0');
  auto ids = t.Encode(text);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->size(), text.size());
  for (int32_t id : *ids) EXPECT_TRUE(id >= 0 && id < 256);
  EXPECT_EQ(t.Decode(*ids), text);
  EXPECT_EQ(t.vocab_size(), 256);
  EXPECT_EQ(t.id(), "bytes");
}

TEST(TokenizerTest, EmptyPathLoadsBytes) {
  auto t = LoadTokenizer("");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->id(), "bytes");
}

TEST(TokenizerTest, MissingOrInvalidModelNamesTheFile) {
  ScopedTempDir scratch("tok_bad");
  std::string dir = scratch.path();
  auto missing = LoadTokenizer(dir + "/nope.model");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nope.model"), std::string::npos);
  ASSERT_TRUE(WriteFileAtomic(dir + "/junk.model", "not a protobuf at all").ok());
  auto junk = LoadTokenizer(dir + "/junk.model");
  ASSERT_FALSE(junk.ok());
  EXPECT_NE(junk.status().message().find("junk.model"), std::string::npos);
}

TEST(TokenizerTest, SentencePieceTrainLoadRoundTrip) {
  ScopedTempDir scratch("tok_spm");
  std::string dir = scratch.path();
  ASSERT_TRUE(WriteFileAtomic(dir + "/corpus.txt", SmallCorpus()).ok());
  const std::string model = dir + "/m.model";
  Status trained = TrainSentencePiece({dir + "/corpus.txt"}, 400, model);
  ASSERT_TRUE(trained.ok()) << trained.ToString();
  EXPECT_TRUE(FileExists(dir + "/m.vocab"));

  auto loaded = LoadTokenizer(model);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const Tokenizer& t = **loaded;
  EXPECT_EQ(t.vocab_size(), 400);
  auto bytes = ReadFile(model);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(t.id(), "spm:" + HexU64(Hash64(bytes->data(), bytes->size())));

  // Seen words merge into fewer tokens than bytes; unseen characters fall back to bytes.
  const std::string seen = "the quick brown fox jumps over the lazy dog.";
  auto seen_ids = t.Encode(seen);
  ASSERT_TRUE(seen_ids.ok());
  EXPECT_LT(seen_ids->size(), seen.size() / 2);
  EXPECT_EQ(t.Decode(*seen_ids), seen);
  for (const std::string text : {"  two  spaces\tand tab\n\nnewlines ", "Zürich ✓ 123 {}", "x"}) {
    auto ids = t.Encode(text);
    ASSERT_TRUE(ids.ok());
    for (int32_t id : *ids) EXPECT_TRUE(id >= 0 && id < t.vocab_size());
    EXPECT_EQ(t.Decode(*ids), text);
  }
}

TEST(TokenizerTest, SentencePieceTrainingIsDeterministic) {
  ScopedTempDir scratch("tok_det");
  std::string dir = scratch.path();
  ASSERT_TRUE(WriteFileAtomic(dir + "/corpus.txt", SmallCorpus()).ok());
  // A directory input is expanded to its text files.
  ASSERT_TRUE(TrainSentencePiece({dir}, 300, dir + "/a.model").ok());
  ASSERT_TRUE(TrainSentencePiece({dir + "/corpus.txt"}, 300, dir + "/b.model").ok());
  EXPECT_EQ(ReadFile(dir + "/a.model").value(), ReadFile(dir + "/b.model").value());
}

TEST(TokenizerTest, SentencePieceTrainingErrors) {
  ScopedTempDir scratch("tok_err");
  std::string dir = scratch.path();
  ASSERT_TRUE(WriteFileAtomic(dir + "/corpus.txt", SmallCorpus()).ok());
  Status tiny = TrainSentencePiece({dir + "/corpus.txt"}, 100, dir + "/x.model");
  EXPECT_EQ(tiny.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(tiny.message().find("vocab_size=100"), std::string::npos) << tiny.message();
  Status missing = TrainSentencePiece({dir + "/missing.txt"}, 300, dir + "/x.model");
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("missing.txt"), std::string::npos) << missing.message();
  EXPECT_FALSE(FileExists(dir + "/x.model"));
  // A missing output directory is created, like `mkdir -p`.
  Status new_dir = TrainSentencePiece({dir + "/corpus.txt"}, 300, dir + "/new/dir/x.model");
  EXPECT_TRUE(new_dir.ok()) << new_dir.ToString();
  EXPECT_TRUE(FileExists(dir + "/new/dir/x.model"));
}

}  // namespace
}  // namespace elastrain
