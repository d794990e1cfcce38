// The tokenizer_type key (src/config/config_keys.cpp, config_validate.cpp): MaxText's words
// plus bytes, empty by default, checked against tokenizer_path for text data.
#include <gtest/gtest.h>

#include "common/files.h"
#include "config/config.h"
#include "test_dirs.h"

namespace elastrain {
namespace {

Result<TrainConfig> Load(const std::vector<std::string>& overrides) {
  return LoadConfigText("", "test", overrides, nullptr);
}

TEST(ConfigTokenizerType, WordsAndDefault) {
  auto plain = Load({});
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_FALSE(plain->tokenizer_type.has_value());
  for (auto [word, type] : {std::pair{"bytes", TokenizerType::kBytes},
                            std::pair{"sentencepiece", TokenizerType::kSentencePiece},
                            std::pair{"tiktoken", TokenizerType::kTiktoken},
                            std::pair{"huggingface", TokenizerType::kHuggingFace}}) {
    auto c = Load({std::string("tokenizer_type=") + word});
    ASSERT_TRUE(c.ok()) << word << ": " << c.status().ToString();
    EXPECT_EQ(c->tokenizer_type, type) << word;
  }
  auto bad = Load({"tokenizer_type=gpt2"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tokenizer_type"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("huggingface"), std::string::npos) << bad.status().message();
}

TEST(ConfigTokenizerType, CheckedAgainstThePathForTextData) {
  ScopedTempDir scratch("tok_type");
  const std::string corpus = scratch.path() + "/corpus.txt";
  ASSERT_TRUE(WriteFileAtomic(corpus, "some text\n").ok());
  auto no_path = Load({"dataset_type=text", "dataset_path=" + corpus, "tokenizer_type=tiktoken"});
  ASSERT_FALSE(no_path.ok());
  EXPECT_NE(no_path.status().message().find("tokenizer_path"), std::string::npos) << no_path.status().message();
  auto bytes_with_path = Load({"dataset_type=text", "dataset_path=" + corpus, "tokenizer_type=bytes",
                               "tokenizer_path=" + corpus});
  ASSERT_FALSE(bytes_with_path.ok());
  EXPECT_NE(bytes_with_path.status().message().find("takes no tokenizer_path"), std::string::npos)
      << bytes_with_path.status().message();
  // MaxText's default type with no path is bytes, not an error.
  EXPECT_TRUE(Load({"dataset_type=text", "dataset_path=" + corpus, "tokenizer_type=sentencepiece"}).ok());
  // Synthetic data reads no tokenizer.
  EXPECT_TRUE(Load({"tokenizer_type=tiktoken"}).ok());
}

}  // namespace
}  // namespace elastrain
