#include "train/dataset_for_config.h"

namespace elastrain {

DatasetOptions DatasetOptionsForConfig(const TrainConfig& cfg) {
  DatasetOptions o;
  o.type = cfg.dataset_type;
  o.path = cfg.dataset_path;
  o.tokenizer_path = cfg.tokenizer_path;
  o.tokenizer_type = cfg.tokenizer_type;
  o.text_field = cfg.train_data_columns;
  o.cache_dir = cfg.base_output_directory + "/.cache";
  o.seq_len = cfg.max_target_length;
  o.vocab_size = cfg.model.vocab_size;
  o.eval_split_fraction = cfg.eval_split_fraction;
  o.seed = static_cast<uint64_t>(cfg.data_shuffle_seed);
  return o;
}

}  // namespace elastrain
