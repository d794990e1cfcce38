#include "monitor/api_requests.h"

#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace elastrain {

namespace {

// The deepest nesting of [ and { outside strings; stops counting past `limit`.
int JsonDepth(std::string_view s, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : s) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > deepest && (deepest = depth) > limit) return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

// A field name as an error message shows it: at most 64 bytes of what the client sent.
std::string Shown(std::string_view key) {
  return key.size() <= 64 ? std::string(key) : std::string(key.substr(0, 64)) + "...";
}

const char* TypeName(const nlohmann::json& v) {
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_null()) return "null";
  if (v.is_array()) return "an array";
  return "an object";
}

Status WrongType(std::string_view what, std::string_view field, const nlohmann::json& v, std::string_view expected) {
  return Status::InvalidArgument(fmt::format("{}: field \"{}\" is {}; expected {}", what, field, TypeName(v), expected));
}

// The body as a JSON object, or InvalidArgument saying what `shape` was expected.
Result<nlohmann::json> ParseObject(std::string_view body, std::string_view what, std::string_view shape) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos)
    return Status::InvalidArgument(fmt::format("{}: empty body; expected {}", what, shape));
  if (JsonDepth(body, kMaxRequestJsonDepth) > kMaxRequestJsonDepth)
    return Status::InvalidArgument(fmt::format("{}: JSON nested deeper than {} levels; expected {}", what,
                                               kMaxRequestJsonDepth, shape));
  nlohmann::json j = nlohmann::json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument(fmt::format("{}: the body is not JSON; expected {}", what, shape));
  if (!j.is_object()) return Status::InvalidArgument(fmt::format("{}: the body is {}; expected {}", what, TypeName(j), shape));
  return j;
}

}  // namespace

Result<SubmitRequest> ParseSubmitRequest(std::string_view body) {
  constexpr std::string_view kWhat = "submit", kShape = "{\"config_yaml\": \"<the job's config as YAML>\"}";
  ELASTRAIN_ASSIGN_OR_RETURN(nlohmann::json j, ParseObject(body, kWhat, kShape));
  SubmitRequest r;
  bool seen = false;
  for (const auto& [key, v] : j.items()) {
    if (key != "config_yaml")
      return Status::InvalidArgument(fmt::format("{}: unknown field \"{}\"; expected {}", kWhat, Shown(key), kShape));
    if (!v.is_string()) return WrongType(kWhat, key, v, "a string of YAML");
    r.config_yaml = v.get<std::string>();
    seen = true;
  }
  if (!seen) return Status::InvalidArgument(fmt::format("{}: missing field \"config_yaml\"; expected {}", kWhat, kShape));
  if (r.config_yaml.empty())
    return Status::InvalidArgument(fmt::format("{}: field \"config_yaml\" is empty; expected {}", kWhat, kShape));
  return r;
}

Result<ChaosRequest> ParseChaosRequest(std::string_view body) {
  constexpr std::string_view kWhat = "chaos",
                             kShape = "{\"action\": \"kill\"|\"hang\"|\"host\", \"rank\": R} or {\"action\": \"host\", "
                                      "\"host\": NAME}";
  ELASTRAIN_ASSIGN_OR_RETURN(nlohmann::json j, ParseObject(body, kWhat, kShape));
  ChaosRequest r;
  bool has_action = false;
  for (const auto& [key, v] : j.items()) {
    if (key == "action") {
      if (!v.is_string()) return WrongType(kWhat, key, v, "a string (kill, hang or host)");
      r.action = v.get<std::string>();
      has_action = true;
    } else if (key == "rank") {
      if (v.is_number_unsigned()) {
        if (v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int>::max()))
          return Status::InvalidArgument(fmt::format("{}: field \"rank\" is {}; expected a rank of the current "
                                                     "generation",
                                                     kWhat, v.get<uint64_t>()));
        r.rank = static_cast<int>(v.get<uint64_t>());
      } else if (v.is_number_integer()) {
        const int64_t rank = v.get<int64_t>();
        if (rank < -1)
          return Status::InvalidArgument(fmt::format("{}: field \"rank\" is {}; expected a rank >= 0 (or -1: none)",
                                                     kWhat, rank));
        r.rank = static_cast<int>(rank);
      } else {
        return WrongType(kWhat, key, v, "an integer");
      }
    } else if (key == "host") {
      if (!v.is_string()) return WrongType(kWhat, key, v, "a string (a host name or agent id)");
      r.host = v.get<std::string>();
    } else {
      return Status::InvalidArgument(fmt::format("{}: unknown field \"{}\"; expected {}", kWhat, Shown(key), kShape));
    }
  }
  if (!has_action) return Status::InvalidArgument(fmt::format("{}: missing field \"action\"; expected {}", kWhat, kShape));
  return r;
}

}  // namespace elastrain
