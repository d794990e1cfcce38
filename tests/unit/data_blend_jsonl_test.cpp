// JSONL documents (src/data/jsonl.h), weighted blends (src/data/blend.h) and the
// dataset_path blend syntax (src/common/dataset_path.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/dataset_path.h"
#include "common/files.h"
#include "config/config.h"
#include "data/blend.h"
#include "data/dataset.h"
#include "data/jsonl.h"
#include "test_dirs.h"

namespace elastrain {
namespace {
using ::testing::HasSubstr;

TEST(Jsonl, DocumentsInLineOrderEachFollowedByANewline) {
  const std::string content =
      "\xEF\xBB\xBF{\"text\": \"first doc\", \"id\": 1}\n"
      "\n"
      "   \r\n"
      "{\"id\": 2, \"text\": \"caf\\u00e9\\nline two\"}\r\n"
      "{\"text\": \"\"}\n"
      "{\"text\": \"no newline at the end\"}";
  auto t = JsonlDocumentsText("c.jsonl", content, "text");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(*t, "first doc\ncaf\xC3\xA9\nline two\n\nno newline at the end\n");
  auto other = JsonlDocumentsText("c.jsonl", "{\"body\": \"b\", \"text\": 1}\n", "body");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(*other, "b\n");
}

TEST(Jsonl, ABadLineIsAnErrorNamingFileAndLine) {
  auto refuse = [](const std::string& content, const std::string& why) {
    auto t = JsonlDocumentsText("dir/c.jsonl", content, "text");
    ASSERT_FALSE(t.ok()) << content;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(t.status().message(), HasSubstr(why)) << content;
  };
  refuse("{\"text\": \"a\"}\n{\"text\": \"b\"\n", "dir/c.jsonl:2: not valid JSON");
  refuse("{\"text\": \"a\"}\n\n[\"text\"]\n", "dir/c.jsonl:3: a JSON array, expected an object per line");
  refuse("\"text\"\n", "dir/c.jsonl:1: a JSON string, expected an object");
  refuse("{\"txt\": \"a\"}\n", "dir/c.jsonl:1: no field \"text\"");
  refuse("{\"text\": null}\n", "dir/c.jsonl:1: field \"text\" is a null, expected a string");
  refuse("{\"text\": [\"a\"]}\n", "field \"text\" is a array");
  refuse("{\"text\": \"a\"} {\"text\": \"b\"}\n", "dir/c.jsonl:1: not valid JSON");
  refuse("{\"text\": \"\xff\xfe\"}\n", "dir/c.jsonl:1: not valid JSON");  // not UTF-8
  refuse(std::string(100000, '[') + "\n", "dir/c.jsonl:1: not valid JSON");  // deep, unclosed
}

DatasetOptions Options(DatasetType type, const std::string& path, const std::string& cache) {
  DatasetOptions o;
  o.type = type;
  o.path = path;
  o.cache_dir = cache;
  o.seq_len = 8;
  o.vocab_size = 256;
  o.eval_split_fraction = 0.1;
  return o;
}

std::vector<int32_t> Sample(const Dataset& ds, Split s, int64_t i) {
  std::vector<int32_t> w(static_cast<size_t>(ds.seq_len() + 1));
  ds.GetSample(s, i, w.data());
  return w;
}

TEST(Jsonl, ADatasetTokenisesTheFieldThroughTheTokenCache) {
  ScopedTempDir d("jsonl_ds");
  std::string lines, expect;
  for (int i = 0; i < 20; ++i) {
    const std::string doc = "document number " + std::to_string(i);
    lines += "{\"meta\": {\"i\": " + std::to_string(i) + "}, \"content\": \"" + doc + "\"}\n";
    expect += doc + "\n";
  }
  ASSERT_TRUE(MakeDirs(d.path() + "/data").ok());
  ASSERT_TRUE(WriteFileAtomic(d.path() + "/data/a.jsonl", lines).ok());
  ASSERT_TRUE(WriteFileAtomic(d.path() + "/data/notes.txt", "not jsonl").ok());
  DatasetOptions o = Options(DatasetType::kJsonl, d.path() + "/data", d.path() + "/cache");
  o.text_field = "content";
  auto ds = OpenDataset(o);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  const int64_t windows = (static_cast<int64_t>(expect.size()) - 1) / 8;
  EXPECT_EQ((*ds)->num_samples(Split::kTrain) + (*ds)->num_samples(Split::kEval), windows);
  auto w = Sample(**ds, Split::kTrain, 1);
  EXPECT_EQ(std::string(w.begin(), w.end()), expect.substr(8, 9));
  auto files = ListFilesRecursive(d.path() + "/cache");
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(files->size(), 1u);
  // Reopened: from the cache, same samples. Another field: another cache file.
  auto again = OpenDataset(o);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(Sample(**again, Split::kTrain, 1), w);
  o.text_field = "missing";
  auto bad = OpenDataset(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr(d.path() + "/data/a.jsonl:1: no field \"missing\""));
}

TEST(DatasetPath, OnePathOrAWeightedList) {
  auto one = ParseDatasetPath("/data/my corpus.txt");
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].path, "/data/my corpus.txt");
  EXPECT_FALSE(IsDatasetBlend("/data/a"));
  EXPECT_FALSE(IsDatasetBlend("0.5 /data/a 0.5"));
  EXPECT_FALSE(IsDatasetBlend("a 0.5 b 0.5"));
  EXPECT_TRUE(IsDatasetBlend(" 0.7 /data/a\t0.3 /data/b "));
  auto blend = ParseDatasetPath("0.7 /data/a 3e-1 /data/b");
  ASSERT_TRUE(blend.ok());
  ASSERT_EQ(blend->size(), 2u);
  EXPECT_DOUBLE_EQ((*blend)[1].weight, 0.3);
  EXPECT_EQ((*blend)[1].path, "/data/b");
  for (const char* bad : {"0 /a 1 /b", "-1 /a 1 /b", "inf /a 1 /b", "nan /a 1 /b"}) {
    auto r = ParseDatasetPath(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("must be a positive finite number")) << bad;
  }
  EXPECT_TRUE(ParseDatasetPath("")->empty());
  // A file whose name has the blend form is that file.
  ScopedTempDir d("blend_name");
  const std::string odd = d.path() + "/2024 notes.txt";
  EXPECT_TRUE(IsDatasetBlend("1 " + d.path() + "/notes.txt") && IsDatasetBlend("2024 notes.txt"));
  ASSERT_TRUE(WriteFileAtomic(odd, "x").ok());
  const std::string cwd = std::filesystem::current_path().string();
  std::filesystem::current_path(d.path());
  EXPECT_FALSE(IsDatasetBlend("2024 notes.txt"));
  auto named = ParseDatasetPath("2024 notes.txt");
  ASSERT_TRUE(named.ok());
  EXPECT_EQ((*named)[0].path, "2024 notes.txt");
  std::filesystem::current_path(cwd);
}

