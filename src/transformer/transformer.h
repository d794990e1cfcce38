// A decoder-only transformer (llama or gpt2 family) over flat parameter buffers.
// The model owns its activations; parameters and gradients belong to the caller and
// follow model/layout.h. One instance serves micro-batches of up to `max_batch` rows of
// exactly `seq_len` tokens. Not thread-safe: one step at a time (the kernels inside use
// all threads).
#pragma once

#include <cstdint>
#include <functional>

#include "common/memory.h"
#include <memory>
#include <vector>

#include "common/status.h"

#include "model/activations.h"
#include "model/layout.h"
#include "model/model_config.h"

namespace elastrain {
namespace kernels {
struct AttentionOptions;  // kernels/ops.h (a private dependency of this module)
}

// The keys and values of one sequence's positions [0, length), per layer (after the QK
// norm and RoPE, as attention reads them), for incremental decoding
// (Transformer::Decode). Made by Transformer::NewKvCache for that model.
template <typename T>
struct KvCache {
  int64_t capacity = 0;  // positions it holds at most (the model's seq_len)
  int64_t length = 0;    // positions filled
  int64_t kv_dim = 0;    // Hkv*hd
  std::vector<T> k, v;   // (L, capacity, kv_dim) each
  T* Keys(int64_t layer) { return k.data() + layer * capacity * kv_dim; }
  T* Values(int64_t layer) { return v.data() + layer * capacity * kv_dim; }
};

template <typename T>
class Transformer {
 public:
  Transformer(const ModelConfig& cfg, int64_t max_batch, int64_t seq_len, RematPolicy remat);
  ~Transformer();

  const ModelConfig& config() const { return cfg_; }
  const ParamLayout& layout() const { return layout_; }
  int64_t max_batch() const { return max_batch_; }
  int64_t seq_len() const { return seq_len_; }

  // Forward over `rows` <= max_batch sequences: inputs and targets (rows, seq_len); a
  // negative target masks its position. Returns the SUM of token losses.
  double Forward(const T* params, const int32_t* inputs, const int32_t* targets, int64_t rows);
  // After Forward with targets == nullptr: the logits, (rows*T, V) row-major (before a
  // final soft cap, which the loss applies).
  const T* logits() const { return av_.logits; }
  // Forward and backward: accumulates d(dloss * sum of token losses)/d(params) into
  // grads and returns the sum of token losses. dloss is typically 1/(tokens in the
  // global batch), so that accumulated micro-batches give the mean-loss gradient.
  double ForwardBackward(const T* params, T* grads, const int32_t* inputs, const int32_t* targets, int64_t rows,
                         T dloss);

  // Incremental decoding of ONE sequence (generation): runs the n tokens at positions
  // [pos, pos+n) and writes the logits of the last one (V values, after
  // final_logits_soft_cap when set) to `logits`. With a cache, pos = cache->length: the
  // tokens' keys and values are appended to it and attention reads the earlier ones from
  // it (a prefill is one call with the prompt, then one call per token). Without
  // (nullptr), pos = 0 and `tokens` is the whole prefix: a full causal forward over n
  // positions, the reference the cache is checked against. Every other step of a layer
  // is LayerForward's, as in training. InvalidArgument when pos + n exceeds seq_len()
  // (the context the model was built for: nothing slides), for n < 1, and for a token
  // outside [0, vocab_size). Single rank: no tensor parallelism, no unit hooks.
  Status Decode(const T* params, const int32_t* tokens, int64_t n, KvCache<T>* cache, T* logits);
  // An empty cache of seq_len() positions for Decode.
  KvCache<T> NewKvCache() const;

