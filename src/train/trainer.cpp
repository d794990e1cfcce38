#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "common/files.h"
#include "common/log.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "kernels/gemm.h"
#include "model/flops.h"
#include "model/transformer.h"
#include "optim/optim.h"
#include "train/metrics.h"

namespace elastrain {

namespace {
using Clock = std::chrono::steady_clock;
double SecondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

class Trainer {
 public:
  explicit Trainer(const TrainConfig& c) : cfg_(c), T_(c.max_target_length) {}
  Status Setup();
  Result<TrainSummary> Run();

 private:
  // Loads `rows` samples of `split` into inputs_/targets_.
  void LoadRows(Split split, const std::vector<int64_t>& indices, size_t begin, size_t rows);
  double TrainStep(int64_t step);  // returns the mean token loss of the global batch
  double Evaluate();               // mean token loss over the fixed eval batches
  Status LogStep(int64_t step, double loss, double lr, double grad_norm, double step_seconds);

  const TrainConfig& cfg_;
  const int64_t T_;
  std::string run_dir_;
  int64_t gb_ = 0;
  std::unique_ptr<Dataset> data_;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<Transformer<float>> model_;
  std::vector<float> params_, grads_, m_, v_;
  std::vector<int32_t> sample_, inputs_, targets_;
  MetricsWriter metrics_;
  ProgressLine progress_;
  double peak_flops_ = 0, flops_per_token_ = 0;
  double last_grad_norm_ = 0;
  Clock::time_point start_;
};

Status Trainer::Setup() {
  start_ = Clock::now();
  SetComputeThreads(static_cast<int>(cfg_.num_threads));
  ELASTRAIN_ASSIGN_OR_RETURN(GemmBackend backend, ParseGemmBackend(cfg_.gemm_backend));
  SetGemmBackend(backend);
  gb_ = GlobalBatchSize(cfg_, 1);
  const bool remat = cfg_.remat_policy == "full";

  // Refuse what cannot fit before touching the disk or allocating.
  MemoryEstimate mem = EstimateTrainingMemory(cfg_.model, cfg_.per_device_batch_size, T_, remat);
  const int64_t avail = AvailableMemoryBytes();
  if (mem.total() > avail) {
    return Status::OutOfMemory(fmt::format(
        "model_name={} needs about {:.1f} GiB to train (parameters {:.1f}, gradients {:.1f}, AdamW state {:.1f}, "
        "activations {:.1f} at per_device_batch_size={} max_target_length={}) but this machine has {:.1f} GiB "
        "available; use a smaller model, or more workers with FSDP",
        cfg_.model_name, mem.total() / 1073741824.0, mem.param_bytes / 1073741824.0,
        mem.grad_bytes / 1073741824.0, mem.optimizer_bytes / 1073741824.0, mem.activation_bytes / 1073741824.0,
        cfg_.per_device_batch_size, T_, avail / 1073741824.0));
  }

  run_dir_ = (std::filesystem::path(cfg_.base_output_directory) / cfg_.run_name).string();
  ELASTRAIN_RETURN_IF_ERROR(MakeDirs(run_dir_));
  AddLogFile(run_dir_ + "/train.log");
  ELASTRAIN_RETURN_IF_ERROR(WriteFileAtomic(run_dir_ + "/config.yml", ConfigToYaml(cfg_)));
  ELASTRAIN_RETURN_IF_ERROR(metrics_.Open(run_dir_ + "/metrics.jsonl"));

  DatasetOptions dopt;
  dopt.type = cfg_.dataset_type;
  dopt.path = cfg_.dataset_path;
  dopt.tokenizer_path = cfg_.tokenizer_path;
  dopt.cache_dir = (std::filesystem::path(cfg_.base_output_directory) / ".cache").string();
  dopt.seq_len = T_;
  dopt.vocab_size = cfg_.model.vocab_size;
  dopt.eval_split_fraction = cfg_.eval_split_fraction;
  dopt.seed = static_cast<uint64_t>(cfg_.data_shuffle_seed);
  ELASTRAIN_ASSIGN_OR_RETURN(data_, OpenDataset(dopt));
  sampler_ = std::make_unique<Sampler>(data_->num_samples(Split::kTrain), gb_,
                                       static_cast<uint64_t>(cfg_.data_shuffle_seed));

  model_ = std::make_unique<Transformer<float>>(cfg_.model, cfg_.per_device_batch_size, T_,
                                                remat ? RematPolicy::kFull : RematPolicy::kNone);
  const int64_t n = model_->layout().total;
  params_.resize(n);
  grads_.assign(n, 0.f);
  m_.assign(n, 0.f);
  v_.assign(n, 0.f);
  InitParams(cfg_.model, model_->layout(), static_cast<uint64_t>(cfg_.init_weights_seed), params_.data());
  sample_.resize(T_ + 1);
  inputs_.resize(cfg_.per_device_batch_size * T_);
  targets_.resize(cfg_.per_device_batch_size * T_);

  flops_per_token_ = TrainingFlopsPerToken(cfg_.model, T_);
  peak_flops_ = cfg_.hardware_peak_tflops > 0 ? cfg_.hardware_peak_tflops * 1e12 : MeasureSgemmGflops() * 1e9;
  LOG_INFO("run directory {}", run_dir_);
  LOG_INFO("model {} ({}): {:.2f}M parameters, {} layers, emb {}, heads {}/{} (q/kv), mlp {}, vocab {}",
           cfg_.model_name, FamilyName(cfg_.model.family), n / 1e6, cfg_.model.num_layers, cfg_.model.emb_dim,
           cfg_.model.num_heads, cfg_.model.num_kv_heads, cfg_.model.mlp_dim, cfg_.model.vocab_size);
  LOG_INFO("data: {}", data_->Describe());
  LOG_INFO("batch: global {} x {} tokens, micro-batch {}, {} micro-batches per step; remat {}; activations {:.1f} MiB",
           gb_, T_, cfg_.per_device_batch_size, (gb_ + cfg_.per_device_batch_size - 1) / cfg_.per_device_batch_size,
           cfg_.remat_policy, model_->ActivationBytes() / 1048576.0);
  LOG_INFO("compute: {} threads, gemm {}, peak for MFU {:.1f} GFLOP/s ({})", ComputeThreads(), cfg_.gemm_backend,
           peak_flops_ / 1e9, cfg_.hardware_peak_tflops > 0 ? "hardware_peak_tflops" : "measured SGEMM ceiling");
  return Status::OK();
}

void Trainer::LoadRows(Split split, const std::vector<int64_t>& indices, size_t begin, size_t rows) {
  for (size_t r = 0; r < rows; ++r) {
    data_->GetSample(split, indices[begin + r], sample_.data());
    std::copy(sample_.begin(), sample_.begin() + T_, inputs_.begin() + r * T_);
    std::copy(sample_.begin() + 1, sample_.end(), targets_.begin() + r * T_);
  }
}

double Trainer::TrainStep(int64_t step) {
  std::fill(grads_.begin(), grads_.end(), 0.f);
  const std::vector<int64_t> rows = sampler_->RankShare(step, /*rank=*/0, /*dp=*/1);
  const float dloss = static_cast<float>(1.0 / static_cast<double>(gb_ * T_));
  double loss_sum = 0;
  for (size_t begin = 0; begin < rows.size(); begin += cfg_.per_device_batch_size) {
    const size_t n = std::min<size_t>(cfg_.per_device_batch_size, rows.size() - begin);
    LoadRows(Split::kTrain, rows, begin, n);
    loss_sum += model_->ForwardBackward(params_.data(), grads_.data(), inputs_.data(), targets_.data(), n, dloss);
  }
  last_grad_norm_ = ClipGradNorm(grads_.data(), grads_.size(), cfg_.gradient_clipping_threshold);
  ScheduleOptions sched{cfg_.learning_rate, static_cast<int64_t>(cfg_.warmup_steps_fraction * cfg_.steps),
                        cfg_.steps, cfg_.cosine_learning_rate_final_fraction};
  AdamWOptions opt{cfg_.adam_b1, cfg_.adam_b2, cfg_.adam_eps, cfg_.adam_weight_decay};
  AdamWUpdate(model_->layout(), params_.data(), grads_.data(), m_.data(), v_.data(), step + 1,
              LearningRate(sched, step), opt);
  return loss_sum / static_cast<double>(gb_ * T_);
}

double Trainer::Evaluate() {
  const int64_t available = data_->num_samples(Split::kEval);
  const int64_t want = std::min(available, cfg_.eval_steps * cfg_.per_device_batch_size);
  std::vector<int64_t> idx(want);
  for (int64_t i = 0; i < want; ++i) idx[i] = i;
  double loss_sum = 0;
  for (int64_t begin = 0; begin < want; begin += cfg_.per_device_batch_size) {
    const int64_t n = std::min(cfg_.per_device_batch_size, want - begin);
    LoadRows(Split::kEval, idx, begin, n);
    loss_sum += model_->Forward(params_.data(), inputs_.data(), targets_.data(), n);
  }
  return loss_sum / static_cast<double>(want * T_);
}

Result<TrainSummary> Trainer::Run() {
  TrainSummary s;
  s.run_dir = run_dir_;
  s.global_batch_size = gb_;
  s.micro_batches_per_step = (gb_ + cfg_.per_device_batch_size - 1) / cfg_.per_device_batch_size;
  s.activation_bytes = model_->ActivationBytes();
  auto eval = [&](int64_t step) -> Status {
    double l = Evaluate();
    if (step == 0) s.first_eval_loss = l;
    s.final_eval_loss = l;
    progress_.Finish();
    LOG_INFO("step {}: eval loss {:.4f}", step, l);
    return metrics_.Write({{"step", step}, {"eval_loss", l}, {"time", SecondsSince(start_)}});
  };
  ELASTRAIN_RETURN_IF_ERROR(eval(0));
  auto loop_start = Clock::now();
  double timed_seconds = 0;
  for (int64_t step = 0; step < cfg_.steps; ++step) {
    auto t0 = Clock::now();
    const double loss = TrainStep(step);
    const double dt = SecondsSince(t0);
    if (step > 0) timed_seconds += dt;  // the first step warms caches and thread pools
    if (step == 0) s.first_loss = loss;
    s.final_loss = loss;
    const int64_t done = step + 1;
    if (!std::isfinite(loss))
      return Status::Internal(fmt::format("step {}: loss is {}; lower learning_rate or check the data", done, loss));
    ScheduleOptions sched{cfg_.learning_rate, static_cast<int64_t>(cfg_.warmup_steps_fraction * cfg_.steps),
                          cfg_.steps, cfg_.cosine_learning_rate_final_fraction};
    if (done % cfg_.log_period == 0 || done == cfg_.steps || done == 1)
      ELASTRAIN_RETURN_IF_ERROR(LogStep(done, loss, LearningRate(sched, step), last_grad_norm_, dt));
    const double elapsed = SecondsSince(loop_start);
    progress_.Update(done, cfg_.steps, loss, gb_ * T_ / dt, elapsed / done * (cfg_.steps - done));
    if (cfg_.eval_interval > 0 && done % cfg_.eval_interval == 0 && done != cfg_.steps)
      ELASTRAIN_RETURN_IF_ERROR(eval(done));
  }
  ELASTRAIN_RETURN_IF_ERROR(eval(cfg_.steps));
  progress_.Finish();
  s.steps = cfg_.steps;
  const int64_t timed_steps = cfg_.steps > 1 ? cfg_.steps - 1 : 1;
  if (timed_seconds <= 0) timed_seconds = SecondsSince(loop_start);
  s.tokens_per_sec = static_cast<double>(timed_steps * gb_ * T_) / timed_seconds;
  s.mfu = s.tokens_per_sec * flops_per_token_ / peak_flops_;
  s.wall_seconds = SecondsSince(start_);
  return s;
}

Status Trainer::LogStep(int64_t step, double loss, double lr, double grad_norm, double dt) {
  const double tps = gb_ * T_ / dt;
  const double mfu = tps * flops_per_token_ / peak_flops_;
  if (!progress_.enabled() || step == cfg_.steps)
    LOG_INFO("step {}/{} loss {:.4f} lr {:.3e} grad_norm {:.3f} | {:.0f} tok/s | {:.1f} GFLOP/s | MFU {:.1f}%", step,
             cfg_.steps, loss, lr, grad_norm, tps, tps * flops_per_token_ / 1e9, 100 * mfu);
  return metrics_.Write({{"step", step},
                         {"loss", loss},
                         {"lr", lr},
                         {"grad_norm", grad_norm},
                         {"step_time", dt},
                         {"tokens_per_sec", tps},
                         {"mfu", mfu},
                         {"time", SecondsSince(start_)}});
}
}  // namespace

int64_t GlobalBatchSize(const TrainConfig& cfg, int64_t workers) {
  if (cfg.global_batch_size > 0) return cfg.global_batch_size;
  return cfg.per_device_batch_size * workers * cfg.gradient_accumulation_steps;
}

Result<TrainSummary> Train(const TrainConfig& cfg) {
  Trainer t(cfg);
  ELASTRAIN_RETURN_IF_ERROR(t.Setup());
  return t.Run();
}

}  // namespace elastrain
