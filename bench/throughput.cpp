// Training throughput against this machine's SGEMM ceiling (docs/performance.md).
//
//   build/throughput [--quick] [--backends=onednn,openblas] [--presets=small,gpt2-124m]
//                    [--seqs=64,256] [--batch=4] [--threads=N] [--no-child]
//                    [--sgemm-seconds=0.4] [--step-budget=6] [--misdetected-steps]
//                    [--dtypes=float32,bfloat16]
//
// 1. SGEMM ceiling: oneDNN and OpenBLAS sgemm, square and model-shaped, in GFLOP/s;
//    the NT shapes also through oneDNN's matmul primitive ("onednn matmul"), which the
//    model uses for its linear layers' forward (kernels/gemm.cpp): the ceiling is the
//    best square of any of them.
//    OpenBLAS picks its kernels when the library loads, from OPENBLAS_CORETYPE or its
//    own CPU detection, so the other setting is measured in a child process: this
//    program re-executes itself with OPENBLAS_CORETYPE=SkylakeX set (or unset, when
//    the parent already has it) and merges the child's JSON line.
// 2. Full training steps (zero grads, ForwardBackward, ClipGradNorm, AdamWUpdate) per
//    preset, sequence length and GEMM backend: ms/step, tokens/s, model GFLOP/s
//    (model/flops.h) and its fraction of the ceiling, and where the time goes. With
//    --dtypes=float32,bfloat16 the oneDNN rows are also run with bf16 GEMMs (dtype,
//    kernels/gemm_matmul.h), labelled "onednn bf16".
// 3. The update's memory-bound kernels (zero, norm, AdamW with clipping) as a share of a
//    STREAM-style triad bandwidth measured in the same run.
// 4. Reference figures from the issue, printed beside ours.
// The last line of output is one JSON object ("JSON {...}") for machines.
// Exit codes: 0 success, 2 bad arguments.
#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/gemm_matmul.h"
#include "kernels/ops.h"
#include "kernels/profile.h"
#include "model/flops.h"
#include "model/model_config.h"
#include "transformer/transformer.h"
#include "optim/optim.h"

using namespace elastrain;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// Reference figures quoted by the issue (not measured here).
constexpr double kLlmcGflops = 27.0;    // llm.c-style OpenMP C trainer, GPT-2 124M, B=4, T=64
constexpr double kLlmcTokensPerS = 36.0;
constexpr double kGoalFraction = 0.5;   // goal: gpt2-124m at >= 50% of the SGEMM ceiling
constexpr const char* kTunedCoretype = "SkylakeX";
constexpr int kChildTimeoutS = 600;
// A measurement during which other processes kept more CPUs than this busy is redone
// (up to kMaxRetries more times for SGEMM, up to 2x the timed steps for training) and
// the least disturbed one kept; the "busy" column says how disturbed it was.
constexpr double kBusyThreshold = 0.1;
constexpr int kMaxRetries = 2;

