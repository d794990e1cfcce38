// A weighted blend of datasets (dataset_path "0.7 /data/a 0.3 /data/b", Megatron-LM's
// syntax). The blend is itself a Dataset: sample i of a split is a pure function of i,
// the weights and the sources' sizes, so the sampler's exactly-once order (a function of
// the seed and the step) holds for a blend as for any other dataset.
//
// Size: a split of the blend has as many samples as its sources' splits together (one
// epoch of the blend is as long as one epoch of every source). Sample i goes to the
// source whose realised share is furthest below its weight (Megatron's
// build_blending_indices: the source s maximising w_s * (i + 1) - taken_s, the first on
// ties; w normalised to sum 1), so every prefix of the blend holds each source within
// one sample of its share. The k-th of the count_s samples given to a source of size_s
// windows reads its window k mod size_s when count_s >= size_s (an up-weighted source
// repeats), else floor(k * size_s / count_s) (a down-weighted source contributes evenly
// spaced windows, the same ones every epoch).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace elastrain {

struct BlendAssignment {
  std::vector<uint16_t> source;  // [n]: the source of sample i
  std::vector<int64_t> rank;     // [n]: how many samples of that source come before i
  std::vector<int64_t> count;    // [sources]: samples given to each source
};
// Preconditions (the caller validated): 1 <= weights.size() <= 65535, each weight
// positive and finite, n >= 0.
BlendAssignment AssignBlend(const std::vector<double>& weights, int64_t n);

// The window of a source of `size` windows that its k-th of `count` samples reads.
int64_t SourceWindow(int64_t k, int64_t count, int64_t size);

// The blend of `sources` (all with the same seq_len) with `weights` (same length).
std::unique_ptr<Dataset> MakeBlendedDataset(std::vector<std::unique_ptr<Dataset>> sources,
                                            std::vector<double> weights, std::vector<std::string> names);

}  // namespace elastrain
