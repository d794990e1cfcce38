#include "elastic/health_check.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "common/clock.h"
#include "common/files.h"
#include "common/process.h"

namespace elastrain {

namespace {

using Clock = std::chrono::steady_clock;

// The GEMM's side: 2 x 128^3 = 4.2 MFLOP a run, a few milliseconds in a plain loop.
constexpr int kProbeGemmN = 128;
// Each part runs at least this many times (the best of them counts), at most kMaxRuns.
constexpr int kMinRuns = 3, kMaxRuns = 400;
// The memory probe copies this much per run (a millisecond or two), through buffers of
// kProbeCopyBytes.
constexpr size_t kProbeCopyChunk = size_t{8} << 20;
// How often a running check command is polled for its end.
constexpr std::chrono::milliseconds kCommandPoll{10};

// C (n,n) = A (n,n) x B (n,n), i-k-j order so that the inner loop vectorises.
void PlainGemm(const float* a, const float* b, float* c, int n) {
  std::fill(c, c + static_cast<size_t>(n) * n, 0.0f);
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < n; ++k) {
      const float aik = a[static_cast<size_t>(i) * n + k];
      const float* brow = b + static_cast<size_t>(k) * n;
      float* crow = c + static_cast<size_t>(i) * n;
      for (int j = 0; j < n; ++j) crow[j] += aik * brow[j];
    }
}

// Runs `once` (which returns the work it did) until `budget` is spent (at least kMinRuns
// times); the best rate of one run.
template <typename F>
double BestRate(std::chrono::milliseconds budget, F once) {
  const Clock::time_point end = Clock::now() + budget;
  double best = 0;
  for (int run = 0; run < kMaxRuns && (run < kMinRuns || Clock::now() < end); ++run) {
    const Clock::time_point t0 = Clock::now();
    const double work = once();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s > 0) best = std::max(best, work / s);
  }
  return best;
}

volatile float g_probe_sink = 0;  // keeps the probe's results alive

// The last `limit` bytes of `text`, marked as cut when they are not all of it.
std::string Tail(const std::string& text, size_t limit) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  if (t.size() <= limit) return t;
  return "..." + t.substr(t.size() - limit);
}

}  // namespace

ProbeFigures RunProbe(std::chrono::milliseconds budget) {
  ProbeFigures f;
  {
    const size_t nn = static_cast<size_t>(kProbeGemmN) * kProbeGemmN;
    std::vector<float> a(nn), b(nn), c(nn);
    for (size_t i = 0; i < nn; ++i) {
      a[i] = static_cast<float>(i % 7) * 0.25f;
      b[i] = static_cast<float>(i % 5) * 0.5f;
    }
    const double flops = 2.0 * kProbeGemmN * kProbeGemmN * kProbeGemmN;
    f.gemm_gflops = BestRate(budget, [&] {
                      PlainGemm(a.data(), b.data(), c.data(), kProbeGemmN);
                      g_probe_sink = g_probe_sink + c[nn / 2];
                      return flops;
                    }) / 1e9;
  }
  {
    std::unique_ptr<char[]> src(new (std::nothrow) char[kProbeCopyBytes]);
    std::unique_ptr<char[]> dst(new (std::nothrow) char[kProbeCopyBytes]);
    if (src && dst) {
      std::memset(src.get(), 1, kProbeCopyBytes);  // touch every page before timing
      std::memset(dst.get(), 0, kProbeCopyBytes);
      // Chunk after chunk through the buffers (larger together than a cache), each chunk
      // short enough to run within one scheduler slice on a busy machine.
      size_t at = 0;
      f.memory_gbps = BestRate(budget, [&] {
                        std::memcpy(dst.get() + at, src.get() + at, kProbeCopyChunk);
                        g_probe_sink = g_probe_sink + static_cast<float>(dst[at + kProbeCopyChunk / 2]);
                        at = (at + kProbeCopyChunk) % kProbeCopyBytes;
                        return 2.0 * static_cast<double>(kProbeCopyChunk);  // read + written
                      }) / 1e9;
    }
  }
  return f;
}

Status CheckWritable(const std::string& dir) {
  const std::string path = fmt::format("{}/.health-check-{}", dir, ::getpid());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return Status::IOError(fmt::format("the run directory {} is not writable: cannot create {}: {}", dir, path,
                                       std::strerror(errno)));
  const char probe[] = "elastrain health check\n";
  const bool written = ::write(fd, probe, sizeof(probe) - 1) == static_cast<ssize_t>(sizeof(probe) - 1);
  const int werr = errno;
  ::close(fd);
  const bool removed = ::unlink(path.c_str()) == 0;
  if (!written)
    return Status::IOError(fmt::format("the run directory {} is not writable: writing {} failed: {}", dir, path,
                                       std::strerror(werr)));
  if (!removed)
    return Status::IOError(fmt::format("the run directory {}: cannot remove {}: {}", dir, path, std::strerror(errno)));
  return Status::OK();
}

