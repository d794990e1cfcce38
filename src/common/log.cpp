#include "common/log.h"

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
  auto logger = spdlog::default_logger();
  auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, /*truncate=*/false);
  sink->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
  logger->sinks().push_back(sink);
}

}  // namespace elastrain