TEST(Blend, EveryPrefixHoldsEachSourceWithinOneSampleOfItsShare) {
  const std::vector<double> weights = {0.5, 0.3, 0.2, 1e-3};
  const double total = 1.001;
  BlendAssignment a = AssignBlend(weights, 5000);
  std::vector<int64_t> taken(weights.size(), 0);
  for (int64_t i = 0; i < 5000; ++i) {
    const size_t s = a.source[static_cast<size_t>(i)];
    EXPECT_EQ(a.rank[static_cast<size_t>(i)], taken[s]);
    ++taken[s];
    for (size_t k = 0; k < weights.size(); ++k)
      ASSERT_LE(std::fabs(static_cast<double>(taken[k]) - weights[k] / total * static_cast<double>(i + 1)), 1.0)
          << "source " << k << " after " << i + 1;
  }
  EXPECT_EQ(taken, a.count);
  // Deterministic: the same weights give the same assignment.
  EXPECT_EQ(AssignBlend(weights, 5000).source, a.source);
}

TEST(Blend, SourceWindowRepeatsSmallSourcesAndSpreadsOverLargeOnes) {
  std::map<int64_t, int> seen;
  for (int64_t k = 0; k < 10; ++k) ++seen[SourceWindow(k, 10, 4)];
  EXPECT_EQ(seen, (std::map<int64_t, int>{{0, 3}, {1, 3}, {2, 2}, {3, 2}}));
  std::vector<int64_t> spread;
  for (int64_t k = 0; k < 4; ++k) spread.push_back(SourceWindow(k, 4, 10));
  EXPECT_EQ(spread, (std::vector<int64_t>{0, 2, 5, 7}));
  EXPECT_EQ(SourceWindow(3, 4, int64_t{1} << 62), int64_t{3} << 60);  // 3 * 2^62 / 4: no overflow
}

