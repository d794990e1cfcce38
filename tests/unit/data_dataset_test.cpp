#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "common/files.h"
#include "data/dataset.h"
#include "test_dirs.h"

namespace elastrain {
namespace {
namespace fs = std::filesystem;


DatasetOptions TextOptions(const std::string& dir, int64_t T) {
  DatasetOptions o;
  o.type = DatasetType::kText;
  o.path = dir + "/corpus.txt";
  o.cache_dir = dir + "/out/.cache";
  o.seq_len = T;
  o.vocab_size = 256;
  o.eval_split_fraction = 0.1;
  return o;
}

std::string Text(size_t n) {
  std::string s(n, ' ');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 26) % 26);
  return s;
}

TEST(DataDatasetTest, TextWindowsAndSplitSizes) {
  ScopedTempDir scratch("ds_text");
  std::string dir = scratch.path();
  const std::string text = Text(1000);
  ASSERT_TRUE(WriteFileAtomic(dir + "/corpus.txt", text).ok());
  auto ds = OpenDataset(TextOptions(dir, 10));
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  // (1000 - 1) / 10 = 99 windows; round(9.9) = 10 eval, 89 train.
  EXPECT_EQ((*ds)->num_samples(Split::kTrain), 89);
  EXPECT_EQ((*ds)->num_samples(Split::kEval), 10);
  EXPECT_EQ((*ds)->seq_len(), 10);

  std::vector<int32_t> out(11);
  (*ds)->GetSample(Split::kTrain, 3, out.data());
  for (int t = 0; t <= 10; ++t) EXPECT_EQ(out[t], static_cast<unsigned char>(text[30 + t]));
  (*ds)->GetSample(Split::kEval, 9, out.data());  // the last window ends at token 990
  for (int t = 0; t <= 10; ++t) EXPECT_EQ(out[t], static_cast<unsigned char>(text[980 + t]));

  // The second open reads the cache instead of re-tokenising: the file is not rewritten.
  ASSERT_EQ(std::distance(fs::directory_iterator(dir + "/out/.cache"), fs::directory_iterator()), 1);
  fs::path cache_file = fs::directory_iterator(dir + "/out/.cache")->path();
  auto mtime = fs::last_write_time(cache_file);
  ASSERT_TRUE(OpenDataset(TextOptions(dir, 10)).ok());
  EXPECT_EQ(fs::last_write_time(cache_file), mtime);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir + "/out/.cache"), fs::directory_iterator()), 1);
}

TEST(DataDatasetTest, NoEvalSplitWhenFractionIsZero) {
  ScopedTempDir scratch("ds_noeval");
  std::string dir = scratch.path();
  ASSERT_TRUE(WriteFileAtomic(dir + "/corpus.txt", Text(101)).ok());
  DatasetOptions o = TextOptions(dir, 10);
  o.eval_split_fraction = 0;
  auto ds = OpenDataset(o);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ((*ds)->num_samples(Split::kTrain), 10);
  EXPECT_EQ((*ds)->num_samples(Split::kEval), 0);
}

TEST(DataDatasetTest, TooSmallCorpusIsAnError) {
  ScopedTempDir scratch("ds_small");
  std::string dir = scratch.path();
  ASSERT_TRUE(WriteFileAtomic(dir + "/corpus.txt", Text(15)).ok());
  auto ds = OpenDataset(TextOptions(dir, 10));
  ASSERT_FALSE(ds.ok());
  const std::string m = ds.status().message();
  EXPECT_EQ(ds.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(m.find(dir + "/corpus.txt"), std::string::npos) << m;
  EXPECT_NE(m.find("15 tokens"), std::string::npos) << m;
  EXPECT_NE(m.find("need 21 tokens"), std::string::npos) << m;
  // 21 tokens make two windows: one train, one eval.
  ASSERT_TRUE(WriteFileAtomic(dir + "/corpus.txt", Text(21)).ok());
  EXPECT_TRUE(OpenDataset(TextOptions(dir, 10)).ok());
}

TEST(DataDatasetTest, TokenizerVocabMustFitModel) {
  ScopedTempDir scratch("ds_vocab");
  std::string dir = scratch.path();
  ASSERT_TRUE(WriteFileAtomic(dir + "/corpus.txt", Text(500)).ok());
  DatasetOptions o = TextOptions(dir, 10);
  o.vocab_size = 100;
  auto ds = OpenDataset(o);
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.status().message().find("vocabulary of 256 tokens does not fit vocab_size=100"), std::string::npos)
      << ds.status().message();
  EXPECT_FALSE(FileExists(o.cache_dir)) << "bad input changes nothing on disk";
}

TEST(DataDatasetTest, OptionErrorsNameTheKey) {
  DatasetOptions o;
  o.seq_len = 8;
  o.vocab_size = 256;
  o.type = DatasetType::kText;
  EXPECT_NE(OpenDataset(o).status().message().find("dataset_path"), std::string::npos);
  o.path = "/nonexistent/corpus";
  EXPECT_NE(OpenDataset(o).status().message().find("/nonexistent/corpus"), std::string::npos)
      << OpenDataset(o).status().ToString();
  o.type = DatasetType::kSynthetic;
  o.eval_split_fraction = 1.0;
  EXPECT_NE(OpenDataset(o).status().message().find("eval_split_fraction"), std::string::npos);
}

TEST(DataDatasetTest, SyntheticIsDeterministicAndLearnable) {
  DatasetOptions o;
  o.type = DatasetType::kSynthetic;
  o.seq_len = 16;
  o.vocab_size = 97;
  o.seed = 5;
  auto a = OpenDataset(o), b = OpenDataset(o);
  ASSERT_TRUE(a.ok() && b.ok());
  o.seed = 6;
  auto c = OpenDataset(o);
  EXPECT_EQ((*a)->num_samples(Split::kTrain), kSyntheticTrainSamples);
  EXPECT_EQ((*a)->num_samples(Split::kEval), kSyntheticEvalSamples);

  std::vector<int32_t> x(17), y(17), z(17), e(17);
  int differ_seed = 0, differ_split = 0;
  for (int64_t i : {0, 1, 2, 1000, 4095}) {
    (*a)->GetSample(Split::kTrain, i, x.data());
    (*b)->GetSample(Split::kTrain, i, y.data());
    (*c)->GetSample(Split::kTrain, i, z.data());
    (*a)->GetSample(Split::kEval, i, e.data());
    EXPECT_EQ(x, y);
    differ_seed += x != z;
    differ_split += x != e;
    const int32_t step = (x[1] - x[0] + 97) % 97;
    EXPECT_GE(step, 1);
    EXPECT_LE(step, 8);
    for (int t = 0; t < 17; ++t) {
      EXPECT_GE(x[t], 0);
      EXPECT_LT(x[t], 97);
      if (t > 0) {
        EXPECT_EQ(x[t], (x[t - 1] + step) % 97);
      }
    }
  }
  EXPECT_GE(differ_seed, 4);
  EXPECT_GE(differ_split, 4);
}

}  // namespace
}  // namespace elastrain
