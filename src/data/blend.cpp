#include "data/blend.h"

#include <cstdlib>
#include <numeric>

#include "common/log.h"

namespace elastrain {

BlendAssignment AssignBlend(const std::vector<double>& weights, int64_t n) {
  const size_t s_count = weights.size();
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  std::vector<double> w(s_count);
  for (size_t s = 0; s < s_count; ++s) w[s] = weights[s] / total;
  BlendAssignment a;
  a.source.resize(static_cast<size_t>(n));
  a.rank.resize(static_cast<size_t>(n));
  a.count.assign(s_count, 0);
  for (int64_t i = 0; i < n; ++i) {
    size_t best = 0;
    double best_error = -1e300;
    for (size_t s = 0; s < s_count; ++s) {
      const double error = w[s] * static_cast<double>(i + 1) - static_cast<double>(a.count[s]);
      if (error > best_error) {
        best_error = error;
        best = s;
      }
    }
    a.source[static_cast<size_t>(i)] = static_cast<uint16_t>(best);
    a.rank[static_cast<size_t>(i)] = a.count[best]++;
  }
  return a;
}

int64_t SourceWindow(int64_t k, int64_t count, int64_t size) {
  if (count >= size) return k % size;
  return static_cast<int64_t>(static_cast<unsigned __int128>(k) * static_cast<uint64_t>(size) /
                              static_cast<uint64_t>(count));
}

namespace {
class BlendedDataset final : public Dataset {
 public:
  BlendedDataset(std::vector<std::unique_ptr<Dataset>> sources, std::vector<double> weights,
                 std::vector<std::string> names)
      : sources_(std::move(sources)), weights_(std::move(weights)), names_(std::move(names)) {
    for (int split = 0; split < 2; ++split) {
      int64_t n = 0;
      for (const auto& src : sources_) n += src->num_samples(static_cast<Split>(split));
      plan_[split] = AssignBlend(weights_, n);
    }
  }

  int64_t num_samples(Split split) const override {
    return static_cast<int64_t>(plan_[static_cast<int>(split)].source.size());
  }
  int64_t seq_len() const override { return sources_.front()->seq_len(); }

  void GetSample(Split split, int64_t index, int32_t* out) const override {
    const BlendAssignment& a = plan_[static_cast<int>(split)];
    const int64_t n = num_samples(split);
    if (index < 0 || index >= n) {
      LOG_ERROR("Dataset::GetSample: blend index {} out of range [0, {})", index, n);
      std::abort();
    }
    const size_t s = a.source[static_cast<size_t>(index)];
    const Dataset& src = *sources_[s];
    src.GetSample(split, SourceWindow(a.rank[static_cast<size_t>(index)], a.count[s], src.num_samples(split)), out);
  }

  std::string Describe() const override {
    std::string d = "blend of " + std::to_string(sources_.size()) + " sources: " +
                    std::to_string(num_samples(Split::kTrain)) + " train / " +
                    std::to_string(num_samples(Split::kEval)) + " eval windows of " + std::to_string(seq_len() + 1) +
                    " tokens;";
    const double total = std::accumulate(weights_.begin(), weights_.end(), 0.0);
    for (size_t s = 0; s < sources_.size(); ++s)
      d += " " + names_[s] + " weight " + std::to_string(weights_[s] / total).substr(0, 5) + " (" +
           std::to_string(plan_[0].count[s]) + " samples of its " +
           std::to_string(sources_[s]->num_samples(Split::kTrain)) + " train windows per epoch)" +
           (s + 1 < sources_.size() ? "," : "");
    return d;
  }

 private:
  std::vector<std::unique_ptr<Dataset>> sources_;
  std::vector<double> weights_;
  std::vector<std::string> names_;
  BlendAssignment plan_[2];  // by Split
};
}  // namespace

std::unique_ptr<Dataset> MakeBlendedDataset(std::vector<std::unique_ptr<Dataset>> sources,
                                            std::vector<double> weights, std::vector<std::string> names) {
  return std::make_unique<BlendedDataset>(std::move(sources), std::move(weights), std::move(names));
}

}  // namespace elastrain
