// The dataset_path config key: one path, or Megatron-LM's weighted list of them
// ("0.7 /data/a 0.3 /data/b", its --data-path syntax) for a blend of sources. Here in
// common so that the config, the agents' path admission and data/ read it with one parser.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace elastrain {

struct WeightedPath {
  double weight = 1;  // positive and finite; a single path has weight 1
  std::string path;
};

// `text` is a blend when it splits on whitespace into two or more words that alternate
// number, path (each number read whole by strtod, e.g. "0.7", "3", "1e-1"; a path word
// is not a number); then every weight must be positive and finite (an error names it).
// Anything else is one path, spaces and all, with weight 1, and so is a text that names
// an existing file or directory as a whole ("2024 notes.txt"). Empty text: an empty list.
// The weights are returned as written, not normalised.
Result<std::vector<WeightedPath>> ParseDatasetPath(const std::string& text);

// True when `text` has the blend form above (whatever its weights' values).
bool IsDatasetBlend(const std::string& text);

}  // namespace elastrain
