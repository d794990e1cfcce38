// The run config (src/config/config.h): YAML text, then `key=value` overrides. The input
// is split at its first NUL byte: before it the CONFIG.yml text, after it the overrides,
// one per line (no NUL: YAML only). Property of an accepted config: ConfigToYaml's text
// (what the controller hands every worker) loads back to the same config.
#include <cstdio>
#include <string>
#include <vector>

#include "config/config.h"
#include "fuzz_check.h"

using namespace elastrain;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input = fuzz::AsString(data, size);
  const size_t nul = input.find('\0');
  const std::string yaml = input.substr(0, nul);
  std::vector<std::string> overrides;
  if (nul != std::string::npos) {
    for (size_t start = nul + 1; start <= input.size();) {
      size_t nl = input.find('\n', start);
      if (nl == std::string::npos) nl = input.size();
      if (nl > start) overrides.push_back(input.substr(start, nl - start));
      start = nl + 1;
    }
  }
  std::vector<std::string> ignored;
  Result<TrainConfig> c = LoadConfigText(yaml, "fuzz.yml", overrides, &ignored);
  if (!c.ok()) return 0;
  const std::string resolved = ConfigToYaml(*c);
  Result<TrainConfig> again = LoadConfigText(resolved, "resolved config");
  if (!again.ok()) std::fprintf(stderr, "%s\n", again.status().ToString().c_str());
  FUZZ_CHECK(again.ok(), "ConfigToYaml's text of an accepted config loads");
  FUZZ_CHECK(ConfigToYaml(*again) == resolved, "a config survives ConfigToYaml and LoadConfigText unchanged");
  return 0;
}
