#include "common/log.h"

#include <mutex>
#include <set>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

namespace elastrain {

bool SetLogLevel(const std::string& level) {
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") return false;
  spdlog::set_level(lvl);
  return true;
}

void AddLogFile(const std::string& path) {
  static std::mutex mu;
  static std::set<std::string> added;  // GUARDED_BY(mu)
  std::lock_guard<std::mutex> lock(mu);
  if (!added.insert(path).second) return;  // once per process, however many generations log there
  auto logger = spdlog::default_logger();
  auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, /*truncate=*/false);
  sink->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
  logger->sinks().push_back(sink);
}

}  // namespace elastrain