struct Options {
  std::vector<std::string> backends = {"onednn", "openblas"};
  std::vector<std::string> presets = {"small", "gpt2-124m"};
  std::vector<int64_t> seqs = {64, 256};
  int64_t batch = 4;
  int threads = 0;           // 0: all cores
  double sgemm_seconds = 0.4;  // per shape and library
  double step_budget_s = 6.0;  // timed steps per configuration: clamp(budget / step, 2, 10)
  bool child = true;         // also measure OpenBLAS with the other OPENBLAS_CORETYPE
  bool is_child = false;     // internal: print only the JSON line
  bool misdetected_steps = false;  // also run steps on an OpenBLAS without OPENBLAS_CORETYPE
  std::vector<std::string> dtypes = {"float32"};  // GEMM compute types of the oneDNN rows
};

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  size_t b = 0;
  while (b <= s.size()) {
    size_t e = s.find(',', b);
    if (e == std::string::npos) e = s.size();
    if (e > b) out.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

template <typename Range>
std::string Join(const Range& r) {
  std::string out;
  for (const auto& x : r) {
    if (!out.empty()) out.push_back(',');
    out.append(fmt::format("{}", x));
  }
  return out;
}

double Now(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string EnvOr(const char* name, const char* fallback) {
  const char* c = std::getenv(name);
  return c && *c ? c : fallback;
}
std::string CoretypeEnv() { return EnvOr("OPENBLAS_CORETYPE", "unset"); }
// "openblas[SkylakeX]": the kernels OpenBLAS actually runs, whatever selected them.
std::string OpenBlasLabel() { return fmt::format("openblas[{}]", openblas_get_corename()); }

// The CPUs are shared with whatever else runs on the machine (builds, tests, other
// trainers), which would silently lower every figure. CpuMeter measures how many CPUs
// other processes kept busy, from /proc/stat minus this process's own CPU time.
class CpuMeter {
 public:
  CpuMeter() : t0_(Clock::now()), busy0_(MachineBusySeconds()), self0_(SelfSeconds()) {}
  // Average number of CPUs busy with other processes (or stolen by the hypervisor).
  double OtherCpus() const {
    const double wall = Now(t0_);
    if (wall <= 0) return 0;
    return std::max(0.0, (MachineBusySeconds() - busy0_ - (SelfSeconds() - self0_)) / wall);
  }

 private:
  static double MachineBusySeconds() {
    std::ifstream f("/proc/stat");
    std::string cpu;
    long long user = 0, nice = 0, sys = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    f >> cpu >> user >> nice >> sys >> idle >> iowait >> irq >> softirq >> steal;
    return static_cast<double>(user + nice + sys + irq + softirq + steal) / sysconf(_SC_CLK_TCK);
  }
  static double SelfSeconds() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    auto sec = [](const timeval& t) { return t.tv_sec + 1e-6 * t.tv_usec; };
    return sec(ru.ru_utime) + sec(ru.ru_stime);
  }
  Clock::time_point t0_;
  double busy0_, self0_;
};

// ---------------------------------------------------------------- SGEMM ceiling
struct GemmShape {
  const char* what;
  bool ta, tb;
  int64_t M, N, K;
};

std::vector<GemmShape> SgemmShapes(const Options& o) {
  std::vector<GemmShape> s = {{"square", false, true, 1024, 1024, 1024}, {"square", false, true, 2048, 2048, 2048}};
  // The GEMMs of a gpt2-124m step (matmul_forward / matmul_backward), N = B*T rows.
  for (int64_t T : o.seqs) {
    const int64_t rows = o.batch * T;
    s.push_back({"mlp-up fwd", false, true, rows, 3072, 768});
    s.push_back({"mlp-down dinp", false, false, rows, 768, 3072});
    s.push_back({"mlp-up dW", true, false, 3072, 768, rows});
  }
  // The largest single GEMM (20 GFLOP at 256 rows), once: it takes seconds on a slow BLAS.
  s.push_back({"lm-head fwd", false, true, o.batch * o.seqs.front(), 50257, 768});
  return s;
}

// One library's float GEMM on row-major data, timed for about `seconds`: "onednn"
// (dnnl_sgemm), "onednn matmul" (the matmul primitive) or OpenBLAS.
double TimeSgemm(const std::string& lib, const GemmShape& g, double seconds) {
  const int64_t lda = g.ta ? g.M : g.K, ldb = g.tb ? g.K : g.N;
  std::vector<float> a(g.M * g.K, 0.5f), b(g.K * g.N, 0.25f), c(g.M * g.N, 0.f);
  const bool onednn = lib == "onednn", matmul = lib == "onednn matmul";
  auto call = [&] {
    if (matmul) {
      (void)GemmMatmulF32(g.ta, g.tb, g.M, g.N, g.K, 1.f, a.data(), lda, b.data(), ldb, 0.f, c.data(), g.N);
    } else if (onednn) {
      (void)dnnl_sgemm(g.ta ? 'T' : 'N', g.tb ? 'T' : 'N', g.M, g.N, g.K, 1.f, a.data(), lda, b.data(), ldb, 0.f,
                       c.data(), g.N);
    } else {
      cblas_sgemm(CblasRowMajor, g.ta ? CblasTrans : CblasNoTrans, g.tb ? CblasTrans : CblasNoTrans, g.M, g.N, g.K,
                  1.f, a.data(), lda, b.data(), ldb, 0.f, c.data(), g.N);
    }
  };
  call();  // warm up: thread pools, packing buffers, page faults
  std::vector<double> per_call;
  auto t0 = Clock::now();
  do {
    auto t = Clock::now();
    call();
    per_call.push_back(Now(t));
  } while (Now(t0) < seconds || per_call.size() < 2);
  return 2.0 * g.M * g.N * g.K / Median(per_call) / 1e9;
}

json MeasureSgemm(const Options& o, const std::vector<std::string>& libs) {
  json out = json::array();
  for (const GemmShape& g : SgemmShapes(o))
    for (const std::string& lib : libs) {
      if (lib == "onednn matmul" && (g.ta || !g.tb)) continue;  // the model uses it for NT only
      const bool openblas = lib == "openblas";
      double gflops = 0, busy = 1e9;
      for (int attempt = 0; attempt <= kMaxRetries && busy > kBusyThreshold; ++attempt) {
        CpuMeter meter;
        const double gf = TimeSgemm(lib, g, o.sgemm_seconds);
        const double b = meter.OtherCpus();
        if (b < busy) std::tie(gflops, busy) = std::pair(gf, b);
      }
      out.push_back({{"lib", openblas ? OpenBlasLabel() : lib},
                     {"coretype_env", openblas ? CoretypeEnv() : ""},
                     {"what", g.what},
                     {"op", fmt::format("{}{}", g.ta ? 'T' : 'N', g.tb ? 'T' : 'N')},
                     {"M", g.M},
                     {"N", g.N},
                     {"K", g.K},
                     {"gflops", gflops},
                     {"other_cpus", busy}});
    }
  return out;
}

// ---------------------------------------------------------------- training steps
struct StepTimes {
  double total = 0, zero = 0, fwdbwd = 0, gemm = 0, clip = 0, adamw = 0;
  double gemm_flops = 0;  // 2*M*N*K summed over the step's GEMM calls
  double other_cpus = 0;  // CpuMeter over the step
};

json MeasureSteps(const Options& o, const std::string& backend, const std::string& preset, int64_t T,
                  ComputeDtype dtype = ComputeDtype::kFloat32) {
  // This VM's speed drifts by 10-20% over minutes (other tenants of the host): the
  // ceiling measured again just before the steps shows how far it moved since.
  const GemmShape square{"square", false, true, 2048, 2048, 2048};
  const double ceiling_now = std::max(TimeSgemm("onednn", square, 0.3), TimeSgemm("onednn matmul", square, 0.3));
  ModelConfig cfg = ModelPreset(preset).value();
  SetGemmBackend(ParseGemmBackend(backend).value());
  SetGemmDtype(dtype);
  const int64_t B = o.batch, tokens = B * T;
  Transformer<float> model(cfg, B, T, RematPolicy::kNone);
  const int64_t n = model.layout().total;
  std::vector<float> params(n), grads(n, 0.f), m(n, 0.f), v(n, 0.f);
  InitParams(cfg, model.layout(), 1234, params.data());
  std::vector<int32_t> inputs(tokens), targets(tokens);
  std::mt19937 rng(7);
  for (int64_t i = 0; i < tokens; ++i) {
    inputs[i] = static_cast<int32_t>(rng() % cfg.vocab_size);
    targets[i] = static_cast<int32_t>(rng() % cfg.vocab_size);
  }
  int64_t step = 0;
  auto run_step = [&]() {
    StepTimes st;
    CpuMeter meter;
    profile::Reset();
    auto t0 = Clock::now();
    ZeroGrads(grads.data(), n);  // the trainer's kernels (train/train_state.cpp)
    st.zero = Now(t0);
    auto t1 = Clock::now();
    model.ForwardBackward(params.data(), grads.data(), inputs.data(), targets.data(), B, 1.f / tokens);
    st.fwdbwd = Now(t1);
    auto t2 = Clock::now();
    const float scale = ClipScale(GradNorm(grads.data(), n), 1.0);  // applied inside AdamW
    st.clip = Now(t2);
    auto t3 = Clock::now();
    AdamWUpdate(model.layout(), params.data(), grads.data(), m.data(), v.data(), ++step, 3e-4, AdamWOptions{},
                scale);
    st.adamw = Now(t3);
    st.total = Now(t0);
    const profile::GemmStats g = profile::GemmTotals();
    st.gemm = g.seconds;
    st.gemm_flops = g.flops;
    st.other_cpus = meter.OtherCpus();
    return st;
  };
  profile::SetEnabled(true);
  const double first = run_step().total;  // warm-up; also sizes the number of timed steps
  const int timed = std::clamp(static_cast<int>(o.step_budget_s / std::max(first, 1e-3)), 2, 10);
  // Steps disturbed by other processes are replaced, within 3x the planned steps and
  // twice the time budget, so a busy machine cannot stretch the run much.
  std::vector<StepTimes> steps, clean;
  const auto t_timed = Clock::now();
  for (int i = 0; i < 3 * timed && static_cast<int>(clean.size()) < timed; ++i) {
    if (i >= timed && Now(t_timed) > 2 * std::max(o.step_budget_s, timed * first)) break;
    steps.push_back(run_step());
    if (steps.back().other_cpus <= kBusyThreshold) clean.push_back(steps.back());
  }
  const size_t disturbed = steps.size() - clean.size();
  if (clean.empty()) clean = steps;  // all disturbed: report them, flagged by "busy"
  auto shapes = profile::GemmByShape();  // of the last step
  profile::SetEnabled(false);
  SetGemmDtype(ComputeDtype::kFloat32);
  auto med = [&](double StepTimes::*f) {
    std::vector<double> x;
    for (auto& s : clean) x.push_back(s.*f);
    return Median(x);
  };
  const double sec = med(&StepTimes::total);
  const double flops_per_token = TrainingFlopsPerToken(cfg, T);
  json gemm_shapes = json::array();
  for (size_t i = 0; i < shapes.size() && i < 6; ++i) {
    const auto& s = shapes[i];
    gemm_shapes.push_back({{"op", fmt::format("{}{}", s.trans_a ? 'T' : 'N', s.trans_b ? 'T' : 'N')},
                           {"M", s.M},
                           {"N", s.N},
                           {"K", s.K},
                           {"calls", s.stats.calls},
                           {"ms", s.stats.seconds * 1e3},
                           {"gflops", s.stats.Gflops()}});
  }
  return {{"preset", preset},
          {"backend", backend == "onednn" ? (dtype == ComputeDtype::kBfloat16 ? "onednn bf16" : "onednn")
                                          : OpenBlasLabel()},
          {"dtype", ComputeDtypeName(dtype)},
          {"coretype_env", CoretypeEnv()},
          {"B", B},
          {"T", T},
          {"params", cfg.NumParams()},
          {"flops_per_token", flops_per_token},
          {"timed_steps", clean.size()},
          {"disturbed_steps", disturbed},
          {"ms_step", sec * 1e3},
          {"ceiling_now_gflops", ceiling_now},
          {"ms_step_best", std::min_element(clean.begin(), clean.end(), [](auto& a, auto& b) {
                             return a.total < b.total;
                           })->total * 1e3},
          {"tokens_per_s", tokens / sec},
          {"model_gflops", flops_per_token * tokens / sec / 1e9},
          {"ms_zero_grad", med(&StepTimes::zero) * 1e3},
          {"ms_fwdbwd", med(&StepTimes::fwdbwd) * 1e3},
          {"ms_gemm", med(&StepTimes::gemm) * 1e3},
          {"gemm_gflops", med(&StepTimes::gemm_flops) / std::max(med(&StepTimes::gemm), 1e-9) / 1e9},
          {"ms_clip", med(&StepTimes::clip) * 1e3},
          {"ms_adamw", med(&StepTimes::adamw) * 1e3},
          {"other_cpus", med(&StepTimes::other_cpus)},
          {"gemm_shapes", gemm_shapes}};
}

// ---------------------------------------------------------------- memory bandwidth
// fn's best time of 5 runs after a warm-up: a parallel region whose thread is preempted
// by another process waits a whole scheduler time slice, so on a shared machine the
// minimum is the stable figure.
template <typename F>
double BestOf5(F&& fn) {
  fn();
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    auto t0 = Clock::now();
    fn();
    best = std::min(best, Now(t0));
  }
  return best;
}

