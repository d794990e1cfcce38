#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "common/files.h"
#include "data/corpus.h"
#include "data/token_cache.h"
#include "test_dirs.h"

namespace elastrain {
namespace {
namespace fs = std::filesystem;


void Write(const std::string& path, const std::string& data) { ASSERT_TRUE(WriteFileAtomic(path, data).ok()); }

TEST(DataCorpusTest, DirectorySkipsBinaryFilesAndSymlinks) {
  ScopedTempDir scratch("corpus");
  std::string dir = scratch.path();
  fs::create_directories(dir + "/sub");
  Write(dir + "/b.txt", "bee\n");
  Write(dir + "/a", "ay\n");
  Write(dir + "/sub/c", "sea\n");
  Write(dir + "/a.dat", std::string("\x01\x02\0\0index", 9));
  std::string late_nul(9000, 'x');
  late_nul[8500] = '\0';  // past the 8 KiB probe: still text
  Write(dir + "/late", late_nul);
  fs::create_symlink("a", dir + "/a.u8");
  fs::create_directory_symlink("sub", dir + "/sublink");

  auto files = ListCorpusFiles(dir);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  std::vector<std::string> want = {dir + "/a", dir + "/b.txt", dir + "/late", dir + "/sub/c"};
  EXPECT_EQ(*files, want);
}

TEST(DataCorpusTest, SingleFileAndErrors) {
  ScopedTempDir scratch("corpus_err");
  std::string dir = scratch.path();
  Write(dir + "/one.txt", "text");
  EXPECT_EQ(ListCorpusFiles(dir + "/one.txt").value(), std::vector<std::string>{dir + "/one.txt"});

  auto missing = ListCorpusFiles(dir + "/nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(dir + "/nope"), std::string::npos);

  fs::create_directories(dir + "/bin");
  Write(dir + "/bin/x.dat", std::string("\0\0", 2));
  auto empty = ListCorpusFiles(dir + "/bin");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find(dir + "/bin"), std::string::npos);
}

TEST(DataCorpusTest, FortunesCorpus) {
  const std::string fortunes = "/usr/share/games/fortunes";
  if (!IsDirectory(fortunes)) GTEST_SKIP() << fortunes << " not installed";
  auto files = ListCorpusFiles(fortunes);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  EXPECT_GT(files->size(), 10u);
  for (const auto& f : *files) {
    EXPECT_FALSE(f.ends_with(".dat")) << f;
    EXPECT_FALSE(f.ends_with(".u8")) << f;
  }
}

TEST(DataTokenCacheTest, ReusedThenRebuiltWhenCorrupt) {
  ScopedTempDir scratch("cache");
  std::string dir = scratch.path();
  fs::create_directories(dir + "/data");
  Write(dir + "/data/a.txt", "hello world\n");
  Write(dir + "/data/b.txt", "second file\n");
  auto files = ListCorpusFiles(dir + "/data").value();
  ByteTokenizer bytes;
  const std::string cache = dir + "/out/.cache";

  auto first = LoadOrBuildTokens(bytes, files, cache);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->loaded_from_cache);
  EXPECT_EQ(bytes.Decode(first->tokens), "hello world\nsecond file\n");
  EXPECT_EQ(fs::path(first->cache_path).parent_path(), fs::path(cache));
  EXPECT_TRUE(fs::path(first->cache_path).filename().string().starts_with("tokens-"));
  const auto mtime = fs::last_write_time(first->cache_path);

  auto second = LoadOrBuildTokens(bytes, files, cache);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->loaded_from_cache);
  EXPECT_EQ(second->tokens, first->tokens);
  EXPECT_EQ(fs::last_write_time(first->cache_path), mtime);

  // Flip one payload byte: the checksum catches it and the cache is rebuilt.
  std::string data = ReadFile(first->cache_path).value();
  data[kTokenCacheHeaderBytes + 3] ^= 0x1;
  Write(first->cache_path, data);
  auto third = LoadOrBuildTokens(bytes, files, cache);
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(third->loaded_from_cache);
  EXPECT_EQ(third->tokens, first->tokens);

  // Truncated: detected and rebuilt too; afterwards the cache is good again.
  Write(first->cache_path, data.substr(0, 20));
  auto fourth = LoadOrBuildTokens(bytes, files, cache);
  ASSERT_TRUE(fourth.ok());
  EXPECT_FALSE(fourth->loaded_from_cache);
  EXPECT_TRUE(LoadOrBuildTokens(bytes, files, cache)->loaded_from_cache);
  EXPECT_FALSE(FileExists(dir + "/data/.cache"));
}

class OtherTokenizer final : public Tokenizer {
 public:
  Result<std::vector<int32_t>> Encode(const std::string& text) const override { return bytes_.Encode(text); }
  std::string Decode(const std::vector<int32_t>& ids) const override { return bytes_.Decode(ids); }
  int64_t vocab_size() const override { return 256; }
  std::string id() const override { return "other"; }

 private:
  ByteTokenizer bytes_;
};

TEST(DataTokenCacheTest, KeyFollowsContentAndTokenizer) {
  ScopedTempDir scratch("cache_key");
  std::string dir = scratch.path();
  Write(dir + "/a.txt", "one");
  ByteTokenizer bytes;
  uint64_t k1 = TokenCacheKey(bytes, {dir + "/a.txt"}).value();
  EXPECT_EQ(TokenCacheKey(bytes, {dir + "/a.txt"}).value(), k1);
  EXPECT_NE(TokenCacheKey(OtherTokenizer(), {dir + "/a.txt"}).value(), k1);
  Write(dir + "/a.txt", "two");  // same size, new content
  EXPECT_NE(TokenCacheKey(bytes, {dir + "/a.txt"}).value(), k1);
  EXPECT_FALSE(TokenCacheKey(bytes, {dir + "/gone.txt"}).ok());
}

}  // namespace
}  // namespace elastrain
