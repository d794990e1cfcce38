// Names of the keys in MaxText's configs/base.yml (google/maxtext), collected so that a
// MaxText config can be loaded as is: keys elastrain does not implement are reported
// and ignored rather than rejected. Names only; the keys elastrain shares with MaxText
// are listed too and simply take the registry's meaning.
#include <string_view>
#include <vector>

#include "config/config_keys.h"

namespace elastrain {

const std::vector<std::string_view>& MaxTextKeyNames() {
  static const std::vector<std::string_view> names = {
      // run, checkpointing, output
      "run_name", "model_name", "base_config", "normalization_layer_epsilon", "load_parameters_path",
      "load_full_state_path", "enable_checkpointing", "async_checkpointing", "checkpoint_period",
      "enable_single_replica_ckpt_restoring", "force_unroll", "checkpoint_storage_target_data_file_size_bytes",
      "checkpoint_storage_use_ocdbt", "checkpoint_storage_use_zarr3", "enable_emergency_checkpoint",
      "local_checkpoint_directory", "local_checkpoint_period", "reuse_example_batch", "metrics_file",
      "gcs_metrics", "save_config_to_gcs", "base_output_directory", "jax_cache_dir", "hardware",
      // precision and quantization
      "dtype", "weight_dtype", "quantization", "matmul_precision", "activations_in_float32", "quant_cfg_path",
      "quantize_kvcache", "kv_quant_axis", "kv_quant_dtype", "checkpoint_is_quantized",
      "save_quantized_params_path", "quantization_local_shard_count",
      // model
      "decoder_block", "global_parameter_scale", "base_emb_dim", "base_num_query_heads", "base_num_kv_heads",
      "base_mlp_dim", "base_num_decoder_layers", "head_dim", "mlp_activations", "dropout_rate",
      "logits_via_embedding", "normalize_embedding_logits", "logits_dot_in_fp32", "cast_logits_to_fp32",
      "num_experts", "num_experts_per_tok", "megablox", "capacity_factor", "load_balance_loss_weight",
      "remat_policy", "scan_layers", "param_scan_axis", "attention", "attention_type", "sliding_window_size",
      "attn_logits_soft_cap", "final_logits_soft_cap", "use_post_attn_norm", "use_post_ffw_norm", "fused_qkv",
      "fused_mlp", "record_internal_nn_metrics", "use_iota_embed", "use_untrainable_positional_embedding",
      "trainable_position_size", "rope_min_timescale", "rope_max_timescale", "reshape_q",
      // pipeline parallelism
      "num_layers_per_pipeline_stage", "num_pipeline_repeats", "num_pipeline_microbatches",
      "scan_pipeline_iterations", "pipeline_delay_activation_forwarding",
      // mesh and sharding
      "mesh_axes", "logical_axis_rules", "data_sharding", "dcn_data_parallelism", "dcn_fsdp_parallelism",
      "dcn_fsdp_transpose_parallelism", "dcn_sequence_parallelism", "dcn_tensor_parallelism",
      "dcn_pipeline_parallelism", "dcn_expert_parallelism", "dcn_autoregressive_parallelism",
      "ici_data_parallelism", "ici_fsdp_parallelism", "ici_fsdp_transpose_parallelism",
      "ici_sequence_parallelism", "ici_tensor_parallelism", "ici_autoregressive_parallelism",
      "ici_pipeline_parallelism", "ici_expert_parallelism", "num_slices", "allow_split_physical_axes",
      // tokenizer and data
      "vocab_size", "tokenizer_path", "tokenize_train_data", "tokenize_eval_data", "add_bos", "add_eos",
      "per_device_batch_size", "expansion_factor_real_data", "eval_per_device_batch_size", "max_corpus_chars",
      "train_data_columns", "eval_data_columns", "use_dpo", "dataset_type", "dataset_path", "dataset_name",
      "eval_dataset_name", "eval_split", "hf_path", "hf_data_dir", "hf_train_files", "hf_eval_split",
      "hf_eval_files", "hf_access_token", "grain_train_files", "grain_eval_files", "grain_worker_count",
      "enable_data_shuffling", "data_shuffle_seed",
      // training loop and optimizer
      "steps", "log_period", "learning_rate", "cosine_learning_rate_final_fraction", "warmup_steps_fraction",
      "learning_rate_schedule_steps", "max_target_length", "enable_dropout", "init_weights_seed",
      "gradient_clipping_threshold", "gradient_accumulation_steps", "opt_type", "adam_b1", "adam_b2",
      "adam_eps", "adam_eps_root", "adam_weight_decay", "eval_interval", "eval_steps", "target_eval_loss",
      "use_megatron_tflops",
      // decoding and inference
      "max_prefill_predict_length", "prompt", "load_from_prefill_dir", "prefill_cache_dir",
      "autoregressive_decode_assert", "decode_sampling_strategy", "decode_sampling_nucleus_p",
      "decode_sampling_top_k", "decode_sampling_temperature", "inference_microbenchmark_prefill_lengths",
      "inference_microbenchmark_stages", "inference_microbenchmark_loop_iters",
      "inference_microbenchmark_log_file_path", "inference_metadata_file", "enable_model_warmup",
      "prefill_cache_axis_order", "ar_cache_axis_order", "compute_axis_order", "prometheus_port",
      "use_ragged_attention", "ragged_block_size", "sa_block_q", "sa_block_q_dkv", "sa_block_q_dq",
      // profiling, monitoring, compilation
      "profiler", "enable_profiler", "upload_all_profiler_results", "skip_first_n_steps_for_profiler",
      "profiler_steps", "collect_stack_trace", "stack_trace_to_cloud", "stack_trace_interval_seconds",
      "compiled_trainstep_file", "compile_topology", "compile_topology_num_slices", "enable_goodput_recording",
      "monitor_goodput", "goodput_upload_interval_seconds", "use_vertex_tensorboard",
      "vertex_tensorboard_project", "vertex_tensorboard_region", "max_checkify", "enable_jax_profiler",
      "jax_profiler_port", "enable_checkpoint_cloud_logger", "enable_checkpoint_standard_logger",
      "enable_single_controller",
  };
  return names;
}

}  // namespace elastrain
