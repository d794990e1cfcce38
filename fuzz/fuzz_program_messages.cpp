// The messages a launched program sends its worker (src/wire/program_messages.h). The
// input is what the program writes on its ELASTRAIN_CHANNEL_FD socket: lines of JSON.
// Each line goes through nlohmann::json::parse (no exceptions), as Channel::TakeLines
// does, and every value it yields through ParseProgramMessage. Property of an accepted
// message: it holds only what the header promises (ranges, finite numbers, metric names
// and count); a refused one gets InvalidArgument with a message.
#include <cctype>
#include <cmath>
#include <string>
#include <string_view>
#include <variant>

#include "fuzz_check.h"
#include "wire/program_messages.h"

using namespace elastrain;

namespace {
constexpr int64_t kMaxStep = int64_t{1} << 50;

bool MetricName(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  return true;
}

void Check(const ProgramMessage& m) {
  if (const auto* h = std::get_if<ProgramHello>(&m)) {
    FUZZ_CHECK(h->pid >= 0, "hello: pid >= 0");
  } else if (const auto* s = std::get_if<ProgramStep>(&m)) {
    FUZZ_CHECK(s->step >= 0 && s->step <= kMaxStep, "step: step in [0, 2^50]");
    FUZZ_CHECK(std::isnan(s->loss) || std::isfinite(s->loss), "step: loss finite or not given");
    FUZZ_CHECK(s->tokens >= 0 && s->tokens <= kMaxStep, "step: tokens in [0, 2^50]");
    FUZZ_CHECK(std::isfinite(s->step_seconds) && s->step_seconds >= 0, "step: step_seconds finite and >= 0");
    if (s->compute_seconds) {
      const double c = *s->compute_seconds;
      FUZZ_CHECK(std::isfinite(c) && c >= 0, "step: compute_seconds finite and >= 0");
      FUZZ_CHECK(s->step_seconds == 0 || c <= s->step_seconds * (1 + 1e-6) + 1e-9,
                 "step: compute_seconds at most step_seconds (up to rounding)");
    }
    FUZZ_CHECK(s->metrics.size() <= 32, "step: at most 32 metrics");
    for (const auto& [name, value] : s->metrics) {
      FUZZ_CHECK(MetricName(name), "step: metric names of 1 to 64 of A-Z a-z 0-9 _ .");
      FUZZ_CHECK(std::isfinite(value), "step: finite metric values");
    }
  } else if (const auto* c = std::get_if<ProgramCheckpoint>(&m)) {
    FUZZ_CHECK(c->step >= 0 && c->step <= kMaxStep, "checkpoint: step in [0, 2^50]");
    FUZZ_CHECK(std::isfinite(c->seconds) && c->seconds >= 0, "checkpoint: seconds finite and >= 0");
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = fuzz::AsString(data, size);
  size_t start = 0;
  while (start <= text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    const std::string_view line(text.data() + start, nl - start);
    start = nl + 1;
    auto j = nlohmann::json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) continue;
    ProgramMessage m;
    const Status st = ParseProgramMessage(j, &m);
    if (st.ok()) {
      FUZZ_CHECK(j.is_object(), "only objects are accepted");
      Check(m);
    } else {
      FUZZ_CHECK(st.code() == StatusCode::kInvalidArgument && !st.message().empty(),
                 "a refusal is InvalidArgument with a message");
    }
  }
  return 0;
}
