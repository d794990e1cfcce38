// The dashboard page (web/dashboard.html, compiled into the binary) and the JSON it
// draws: the job's status, the loss / eval-loss / throughput series, the events, the
// goodput breakdown with its timeline, and the checkpoints. The live page fetches
// GET /api/v1/dashboard every 2 s; `elastrain report` writes the same page with the
// data inlined, so both show the same charts.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "monitor/run_view.h"

namespace elastrain {

// At most this many points per series (older ones are thinned, the newest kept).
inline constexpr size_t kMaxSeriesPoints = 2000;
inline constexpr size_t kMaxEvents = 500;  // the newest events are sent

nlohmann::json DashboardJson(const nlohmann::json& status, const RunSnapshot& run, const nlohmann::json& checkpoints);
const std::string& DashboardHtml();
// The page with `data` (DashboardJson) inlined: a self-contained report.
std::string ReportHtml(const nlohmann::json& data);

}  // namespace elastrain
