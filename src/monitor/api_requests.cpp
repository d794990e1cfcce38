#include "monitor/api_requests.h"

#include <fmt/format.h>

#include "common/json.h"
#include "wire/protocol.h"
#include "wire/worker_vocab.h"

namespace elastrain {

// The bodies as records (common/json.h): each field checked by its type, required keys
// and unknown keys refused by ParseBody.
ELASTRAIN_JSON_RECORD(SubmitRequest, config_yaml)
ELASTRAIN_JSON_RECORD(ChaosRequest, action, rank, host, factor, seconds)

namespace {

// The body as a T, or InvalidArgument "<what>: ...; expected <shape>" (a client's mistake:
// HTTP 400). Nothing is parsed deeper than kMaxRequestJsonDepth.
template <typename T>
Result<T> ParseBody(std::string_view body, std::string_view what, std::string_view shape, const RecordRules& rules) {
  const auto bad = [&](const Status& st) { return Status::InvalidArgument(fmt::format("{}; expected {}", st.message(), shape)); };
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos)
    return Status::InvalidArgument(fmt::format("{}: empty body; expected {}", what, shape));
  auto j = ParseJson(body, what, kMaxRequestJsonDepth);
  if (!j.ok()) return bad(j.status());
  auto r = ParseRecord<T>(j.value(), what, rules);
  if (!r.ok()) return bad(r.status());
  return r;
}

}  // namespace

Result<SubmitRequest> ParseSubmitRequest(std::string_view body) {
  constexpr std::string_view kWhat = "submit", kShape = "{\"config_yaml\": \"<the job's config as YAML>\"}";
  ELASTRAIN_ASSIGN_OR_RETURN(SubmitRequest r,
                             ParseBody<SubmitRequest>(body, kWhat, kShape, {.required = {"config_yaml"}, .reject_unknown = true}));
  if (r.config_yaml.empty())
    return Status::InvalidArgument(fmt::format("{}: field 'config_yaml': empty; expected {}", kWhat, kShape));
  return r;
}

Result<ChaosRequest> ParseChaosRequest(std::string_view body) {
  constexpr std::string_view kWhat = "chaos",
                             kShape = "{\"action\": \"kill\"|\"hang\"|\"host\"|\"unslow\", \"rank\": R}, {\"action\": "
                                      "\"slow\", \"rank\": R, \"factor\": F, \"seconds\": S}, {\"action\": \"preempt\", "
                                      "\"rank\": R, \"seconds\": S} or {\"action\": \"host\", \"host\": NAME}";
  ELASTRAIN_ASSIGN_OR_RETURN(ChaosRequest r,
                             ParseBody<ChaosRequest>(body, kWhat, kShape, {.required = {"action"}, .reject_unknown = true}));
  const auto bad = [&](const std::string& what) {
    return Status::InvalidArgument(fmt::format("{}: {}; expected {}", kWhat, what, kShape));
  };
  if (auto a = Parse<CommandAction>(r.action); !a.ok() || !IsChaosAction(a.value()))
    return bad(fmt::format("field 'action': '{}' is not a chaos action: expected kill, hang, host, slow, unslow or "
                           "preempt",
                           r.action.substr(0, 40)));
  if (r.rank < -1)
    return Status::InvalidArgument(
        fmt::format("{}: field 'rank': {} is out of range: expected a rank >= 0 (or -1: none)", kWhat, r.rank));
  if (r.action == Name(CommandAction::kPreempt)) {
    if (r.factor != 0) return bad("field 'factor': only slow takes a factor, not preempt");
    if (!(r.seconds >= 0 && r.seconds <= kMaxSlowSeconds))
      return bad(fmt::format("field 'seconds': {} is out of range: expected 0 (the slot never returns) to {}",
                             r.seconds, kMaxSlowSeconds));
    return r;
  }
  if (r.action != Name(CommandAction::kSlow)) {
    if (r.factor != 0) return bad(fmt::format("field 'factor': only slow takes a factor, not {}", r.action));
    if (r.seconds != 0) return bad(fmt::format("field 'seconds': only slow and preempt take seconds, not {}", r.action));
    return r;
  }
  if (r.factor == 0) return bad(fmt::format("field 'factor': missing: slow needs a factor in (1, {}]", kMaxSlowFactor));
  if (!(r.factor > 1 && r.factor <= kMaxSlowFactor))
    return bad(fmt::format("field 'factor': {} is out of range: expected a number in (1, {}] (how many times slower)",
                           r.factor, kMaxSlowFactor));
  if (!(r.seconds >= 0 && r.seconds <= kMaxSlowSeconds))
    return bad(fmt::format("field 'seconds': {} is out of range: expected 0 (until unslow) to {}", r.seconds,
                           kMaxSlowSeconds));
  return r;
}

}  // namespace elastrain
