// The levels of the project's logger (common/log.h), named by the log_level config key.
// Apart from log.h so that the config names a level without including spdlog.
#pragma once

#include <array>
#include <string_view>

#include "common/choice.h"

namespace elastrain {

// The log_level config key: messages below it are dropped.
enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError };
inline constexpr std::array<Choice<LogLevel>, 5> kLogLevelChoices = {{
    {"trace", LogLevel::kTrace},
    {"debug", LogLevel::kDebug},
    {"info", LogLevel::kInfo},
    {"warn", LogLevel::kWarn},
    {"error", LogLevel::kError},
}};
constexpr std::string_view LogLevelName(LogLevel l) { return ChoiceWord(kLogLevelChoices, l); }

}  // namespace elastrain