// The update's memory-bound kernels over a preset's parameter count, against a
// STREAM-style triad (a = b + s*c) over buffers of the same size measured in the same
// run, its write-allocate traffic counted (16 bytes per element). Bytes are the
// kernels' own traffic: zero 4n, norm 4n, AdamW 28n (reads p, g, m, v; writes p, m, v,
// lines it has read). Best of 5, as the non-GEMM kernels.
json MeasureUpdateBandwidth(const std::string& preset) {
  const int64_t n = ModelPreset(preset).value().NumParams();
  std::vector<float> a(n, 1.f), b(n, 2.f), c(n, 0.5f), d(n, 0.01f);  // also p, g, m, v below
  const double triad = BestOf5([&] {
    float* __restrict x = a.data();
    const float* __restrict y = b.data();
    const float* __restrict z = c.data();
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) x[i] = y[i] + 0.5f * z[i];
  });
  // 16 bytes per element: b and c read, a read for ownership (write-allocate) and written
  // back. STREAM counts 12; the hardware moves 16 (AdamW writes only lines it has read).
  const double bw = 16.0 * n / triad;
  float* p = a.data();
  float* g = b.data();
  float* m = c.data();
  float* v = d.data();
  int64_t step = 0;
  const double zero = BestOf5([&] { ZeroGrads(g, n); });
  std::fill(b.begin(), b.end(), 0.01f);
  const double norm = BestOf5([&] { (void)GradNorm(g, n); });
  const double adamw = BestOf5([&] { AdamWUpdateSpan(p, g, m, v, n, ++step, 1e-4, true, AdamWOptions{}, 0.5f); });
  auto row = [&](const char* what, double sec, double bytes) {
    return json{{"kernel", what}, {"ms", sec * 1e3}, {"gb_per_s", bytes / sec / 1e9}, {"of_triad", bytes / sec / bw}};
  };
  return {{"preset", preset},
          {"params", n},
          {"triad_gb_per_s", bw / 1e9},
          {"rows", json::array({row("zero grads", zero, 4.0 * n), row("grad norm", norm, 4.0 * n),
                                row("adamw + clip", adamw, 28.0 * n),
                                row("all three", zero + norm + adamw, 36.0 * n)})}};
}

