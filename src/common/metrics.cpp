#include "common/metrics.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "common/log.h"
#include "common/safe_path.h"

namespace elastrain {

MetricsWriter::~MetricsWriter() {
  if (fd_ >= 0) ::close(fd_);
}

Status MetricsWriter::Open(const std::string& path, bool append) {
  if (fd_ >= 0) ::close(fd_);
  path_ = path;
  fd_ = -1;
  // Never through a link (common/safe_path.h): appending is how a planted link hurts most.
  auto fd = OpenFile(path, O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | (append ? 0 : O_TRUNC), 0644);
  if (!fd.ok()) return fd.status();
  fd_ = fd->release();
  return Status::OK();
}

Status MetricsWriter::Write(const nlohmann::json& record) {
  if (fd_ < 0) return Status::FailedPrecondition("metrics writer is not open");
  std::string line = record.dump() + "\n";
  if (fenced_out_) return Status::FailedPrecondition(path_ + ": fenced out earlier: not written");
  if (fence_) {
    Status may = fence_();
    if (may.code() == StatusCode::kFailedPrecondition) {
      fenced_out_ = true;
      held_.clear();
      return Status::FailedPrecondition(path_ + ": not written: " + may.message());
    }
    if (!may.ok()) {
      if (held_.size() >= kMaxHeldLines) held_.pop_front();
      held_.push_back(std::move(line));
      return Status::OK();
    }
    while (!held_.empty()) {
      ELASTRAIN_RETURN_IF_ERROR(WriteBytes(held_.front()));
      held_.pop_front();
    }
  }
  return WriteBytes(line);
}

Status MetricsWriter::WriteBytes(const std::string& line) {
  if (fd_ < 0) return Status::FailedPrecondition("metrics writer is not open");
  // One write(2) per line on an O_APPEND descriptor: lines of several processes
  // appending to one file (the controller's and the chief's events) never interleave.
  ssize_t n;
  do {
    n = ::write(fd_, line.data(), line.size());
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(line.size()))
    return Status::IOError(path_ + ": write failed (" + (n < 0 ? std::strerror(errno) : "short write") + ")");
  return Status::OK();
}

Result<std::string> MetricsWriter::TrimTornTail(size_t tail_bytes) {
  if (fd_ < 0) return Status::FailedPrecondition("metrics writer is not open");
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return Status::IOError(path_ + ": stat failed (" + std::strerror(errno) + ")");
  if (!S_ISREG(st.st_mode)) return std::string();  // a FIFO or device: nothing to read back
  const off_t size = st.st_size;
  const off_t begin = size > static_cast<off_t>(tail_bytes) ? size - static_cast<off_t>(tail_bytes) : 0;
  std::string tail(static_cast<size_t>(size - begin), '\0');
  for (size_t got = 0; got < tail.size();) {
    const ssize_t n = ::pread(fd_, tail.data() + got, tail.size() - got, begin + static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::IOError(path_ + ": read failed (" + (n < 0 ? std::strerror(errno) : "end of file") + ")");
    got += static_cast<size_t>(n);
  }
  if (tail.empty() || tail.back() == '\n') return tail;
  const size_t newline = tail.rfind('\n');
  if (newline == std::string::npos && begin > 0) {
    LOG_WARN("{}: its last line, over {} bytes, has no newline (a torn write?); ending it there", path_, tail_bytes);
    ELASTRAIN_RETURN_IF_ERROR(WriteBytes("\n"));
    return std::string();
  }
  const size_t keep = newline == std::string::npos ? 0 : newline + 1;
  LOG_WARN("{}: its last line is torn ({} bytes without a newline); cutting it", path_, tail.size() - keep);
  if (::ftruncate(fd_, begin + static_cast<off_t>(keep)) != 0)
    return Status::IOError(path_ + ": truncate failed (" + std::strerror(errno) + ")");
  tail.resize(keep);
  return tail;
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
