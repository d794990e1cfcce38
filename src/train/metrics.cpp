#include "train/metrics.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace elastrain {

MetricsWriter::~MetricsWriter() {
  if (f_) std::fclose(f_);
}

Status MetricsWriter::Open(const std::string& path, bool append) {
  path_ = path;
  f_ = std::fopen(path.c_str(), append ? "a" : "w");
  if (!f_) return Status::IOError(path + ": cannot open for writing (" + std::strerror(errno) + ")");
  return Status::OK();
}

Status MetricsWriter::Write(const nlohmann::json& record) {
  if (!f_) return Status::FailedPrecondition("metrics writer is not open");
  std::string line = record.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), f_) != line.size() || std::fflush(f_) != 0)
    return Status::IOError(path_ + ": write failed (" + std::strerror(errno) + ")");
  return Status::OK();
}

ProgressLine::ProgressLine() : enabled_(::isatty(STDOUT_FILENO) == 1) {}

void ProgressLine::Update(int64_t step, int64_t steps, double loss, double tps, double eta) {
  if (!enabled_) return;
  std::string tok = tps >= 1000 ? fmt::format("{:.1f}k", tps / 1000) : fmt::format("{:.0f}", tps);
  std::string line = fmt::format("step {}/{} | loss {:.4f} | {} tok/s | ETA {}", step, steps, loss, tok,
                                 FormatDuration(eta));
  std::printf("\r\033[K%s", line.c_str());
  std::fflush(stdout);
  drawn_ = true;
}

void ProgressLine::Finish() {
  if (enabled_ && drawn_) std::printf("\n");
  drawn_ = false;
}

std::string FormatDuration(double s) {
  if (s < 0) s = 0;
  if (s < 60) return fmt::format("{:.1f}s", s);
  int64_t t = static_cast<int64_t>(s + 0.5);
  if (t < 3600) return fmt::format("{}m{:02d}s", t / 60, t % 60);
  return fmt::format("{}h{:02d}m", t / 3600, (t % 3600) / 60);
}

}  // namespace elastrain
