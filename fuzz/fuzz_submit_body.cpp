// The body of POST /api/v1/jobs as src/monitor/job_api.cpp parses it today: JSON, an
// object with "config_yaml", whose text LoadConfigText loads. Stands in for
// fuzz_api_bodies.cpp until src/monitor/api_requests.h exists (fuzz/CMakeLists.txt).
// json::value() throws type_error when "config_yaml" is not a string; the server turns
// that into a 500 through its exception handler, so the harness counts it as an answer.
#include <string>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "fuzz_check.h"

using namespace elastrain;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = fuzz::AsString(data, size);
  auto body = nlohmann::json::parse(text, nullptr, false);
  if (!body.is_object() || !body.contains("config_yaml")) return 0;  // 400
  std::string yaml;
  try {
    yaml = body.value("config_yaml", "");
  } catch (const nlohmann::json::exception&) {
    return 0;  // 500 from the server's exception handler
  }
  Result<TrainConfig> cfg = LoadConfigText(yaml, "submitted config");
  if (cfg.ok()) FUZZ_CHECK(LoadConfigText(ConfigToYaml(*cfg), "resolved config").ok(), "the resolved config loads");
  return 0;
}
