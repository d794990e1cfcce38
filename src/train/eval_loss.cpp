#include "train/eval_loss.h"

#include <algorithm>

namespace elastrain {

int64_t EvalSampleCount(const Dataset& data, int64_t eval_steps, int64_t batch) {
  return std::min(data.num_samples(Split::kEval), eval_steps * batch);
}

void LoadSampleRows(const Dataset& data, Split split, const std::vector<int64_t>& indices, int64_t begin,
                    int64_t rows, int64_t T, int32_t* sample, int32_t* inputs, int32_t* targets) {
  for (int64_t r = 0; r < rows; ++r) {
    data.GetSample(split, indices[begin + r], sample);
    std::copy(sample, sample + T, inputs + r * T);
    std::copy(sample + 1, sample + T + 1, targets + r * T);
  }
}

Result<double> EvalLossSum(Transformer<float>& model, const float* params, const Dataset& data,
                           const std::vector<int64_t>& indices, int64_t micro_batches, int64_t batch,
                           const std::function<Status()>& after_pass, Split split) {
  const int64_t T = model.seq_len();
  std::vector<int32_t> sample(T + 1), inputs(batch * T), targets(batch * T);
  double loss_sum = 0;
  for (int64_t mb = 0, begin = 0; mb < micro_batches; ++mb, begin += batch) {
    const int64_t n = std::clamp<int64_t>(static_cast<int64_t>(indices.size()) - begin, 0, batch);
    LoadSampleRows(data, split, indices, begin, n, T, sample.data(), inputs.data(), targets.data());
    loss_sum += model.Forward(params, inputs.data(), targets.data(), n);
    if (after_pass) ELASTRAIN_RETURN_IF_ERROR(after_pass());
  }
  return loss_sum;
}

}  // namespace elastrain
