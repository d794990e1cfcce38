#include "common/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <set>

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include "common/safe_path.h"

namespace elastrain {

namespace {

// A log file appended to through a descriptor opened without following links
// (common/safe_path.h); spdlog's own file sink opens by name and would follow one.
class FdSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit FdSink(UniqueFd fd) : fd_(std::move(fd)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t line;
    formatter_->format(msg, line);
    const char* p = line.data();
    size_t n = line.size();
    while (n > 0) {
      const ssize_t w = ::write(fd_.get(), p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return;  // a full disk loses log lines, never the run
      p += w;
      n -= static_cast<size_t>(w);
    }
  }
  void flush_() override {}

 private:
  UniqueFd fd_;
};

}  // namespace

void SetLogLevel(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace: return spdlog::set_level(spdlog::level::trace);
    case LogLevel::kDebug: return spdlog::set_level(spdlog::level::debug);
    case LogLevel::kInfo: return spdlog::set_level(spdlog::level::info);
    case LogLevel::kWarn: return spdlog::set_level(spdlog::level::warn);
    case LogLevel::kError: return spdlog::set_level(spdlog::level::err);
  }
}

void AddLogFile(const std::string& path) {
  static std::mutex mu;
  static std::set<std::string> added;  // GUARDED_BY(mu)
  std::lock_guard<std::mutex> lock(mu);
  if (!added.insert(path).second) return;  // once per process, however many generations log there
  auto fd = OpenFile(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0644);
  if (!fd.ok()) {
    added.erase(path);
    LOG_WARN("no log file: {}", fd.status().message());
    return;
  }
  auto logger = spdlog::default_logger();
  auto sink = std::make_shared<FdSink>(std::move(fd.value()));
  sink->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
  logger->sinks().push_back(sink);
}

}  // namespace elastrain
