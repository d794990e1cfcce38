// manifest.json of `elastrain data prepare` (src/data/prepared_manifest.h): the input is the
// file. Property: a refused file names the file; an accepted one has shards whose counts
// add up to its tokens, each a plain name in its directory, and writes back to a file that
// parses to the same shards.
#include <string>

#include "data/prepared_manifest.h"
#include "fuzz_check.h"

using namespace elastrain;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = fuzz::AsString(data, size);
  Result<PreparedManifest> m = ParsePreparedManifest(text, "fuzz/manifest.json");
  if (!m.ok()) {
    FUZZ_CHECK(m.status().message().rfind("fuzz/manifest.json: ", 0) == 0, "an error names the file");
    return 0;
  }
  int64_t sum = 0;
  for (const PreparedShard& s : m->shards) {
    FUZZ_CHECK(!s.file.empty() && s.file.find('/') == std::string::npos && s.file != "..", "a plain file name");
    FUZZ_CHECK(s.tokens >= 0, "a count");
    sum += s.tokens;
  }
  FUZZ_CHECK(sum == m->tokens, "the shards add up to the tokens");
  Result<PreparedManifest> again = ParsePreparedManifest(PreparedManifestJson(*m), "again");
  FUZZ_CHECK(again.ok() && again->shards.size() == m->shards.size() && again->tokens == m->tokens,
             "what is written back parses to the same");
  return 0;
}