// ---------------------------------------------------------------- non-GEMM kernels
// Times the non-GEMM kernels of one step at the model's shapes, scaled by how many
// times a step calls each. An estimate (caches are warmer than inside a step), to say
// which kernel owns the non-GEMM time.
json MeasureKernels(const std::string& preset, int64_t B, int64_t T) {
  ModelConfig cfg = ModelPreset(preset).value();
  const int64_t N = B * T, C = cfg.emb_dim, F = cfg.mlp_dim, V = cfg.vocab_size, H = cfg.num_heads;
  const int64_t Hkv = cfg.num_kv_heads, hd = cfg.head_dim, S = (H + 2 * Hkv) * hd, L = cfg.num_layers;
  const bool llama = cfg.family == ModelFamily::kLlama;
  const int64_t U = llama ? 2 * F : F;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.f, 1.f);
  auto buf = [&](int64_t k) {
    std::vector<float> x(k);
    for (auto& e : x) e = 0.1f * nd(rng);
    return x;
  };
  auto x = buf(N * C), y = buf(N * C), dx = buf(N * C), w = buf(C), bvec = buf(C), st1 = buf(N), st2 = buf(N);
  for (auto& r : st2) r = 1.f;
  auto qkv = buf(N * S), dqkv = buf(N * S), att = buf(B * H * T * T), atty = buf(N * H * hd);
  auto up = buf(N * U), h = buf(N * F), dup = buf(N * U), logits = buf(N * V), losses = buf(N), dw = buf(C);
  std::vector<int32_t> tgt(N);
  for (auto& t : tgt) t = static_cast<int32_t>(rng() % V);
  namespace k = kernels;
  struct Row {
    const char* name;
    double calls;
    double sec;
  };
  std::vector<Row> rows;
  if (llama) {
    rows.push_back({"rmsnorm fwd+bwd", 2.0 * L + 1, BestOf5([&] {
                      k::rmsnorm_forward(y.data(), st1.data(), x.data(), w.data(), N, C, 1e-5);
                      k::rmsnorm_backward(dx.data(), dw.data(), y.data(), x.data(), w.data(), st1.data(), N, C);
                    })});
    rows.push_back({"rope fwd+bwd", double(L), BestOf5([&] {
                      std::vector<float> cs(T * hd);
                      k::rope_table(cs.data(), T, hd, 1e4);
                      k::rope_forward(qkv.data(), cs.data(), B, T, H, Hkv, hd);
                      k::rope_backward(qkv.data(), cs.data(), B, T, H, Hkv, hd);
                    })});
    rows.push_back({"swiglu fwd+bwd", double(L), BestOf5([&] {
                      k::swiglu_forward(h.data(), up.data(), N, F);
                      k::swiglu_backward(dup.data(), h.data(), up.data(), N, F);
                    })});
  } else {
    rows.push_back({"layernorm fwd+bwd", 2.0 * L + 1, BestOf5([&] {
                      k::layernorm_forward(y.data(), st1.data(), st2.data(), x.data(), w.data(), bvec.data(), N, C,
                                           1e-5);
                      k::layernorm_backward(dx.data(), dw.data(), bvec.data(), y.data(), x.data(), w.data(),
                                            st1.data(), st2.data(), N, C);
                    })});
    rows.push_back({"gelu fwd+bwd", double(L), BestOf5([&] {
                      k::gelu_forward(h.data(), up.data(), N * F);
                      k::gelu_backward(dup.data(), up.data(), h.data(), N * F);
                    })});
  }
  rows.push_back({"attention fwd", double(L), BestOf5([&] {
                    k::attention_forward(atty.data(), att.data(), qkv.data(), B, T, H, Hkv, hd);
                  })});
  rows.push_back({"attention bwd", double(L), BestOf5([&] {
                    k::attention_backward(dqkv.data(), atty.data(), qkv.data(), att.data(), B, T, H, Hkv, hd);
                  })});
  rows.push_back({"residual add", 2.0 * L, BestOf5([&] { k::residual_forward(y.data(), x.data(), dx.data(), N * C); })});
  rows.push_back({"crossentropy fwd+bwd", 1.0, BestOf5([&] {
                    // in place, as in the model; later repetitions see other values, at the same cost
                    k::crossentropy_forward_backward(losses.data(), logits.data(), logits.data(), tgt.data(), N, V,
                                                     1.f / N);
                  })});
  json out = json::array();
  for (const Row& r : rows) out.push_back({{"kernel", r.name}, {"calls", r.calls}, {"ms", r.sec * r.calls * 1e3}});
  return out;
}

