// The evaluation loss, as the trainer computes it every eval_interval steps and as
// `elastrain eval` computes it for a checkpoint: one code path, so that the two agree.
// The eval set is the first min(eval split, eval_steps * per_device_batch_size) samples
// of the eval split, whatever the world size; the loss is the mean over their tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "common/status.h"
#include "data/dataset.h"
#include "transformer/transformer.h"

namespace elastrain {

// How many eval samples an evaluation reads: min(the split's samples, eval_steps * batch).
int64_t EvalSampleCount(const Dataset& data, int64_t eval_steps, int64_t batch);

// Loads samples indices[begin, begin+rows) of `split`: inputs and targets (rows, T), each
// sample of T+1 tokens shifted by one; `sample` holds T+1 tokens (scratch).
void LoadSampleRows(const Dataset& data, Split split, const std::vector<int64_t>& indices, int64_t begin,
                    int64_t rows, int64_t T, int32_t* sample, int32_t* inputs, int32_t* targets);

// The SUM of the token losses of samples `indices` of `split` (the trainer's: the eval
// split) in `micro_batches` forward passes of up to `batch` rows (the model's max_batch at least): passes beyond the samples run
// with no rows, as FSDP ranks with a smaller share must (their gathers are collective).
// `after_pass` (may be empty) is asked after every pass; an error from it ends the
// evaluation (the trainer's check of its collectives).
Result<double> EvalLossSum(Transformer<float>& model, const float* params, const Dataset& data,
                           const std::vector<int64_t>& indices, int64_t micro_batches, int64_t batch,
                           const std::function<Status()>& after_pass = {}, Split split = Split::kEval);

}  // namespace elastrain