TEST(Blend, ABlendOfTwoJsonlSourcesMapsEachSampleToItsSource) {
  ScopedTempDir d("blend_ds");
  auto corpus = [](char c, int docs) {
    std::string s;
    for (int i = 0; i < docs; ++i) s += "{\"text\": \"" + std::string(15, c) + "\"}\n";
    return s;
  };
  ASSERT_TRUE(WriteFileAtomic(d.path() + "/a.jsonl", corpus('a', 40)).ok());  // 640 bytes
  ASSERT_TRUE(WriteFileAtomic(d.path() + "/b.jsonl", corpus('b', 10)).ok());  // 160 bytes
  DatasetOptions o = Options(DatasetType::kJsonl, "1 " + d.path() + "/a.jsonl 3 " + d.path() + "/b.jsonl", "");
  auto ds = OpenDataset(o);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  auto a = OpenDataset(Options(DatasetType::kJsonl, d.path() + "/a.jsonl", ""));
  auto b = OpenDataset(Options(DatasetType::kJsonl, d.path() + "/b.jsonl", ""));
  ASSERT_TRUE(a.ok() && b.ok());
  for (Split sp : {Split::kTrain, Split::kEval}) {
    const int64_t n = (*ds)->num_samples(sp);
    EXPECT_EQ(n, (*a)->num_samples(sp) + (*b)->num_samples(sp));
    int64_t from_b = 0;
    for (int64_t i = 0; i < n; ++i) {
      auto w = Sample(**ds, sp, i);
      const bool is_b = std::count(w.begin(), w.end(), 'b') > 0;
      EXPECT_TRUE(is_b || std::count(w.begin(), w.end(), 'a') > 0);
      from_b += is_b;
    }
    EXPECT_NEAR(static_cast<double>(from_b), 0.75 * static_cast<double>(n), 1.0);
  }
  // Weight 3 on b's 17 train windows: each repeats; samples are b's own windows.
  std::vector<int32_t> first_b;
  for (int64_t i = 0; i < (*ds)->num_samples(Split::kTrain) && first_b.empty(); ++i)
    if (auto w = Sample(**ds, Split::kTrain, i); w[0] == 'b' || w[8] == 'b') first_b = w;
  EXPECT_EQ(first_b, Sample(**b, Split::kTrain, 0));
  o.path = "1 " + d.path() + "/a.jsonl 1 " + d.path() + "/missing.jsonl";
  auto missing = OpenDataset(o);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("missing.jsonl: no such file"));
  o.type = DatasetType::kSynthetic;
  auto synthetic = OpenDataset(o);
  ASSERT_FALSE(synthetic.ok());
  EXPECT_THAT(synthetic.status().message(), HasSubstr("a blend needs files"));
}

TEST(DatasetConfig, TrainDataColumnsTakesMaxTextsOneElementListAndBlendsAreChecked) {
  auto c = LoadConfigText("dataset_type: jsonl\ndataset_path: /\ntrain_data_columns: ['body']\n", "t.yml", {}, nullptr);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->train_data_columns, "body");
  auto cli = LoadConfigText("", "t.yml", {"dataset_type=jsonl", "dataset_path=/", "train_data_columns=[content]"}, nullptr);
  ASSERT_TRUE(cli.ok()) << cli.status().ToString();
  EXPECT_EQ(cli->train_data_columns, "content");
  auto two = LoadConfigText("train_data_columns: ['a', 'b']\n", "t.yml", {}, nullptr);
  ASSERT_FALSE(two.ok());
  // A MaxText file's DPO columns are for data elastrain does not read: ignored.
  std::vector<std::string> ignored;
  auto dpo = LoadConfigText("hardware: cpu\ndataset_type: synthetic\ntrain_data_columns: ['chosen', 'rejected']\n",
                            "dpo.yml", {}, &ignored);
  ASSERT_TRUE(dpo.ok()) << dpo.status().ToString();
  EXPECT_EQ(dpo->train_data_columns, "text");
  EXPECT_NE(std::find(ignored.begin(), ignored.end(), "train_data_columns"), ignored.end());
  auto weight = LoadConfigText("", "t.yml", {"dataset_type=llmc", "dataset_path=0.5 /a -0.5 /b"}, nullptr);
  ASSERT_FALSE(weight.ok());
  EXPECT_THAT(weight.status().message(), HasSubstr("weight -0.5 of /b must be a positive finite number"));
  auto none = LoadConfigText("", "t.yml", {"dataset_type=megatron"}, nullptr);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("dataset_type=megatron needs files"));
}

}  // namespace
}  // namespace elastrain