// ---------------------------------------------------------------- child process
// Re-executes this binary with OPENBLAS_CORETYPE flipped and returns its JSON, or null.
json RunChild(const Options& o) {
  char exe[4096];
  const ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (len <= 0) return nullptr;
  exe[len] = '\0';
  const bool parent_has = CoretypeEnv() != "unset";
  const std::string seqs = Join(o.seqs), presets = Join(o.presets);
  const std::string cmd = fmt::format(
      "timeout {} env {} '{}' --child-run --backends=openblas --presets={} --seqs={} --batch={} --threads={} "
      "--sgemm-seconds={} --step-budget={}",
      kChildTimeoutS, parent_has ? "-u OPENBLAS_CORETYPE" : fmt::format("OPENBLAS_CORETYPE={}", kTunedCoretype), exe,
      presets.empty() || parent_has ? "none" : presets, seqs, o.batch, o.threads, o.sgemm_seconds, o.step_budget_s);
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return nullptr;
  std::string out;
  char line[1 << 16];
  while (fgets(line, sizeof(line), p)) out += line;
  const int rc = pclose(p);
  const size_t at = out.rfind("JSON ");
  if (rc != 0 || at == std::string::npos) {
    fmt::print("child run failed (exit {}): {}\n", rc, cmd);
    return nullptr;
  }
  return json::parse(out.substr(at + 5), nullptr, false);
}

