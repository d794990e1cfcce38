// Where training data comes from (the dataset_type config key, MaxText's name). Here in
// common so that the config names it and data/ opens it without depending on each other.
#pragma once

#include <array>
#include <string_view>

#include "common/choice.h"

namespace elastrain {

enum class DatasetType {
  kSynthetic,  // a deterministic learnable sequence, no files (data/dataset.h)
  kText,       // a text file or a folder of them, tokenised (dataset_path, tokenizer_path)
  kLlmc,       // llm.c token files: a 256 x int32 header, then uint16 or uint32 tokens (data/token_files.h)
  kNanoGpt,    // nanoGPT token files: headerless uint16 tokens
  kMegatron,   // Megatron-LM indexed datasets, PREFIX.bin + PREFIX.idx (MMIDIDX)
  kJsonl,      // JSON Lines documents, the text in train_data_columns, tokenised like text
};
// MaxText's tfds, hf and grain are refused by name when the config loads.
inline constexpr std::array<Choice<DatasetType>, 6> kDatasetTypeChoices = {{
    {"synthetic", DatasetType::kSynthetic},
    {"text", DatasetType::kText},
    {"llmc", DatasetType::kLlmc},
    {"nanogpt", DatasetType::kNanoGpt},
    {"megatron", DatasetType::kMegatron},
    {"jsonl", DatasetType::kJsonl},
}};
constexpr std::string_view DatasetTypeName(DatasetType t) { return ChoiceWord(kDatasetTypeChoices, t); }

}  // namespace elastrain
