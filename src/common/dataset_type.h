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
};
// MaxText's tfds, hf and grain are refused by name when the config loads.
inline constexpr std::array<Choice<DatasetType>, 2> kDatasetTypeChoices = {{
    {"synthetic", DatasetType::kSynthetic},
    {"text", DatasetType::kText},
}};
constexpr std::string_view DatasetTypeName(DatasetType t) { return ChoiceWord(kDatasetTypeChoices, t); }

}  // namespace elastrain
