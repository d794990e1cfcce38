// `elastrain checkpoint import` and `checkpoint export --format hf`: Hugging Face model
// directories (config.json + model.safetensors, or shards named by
// model.safetensors.index.json) to elastrain checkpoints and back (docs/checkpoint-format.md).
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace elastrain::convert {

struct ImportResult {
  std::string model_yaml_path;  // <out>/model.yml: the model's keys, for `train`
  int64_t tensors = 0;
  int64_t bytes = 0;            // of the parameters written
};

// Reads `hf_dir` (config.json; model.safetensors or model.safetensors.index.json and its
// shards; F32, F16, BF16 or F64 tensors) and writes `out_dir`, which must not exist or be
// empty: a committed step-0 checkpoint of the parameters (one rank's file, loadable by any
// mesh through load_parameters_path) and model.yml. Every HF tensor of the model must be
// there in its shape, and every tensor there must be one of the model's (buffers apart);
// each error names the file and the tensor. A failure leaves no out_dir behind.
Result<ImportResult> ImportHf(const std::string& hf_dir, const std::string& out_dir);

struct ExportResult {
  int64_t tensors = 0;
  int64_t files = 0;   // safetensors files (1: model.safetensors, else shards and the index)
  int64_t bytes = 0;
};

// Writes the parameters of committed checkpoint `ckpt_dir` in HF layout to `out_dir` (not
// existing or empty): config.json, and model.safetensors or, past `max_shard_bytes`,
// model-0000K-of-0000N.safetensors with model.safetensors.index.json. F32. The model is
// the one the checkpoint's saved config describes; a model with no HF form is refused.
Result<ExportResult> ExportHf(const std::string& ckpt_dir, const std::string& out_dir, int64_t max_shard_bytes);

}  // namespace elastrain::convert