CommandResult RunCheckCommand(const std::string& command, std::chrono::milliseconds timeout, size_t output_limit,
                              const std::function<bool()>& cancelled) {
  CommandResult r;
  char out_path[] = "/tmp/elastrain-health-XXXXXX";
  const int out_fd = ::mkstemp(out_path);
  if (out_fd < 0) {
    r.reason = fmt::format("cannot create a file for the output of `{}`: {}", command, std::strerror(errno));
    return r;
  }
  ::close(out_fd);
  SpawnSpec spec;
  spec.program = "/bin/sh";
  spec.args = {"-c", command};
  spec.log_path = out_path;
  spec.env_drop_prefixes = {"ELASTRAIN_ETCD_"};  // the store's credentials are not the check's business
  auto pid = SpawnProcess(spec);
  if (!pid.ok()) {
    ::unlink(out_path);
    r.reason = fmt::format("cannot run `{}`: {}", command, pid.status().message());
    return r;
  }
  const Clock::time_point deadline = Clock::now() + timeout;
  int status = 0;
  bool ended = false, timed_out = false, gave_up = false;
  for (;;) {
    const pid_t w = ::waitpid(pid.value(), &status, WNOHANG);
    if (w == pid.value() || (w < 0 && errno != EINTR)) {
      ended = w == pid.value();
      break;
    }
    gave_up = cancelled && cancelled();
    if (gave_up || Clock::now() >= deadline) {
      timed_out = !gave_up;
      ::kill(-pid.value(), SIGKILL);  // it leads its process group: whatever it started goes too
      ended = ::waitpid(pid.value(), &status, 0) == pid.value();
      break;
    }
    std::this_thread::sleep_for(kCommandPoll);
  }
  auto text = ReadFile(out_path);
  ::unlink(out_path);
  const std::string output = text.ok() ? Tail(text.value(), output_limit) : "";
  const ProcessExit e = ProcessExitFromStatus(status);
  if (ended && !timed_out && !gave_up && e.ok()) {
    r.ok = true;
    return r;
  }
  const std::string how = gave_up     ? std::string("was killed: the agent is stopping")
                          : timed_out ? fmt::format("did not end within {:.1f}s and was killed", timeout.count() / 1000.0)
                          : ended     ? e.Describe()
                                    : "could not be waited for";
  r.reason = fmt::format("`{}` {}", command, how);
  if (!output.empty()) r.reason += ": " + output;
  return r;
}

HealthRecord RunHealthCheck(const HealthCheckOptions& opt, const std::string& host, const std::string& agent,
                            double lifetime_period) {
  HealthRecord rec;
  rec.host = host;
  rec.agent = agent;
  rec.check = opt.command.empty() ? "builtin" : opt.command;
  rec.healthy = true;
  auto fail = [&](const std::string& why) {
    if (!rec.healthy) return;  // the first failing step is the reason
    rec.healthy = false;
    rec.reason = why;
  };
  if (opt.store_reachable) {
    Status st = opt.store_reachable();
    if (!st.ok()) fail("the store did not answer: " + st.message());
  }
  if (!opt.run_dir.empty()) {
    Status st = CheckWritable(opt.run_dir);
    if (!st.ok()) fail(st.message());
  }
  if (opt.probe) {
    const ProbeFigures f = RunProbe();
    rec.gemm_gflops = f.gemm_gflops;
    rec.memory_gbps = f.memory_gbps;
    if (f.gemm_gflops <= 0 || f.memory_gbps <= 0)
      fail(fmt::format("the built-in probe could not run (GEMM {:.2f} GFLOP/s, memory {:.2f} GB/s: its {} MB buffers "
                       "could not be allocated?)",
                       f.gemm_gflops, f.memory_gbps, 2 * (kProbeCopyBytes >> 20)));
  }
  if (!opt.command.empty()) {
    const CommandResult c = RunCheckCommand(opt.command, opt.timeout, kHealthOutputLimit, opt.cancelled);
    if (!c.ok) fail(c.reason);
  }
  rec.checked_at = WallSeconds();
  rec.expires_at = rec.checked_at + kHealthRecordPeriods * std::max(1.0, lifetime_period);
  return rec;
}

}  // namespace elastrain