  // Tensor parallelism (Megatron): this instance is built from the tensor-LOCAL config
  // (heads and MLP rows divided by the tensor degree) and `allreduce` sums a buffer over
  // the tensor-parallel peers. Row-parallel outputs (wo, w_down) are summed in forward,
  // the inputs' gradients of column-parallel GEMMs (wq/wk/wv, w_gate/w_up) in backward.
  // Row-parallel biases are added by tensor rank 0 only, so the sum adds them once.
  using AllReduceFn = std::function<Status(T* data, int64_t n)>;
  void SetTensorParallel(int tensor_rank, AllReduceFn allreduce);
  // Parameter units for FSDP: unit 0 is everything before layer 0 (embeddings), unit
  // 1+l is layer l, unit L+1 everything after the last layer (final norm, head). The
  // model calls `acquire(u)` before it reads unit u's parameters, `release(u)` when it
  // will not read them again until the next acquire, `grads_begin(u)` before it first
  // writes unit u's gradients in a micro-batch, and `grads_ready(u)` once unit u's
  // gradients of this micro-batch are complete. Units 0 and L+1 are held for a whole
  // pass (the tied gpt2 head reads the embedding at the end); layers are released after
  // their forward and acquired again for their backward (ZeRO-3).
  struct UnitHooks {
    std::function<Status(int unit)> acquire, release, grads_begin, grads_ready;
  };
  void SetUnitHooks(UnitHooks hooks) { hooks_ = std::move(hooks); }
  // Polled at every layer boundary of forward and backward: true abandons the pass at
  // once (comm_status() becomes Unavailable), so that ranks whose peer died stop within
  // a layer's compute instead of finishing a step whose gradient can never be reduced.
  void SetCancelCheck(std::function<bool()> cancelled) { cancelled_ = std::move(cancelled); }

  // The first collective failure of the last Forward/ForwardBackward (then its results
  // are meaningless), or OK.
  const Status& comm_status() const { return comm_status_; }

  // Bytes of activation memory this instance holds (what remat_policy changes).
  size_t ActivationBytes() const { return acts_.size() * sizeof(T); }

 private:
  using LayerActs = LayerActivations<T>;
  // The shape of one forward pass: `rows` sequences of `len` positions starting at
  // position `pos` (training: rows x seq_len from 0); with a cache, attention reads the
  // earlier positions' keys and values from it (Decode).
  struct Span {
    int64_t rows = 0, len = 0, pos = 0;
    KvCache<T>* cache = nullptr;
  };
  double ForwardImpl(const T* params, const int32_t* inputs, const int32_t* targets, int64_t rows, T* grads,
                     T dloss);
  void LayerForward(int64_t l, const T* params, LayerActs& a, const T* x_in, T* x_out, const Span& s);
  void LayerBackward(int64_t l, const T* params, T* grads, LayerActs& a, const T* x_in, T* dx, int64_t rows);
  LayerActs& ActsFor(int64_t l);
  void TensorAllReduce(T* data, int64_t n);  // no-op without tensor parallelism
  void Hook(const std::function<Status(int)>& f, int unit);  // no-op without hooks
  const T* RowParallelBias(const T* w, int64_t off) const;
  kernels::AttentionOptions AttentionFor(int64_t l) const;  // layer l's window and soft cap

  ModelConfig cfg_;
  ParamLayout layout_;
  int64_t max_batch_, seq_len_;
  RematPolicy remat_;
  int tensor_rank_ = 0;
  AllReduceFn tensor_allreduce_;
  UnitHooks hooks_;
  Status comm_status_;
  std::function<bool()> cancelled_;
  // False once the pass cannot produce a useful result (a collective failed, or cancelled).
  bool KeepGoing();
  std::vector<T, PopulatedAllocator<T>> acts_;  // every activation buffer, carved into the views below
  std::vector<T> rope_;  // (seq_len, hd/2, 2) cos/sin table
  std::vector<T> qk_norm_grad_;  // (2*hd) one layer's q and k norm scale gradients (qk_norm)
  std::vector<T> qk_stats_;      // (2*B*T + 2) row statistics of the all-heads QK norm, then its counts
  double qk_features_[2] = {0, 0};  // q and k features of the whole model (all tensor ranks)
  ModelActivations<T> av_;  // views into acts_ (model/activations.h)
};

// Fills params (layout.total values) from init_weights_seed, deterministically.
template <typename T>
void InitParams(const ModelConfig& cfg, const ParamLayout& layout, uint64_t seed, T* params);

}  // namespace elastrain