// ---------------------------------------------------------------- output
void PrintReport(const json& r) {
  fmt::print("\n== SGEMM, {} threads, GFLOP/s (median call) ==\n", r["threads"].get<int>());
  fmt::print("{:<16}{:>4}{:>7}{:>7}{:>7}  {:<22}{:>9}{:>7}\n", "what", "op", "M", "N", "K", "library", "GFLOP/s",
             "busy");
  for (const auto& s : r["sgemm"])
    fmt::print("{:<16}{:>4}{:>7}{:>7}{:>7}  {:<22}{:>9.1f}{:>7.2f}\n", s["what"].get<std::string>(),
               s["op"].get<std::string>(), s["M"].get<int64_t>(), s["N"].get<int64_t>(), s["K"].get<int64_t>(),
               s["lib"].get<std::string>(), s["gflops"].get<double>(), s["other_cpus"].get<double>());
  const double ceil = r["ceiling_gflops"].get<double>();
  fmt::print("ceiling (best square of the run, also column ceil below): {:.1f} GFLOP/s by {}\n", ceil,
             r["ceiling_lib"].get<std::string>());
  double worst = 0;
  for (const auto& part : {r["sgemm"], r["steps"]})
    for (const auto& s : part) worst = std::max(worst, s["other_cpus"].get<double>());
  if (worst > 0.1)
    fmt::print("WARNING: other processes kept up to {:.2f} of {} CPUs busy during this run (column busy);\n"
               "         the affected figures are lower than this machine gives when idle. Rerun when idle.\n",
               worst, r["cpus"].get<int>());

  if (!r["steps"].empty()) {
    fmt::print("\n== Training step (zero grads + ForwardBackward + ClipGradNorm + AdamW), median ==\n");
    fmt::print("{:<10}{:>3}{:>5} {:<20}{:>9}{:>8}{:>8}{:>7}{:>9}{:>8}{:>8}{:>7}{:>7}{:>6}{:>6}\n", "preset", "B",
               "T", "backend", "ms/step", "tok/s", "GFLOP/s", "%ceil", "gemm ms", "gemm GF", "other", "z+clip",
               "adamw", "busy", "ceil");
    for (const auto& s : r["steps"]) {
      const double ms = s["ms_step"], gemm = s["ms_gemm"], adamw = s["ms_adamw"];
      const double zero_clip = s["ms_zero_grad"].get<double>() + s["ms_clip"].get<double>();
      fmt::print(
          "{:<10}{:>3}{:>5} {:<20}{:>9.1f}{:>8.0f}{:>8.1f}{:>6.1f}%{:>9.1f}{:>8.1f}{:>8.1f}{:>7.1f}{:>7.1f}{:>6.2f}{:>6.0f}\n",
                 s["preset"].get<std::string>(), s["B"].get<int64_t>(), s["T"].get<int64_t>(),
                 s["backend"].get<std::string>(), ms, s["tokens_per_s"].get<double>(),
                 s["model_gflops"].get<double>(), 100.0 * s["model_gflops"].get<double>() / ceil, gemm,
                 s["gemm_gflops"].get<double>(), ms - gemm - adamw - zero_clip, zero_clip, adamw,
                 s["other_cpus"].get<double>(), s["ceiling_now_gflops"].get<double>());
    }
    fmt::print("gemm ms: time inside Gemm<float> (kernels/profile.h); gemm GF: their 2*M*N*K / that time;\n"
               "other: the rest of ForwardBackward (non-GEMM kernels, bias loops, memsets);\n"
               "z+clip: zeroing the gradients and ClipGradNorm; adamw: AdamWUpdate. Medians of each part.\n"
               "busy: CPUs kept busy by OTHER processes meanwhile (of {}); above ~0.1 the row is too low.\n"
               "ceil: oneDNN square-2048 GFLOP/s (best of sgemm and matmul) just before the row: how far the machine drifted.\n",
               r["cpus"].get<int>());
    for (const auto& s : r["steps"]) {
      if (s["preset"] != "gpt2-124m" || s["backend"] != "onednn") continue;
      fmt::print("\nslowest GEMMs of one step, {} T={} {}:\n", s["preset"].get<std::string>(), s["T"].get<int64_t>(),
                 s["backend"].get<std::string>());
      for (const auto& g : s["gemm_shapes"])
        fmt::print("  {} M={:<6} N={:<6} K={:<6} x{:<3} {:>8.1f} ms {:>7.1f} GFLOP/s\n", g["op"].get<std::string>(),
                   g["M"].get<int64_t>(), g["N"].get<int64_t>(), g["K"].get<int64_t>(), g["calls"].get<int64_t>(),
                   g["ms"].get<double>(), g["gflops"].get<double>());
    }
  }
  for (const auto& [key, rows] : r["kernels"].items()) {
    fmt::print("\nnon-GEMM kernels per step, {} (isolated, x calls per step):\n", key);
    for (const auto& k : rows)
      fmt::print("  {:<22} x{:<4} {:>8.1f} ms\n", k["kernel"].get<std::string>(), k["calls"].get<double>(),
                 k["ms"].get<double>());
  }
  for (const auto& u : r["update_bandwidth"]) {
    fmt::print("\nthe update's memory-bound kernels, {} ({} params), against a triad of {:.1f} GB/s:\n",
               u["preset"].get<std::string>(), u["params"].get<int64_t>(), u["triad_gb_per_s"].get<double>());
    for (const auto& k : u["rows"])
      fmt::print("  {:<14} {:>8.1f} ms {:>7.1f} GB/s {:>5.0f}% of triad\n", k["kernel"].get<std::string>(),
                 k["ms"].get<double>(), k["gb_per_s"].get<double>(), 100 * k["of_triad"].get<double>());
  }
  fmt::print("\n== Reference (from the issue, not measured here) ==\n");
  fmt::print("llm.c-style C trainer, gpt2-124m B=4 T=64: {:.0f} GFLOP/s, {:.0f} tokens/s\n", kLlmcGflops,
             kLlmcTokensPerS);
  fmt::print("goal: gpt2-124m at >= {:.0f}% of the ceiling = {:.0f} GFLOP/s\n", 100 * kGoalFraction,
             kGoalFraction * ceil);
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&](const char* key) -> const char* {
      const size_t n = std::strlen(key);
      return a.compare(0, n, key) == 0 ? a.c_str() + n : nullptr;
    };
    if (a == "--quick") {
      o->presets = {"small", "gpt2-124m"};
      o->seqs = {64};
      o->sgemm_seconds = 0.2;
      o->step_budget_s = 1.0;
    } else if (a == "--misdetected-steps") {
      o->misdetected_steps = true;
    } else if (a == "--no-child") {
      o->child = false;
    } else if (a == "--child-run") {
      o->is_child = true;
      o->child = false;
    } else if (const char* v = val("--backends=")) {
      o->backends = Split(v);
    } else if (const char* v = val("--dtypes=")) {
      o->dtypes = Split(v);
    } else if (const char* v = val("--presets=")) {
      o->presets = std::string(v) == "none" ? std::vector<std::string>{} : Split(v);
    } else if (const char* v = val("--seqs=")) {
      o->seqs.clear();
      for (auto& s : Split(v)) o->seqs.push_back(std::atoll(s.c_str()));
    } else if (const char* v = val("--batch=")) {
      o->batch = std::atoll(v);
    } else if (const char* v = val("--threads=")) {
      o->threads = std::atoi(v);
    } else if (const char* v = val("--sgemm-seconds=")) {
      o->sgemm_seconds = std::atof(v);
    } else if (const char* v = val("--step-budget=")) {
      o->step_budget_s = std::atof(v);
    } else {
      fmt::print(stderr, "unknown argument {}\nusage: {} [--quick] [--no-child] [--backends=onednn,openblas] "
                 "[--presets=small,gpt2-124m] [--seqs=64,256] [--batch=4] [--threads=N] [--dtypes=float32,bfloat16]\n", a, argv[0]);
      return false;
    }
  }
  for (auto& b : o->backends)
    if (!ParseGemmBackend(b).ok()) {
      fmt::print(stderr, "--backends: {}: expected onednn or openblas\n", b);
      return false;
    }
  for (auto& d : o->dtypes)
    if (!ParseChoice(kComputeDtypeChoices, d)) {
      fmt::print(stderr, "--dtypes: {}: expected float32 or bfloat16\n", d);
      return false;
    }
  for (auto& p : o->presets)
    if (!ModelPreset(p).ok()) {
      fmt::print(stderr, "--presets: {}\n", ModelPreset(p).status().ToString());
      return false;
    }
  if (o->batch <= 0 || o->seqs.empty()) {
    fmt::print(stderr, "--batch and --seqs must be positive\n");
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, &o)) return 2;
  SetComputeThreads(o.threads);
  const auto t_start = Clock::now();

  json r;
  r["threads"] = ComputeThreads();
  r["cpus"] = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  r["loadavg_at_start"] = [] {
    std::ifstream f("/proc/loadavg");
    double l1 = 0;
    f >> l1;
    return l1;
  }();
  r["openblas_coretype_env"] = CoretypeEnv();
  r["openblas_thread_timeout_env"] = EnvOr("OPENBLAS_THREAD_TIMEOUT", "unset");
  r["omp_num_threads_env"] = EnvOr("OMP_NUM_THREADS", "unset");
  r["openblas_core"] = openblas_get_corename();
  r["openblas_config"] = openblas_get_config();
  const dnnl_version_t* dv = dnnl_version();
  r["onednn_version"] = fmt::format("{}.{}.{}", dv->major, dv->minor, dv->patch);
  r["onednn_isa"] = dnnl_cpu_isa2str(dnnl_get_effective_cpu_isa());
  if (!o.is_child) {
    fmt::print("throughput: {} threads of {} CPUs; OPENBLAS_CORETYPE={} -> OpenBLAS core {} ({}); "
               "OPENBLAS_THREAD_TIMEOUT={}; oneDNN {} isa {}\n",
               r["threads"].get<int>(), r["cpus"].get<int>(), CoretypeEnv(), openblas_get_corename(),
               openblas_get_config(), r["openblas_thread_timeout_env"].get<std::string>(),
               r["onednn_version"].get<std::string>(), r["onednn_isa"].get<std::string>());
    std::fflush(stdout);
  }

  std::vector<std::string> libs;
  for (auto& b : o.backends) {
    libs.push_back(b);
    if (b == "onednn") libs.push_back("onednn matmul");
  }
  r["sgemm"] = MeasureSgemm(o, libs);
  r["steps"] = json::array();
  // Training steps on OpenBLAS run where it is tuned: in this process when the
  // environment sets OPENBLAS_CORETYPE, else in the child that sets it. Steps on the
  // misdetected OpenBLAS take minutes and add nothing the SGEMM table does not show.
  const bool openblas_tuned_here = CoretypeEnv() != "unset";
  for (const auto& backend : o.backends) {
    if (backend == "openblas" && !openblas_tuned_here && !o.misdetected_steps) continue;
    for (const auto& preset : o.presets)
      for (int64_t T : o.seqs) {
        for (const auto& d : o.dtypes) {
          const ComputeDtype dtype = *ParseChoice(kComputeDtypeChoices, d);
          if (dtype == ComputeDtype::kBfloat16 && backend != "onednn") continue;  // bf16 is oneDNN's
          r["steps"].push_back(MeasureSteps(o, backend, preset, T, dtype));
          if (!o.is_child) {
            const auto& s = r["steps"].back();
            fmt::print("  measured {} T={} {}: {:.1f} ms/step\n", preset, T, s["backend"].get<std::string>(),
                       s["ms_step"].get<double>());
            std::fflush(stdout);
          }
        }
      }
  }
  r["kernels"] = json::object();
  r["update_bandwidth"] = json::array();
  if (!o.is_child)
    for (const auto& preset : o.presets) {
      for (int64_t T : o.seqs) r["kernels"][fmt::format("{} B={} T={}", preset, o.batch, T)] = MeasureKernels(preset, o.batch, T);
      r["update_bandwidth"].push_back(MeasureUpdateBandwidth(preset));
    }

  if (o.child) {
    const bool want_openblas = std::find(o.backends.begin(), o.backends.end(), "openblas") != o.backends.end();
    json c = want_openblas ? RunChild(o) : json(nullptr);
    if (c.is_object()) {
      for (auto& s : c["sgemm"]) r["sgemm"].push_back(s);
      for (auto& s : c["steps"]) r["steps"].push_back(s);
      r["child_openblas_core"] = c["openblas_core"];
      r["child_coretype_env"] = c["openblas_coretype_env"];
    }
  }
  // The ceiling is the best square SGEMM of the run, including the oneDNN re-measurements
  // before each step configuration: the machine's speed drifts, and the fraction should
  // not flatter a step that ran while the machine was fast.
  double ceil = 0;
  std::string ceil_lib;
  for (const auto& s : r["sgemm"])
    if (s["what"] == "square" && s["gflops"].get<double>() > ceil) {
      ceil = s["gflops"];
      ceil_lib = s["lib"];
    }
  for (const auto& s : r["steps"])
    if (s["ceiling_now_gflops"].get<double>() > ceil) {
      ceil = s["ceiling_now_gflops"];
      ceil_lib = "onednn (before a step row)";
    }
  r["ceiling_gflops"] = ceil;
  r["ceiling_lib"] = ceil_lib;
  for (auto& s : r["steps"]) s["fraction_of_ceiling"] = ceil > 0 ? s["model_gflops"].get<double>() / ceil : 0.0;
  r["reference"] = {{"llmc_gflops", kLlmcGflops}, {"llmc_tokens_per_s", kLlmcTokensPerS}, {"goal_fraction", kGoalFraction}};
  r["wall_s"] = Now(t_start);
  if (!o.is_child) {
    PrintReport(r);
    fmt::print("total benchmark time {:.0f} s\n", r["wall_s"].get<double>());
  }
  fmt::print("JSON {}\n", r.dump());
  return 0;
}
