// GET /metrics: the job in Prometheus' text exposition format (version 0.0.4). Every
// family is prefixed `elastrain_`; deploy/prometheus/alerts.yml alerts on them and
// docs/observability.md lists them.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "monitor/run_view.h"

namespace elastrain {

// `status`: JobStatusJson (monitor/job_api.h), or an empty object when no job runs.
std::string RenderPrometheus(const nlohmann::json& status, const RunSnapshot& run);

// Escapes a label value (backslash, double quote, newline).
std::string PrometheusLabel(const std::string& v);

}  // namespace elastrain
