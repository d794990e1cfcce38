// The HTTP API's request bodies (src/monitor/api_requests.h): POST /api/v1/jobs
// (ParseSubmitRequest) and POST /api/v1/chaos (ParseChaosRequest); the input is the body.
// Any body must give a value or an error, never an exception or a crash; an accepted
// submit body's config then loads (or is refused) as the server loads it.
#include <string_view>

#include "config/config.h"
#include "fuzz_check.h"
#include "monitor/api_requests.h"

using namespace elastrain;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  Result<SubmitRequest> submit = ParseSubmitRequest(body);
  if (!submit.ok()) FUZZ_CHECK(!submit.status().message().empty(), "a refused submit body says why");
  else (void)LoadConfigText(submit->config_yaml, "submitted config");
  Result<ChaosRequest> chaos = ParseChaosRequest(body);
  if (!chaos.ok()) FUZZ_CHECK(!chaos.status().message().empty(), "a refused chaos body says why");
  return 0;
}
