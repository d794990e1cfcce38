// JSONL documents (src/data/jsonl.h): the input is a whole .jsonl file, its text in the
// field "text". Property: an accepted file gives one "\n"-terminated text per document,
// and no more documents than lines; a refused one names the file and a line.
#include <string>

#include "data/jsonl.h"
#include "fuzz_check.h"

using namespace elastrain;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string content = fuzz::AsString(data, size);
  Result<std::string> text = JsonlDocumentsText("fuzz.jsonl", content, "text");
  if (!text.ok()) {
    FUZZ_CHECK(text.status().message().rfind("fuzz.jsonl:", 0) == 0, "an error names file:line");
    return 0;
  }
  FUZZ_CHECK(text->empty() || text->back() == '\n', "each document ends with a newline");
  return 0;
}
