#include "common/json.h"

#include <fmt/format.h>

namespace elastrain {

namespace {

// "[json.exception.type_error.302] type must be string, but is number" -> "type must be
// string, but is number": nlohmann's tag says nothing to a user.
std::string WithoutNlohmannTag(const char* what) {
  std::string_view s(what);
  if (s.rfind("[json.exception.", 0) == 0) {
    const size_t end = s.find("] ");
    if (end != std::string_view::npos) s.remove_prefix(end + 2);
  }
  return std::string(s);
}

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
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest && (deepest = depth) > limit) return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

// At most 64 bytes of a key as a message shows it (a key comes from whoever sent the JSON).
std::string ShownKey(std::string_view key) {
  return key.size() <= 64 ? std::string(key) : std::string(key.substr(0, 64)) + "...";
}

// "a string (\"x\")", "null": what a wrong value is, as an error names it.
std::string Got(const nlohmann::json& v) {
  return v.is_null() || v.is_discarded() ? JsonTypeName(v) : fmt::format("{} ({})", JsonTypeName(v), JsonShown(v));
}

}  // namespace

JsonFieldError::JsonFieldError(std::string path, std::string detail)
    : std::invalid_argument(path.empty() ? detail : fmt::format("field '{}': {}", path, detail)),
      path_(std::move(path)),
      detail_(std::move(detail)) {}

JsonFieldError JsonFieldError::Under(std::string_view key) const {
  std::string p(key);
  if (!path_.empty()) p += (path_.front() == '[' ? "" : ".") + path_;
  return JsonFieldError(std::move(p), detail_);
}

const char* JsonTypeName(const nlohmann::json& v) {
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer()) return "an integer";  // signed or unsigned
  if (v.is_number()) return "a number";
  if (v.is_null()) return "null";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "nothing";  // discarded
}

std::string JsonShown(const nlohmann::json& v, size_t max_chars) {
  std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > max_chars) s = s.substr(0, max_chars) + "...";
  return s;
}

Result<nlohmann::json> ParseJson(std::string_view text, std::string_view what, int max_depth) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    return Status::Corruption(fmt::format("{}: empty, expected JSON", what));
  if (JsonDepth(text, max_depth) > max_depth)
    return Status::Corruption(fmt::format("{}: JSON nested deeper than {} levels", what, max_depth));
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const std::exception& e) {
    // Text shown as the answer began, unprintable bytes as '?': an HTML page, a proxy's error.
    std::string shown;
    for (char c : text.substr(0, 60)) shown += (c >= 0x20 && c < 0x7f) ? c : '?';
    return Status::Corruption(fmt::format("{}: not JSON ({}), starting '{}'", what, WithoutNlohmannTag(e.what()), shown));
  }
}

namespace json_detail {

void ThrowWrongType(const nlohmann::json& v, const char* expected) {
  throw JsonFieldError("", fmt::format("expected {}, got {}", expected, Got(v)));
}

void ThrowOutOfRange(const nlohmann::json& v, const std::string& expected) {
  throw JsonFieldError("", fmt::format("{} is out of range: expected {}", JsonShown(v), expected));
}

void ThrowWrapped(const std::exception& e) { throw JsonFieldError("", WithoutNlohmannTag(e.what())); }

Status RecordError(std::string_view what, const std::exception& e) {
  const auto* field = dynamic_cast<const JsonFieldError*>(&e);
  if (field && field->path().empty())
    return Status::Corruption(fmt::format("{}: {}", what, field->detail()));
  return Status::Corruption(fmt::format("{}: {}", what, field ? e.what() : WithoutNlohmannTag(e.what())));
}

Status CheckRecordKeys(const nlohmann::json& j, std::string_view what, const RecordRules& rules,
                       const std::vector<std::string_view>* known) {
  if (!j.is_object())
    return Status::Corruption(fmt::format("{}: expected a JSON object, got {}", what, Got(j)));
  for (std::string_view key : rules.required)
    if (!j.contains(key)) return Status::Corruption(fmt::format("{}: field '{}': missing", what, key));
  if (rules.reject_unknown && known != nullptr) {
    for (const auto& [key, value] : j.items()) {
      bool found = false;
      for (std::string_view k : *known) found = found || k == key;
      if (found) continue;
      std::string names;
      for (std::string_view k : *known) names += fmt::format("{}{}", names.empty() ? "" : ", ", k);
      return Status::Corruption(fmt::format("{}: field '{}': unknown (the fields are {})", what, ShownKey(key), names));
    }
  }
  return Status::OK();
}

}  // namespace json_detail

void RequireJsonObject(const nlohmann::json& j) {
  if (!j.is_object()) json_detail::ThrowWrongType(j, "an object");
}

// ---- StrictReader -------------------------------------------------------------------------

StrictReader::StrictReader(const nlohmann::json& j, std::string origin) : j_(j), origin_(std::move(origin)) {}

StrictReader::StrictReader(const nlohmann::json& j, std::string origin, std::string path, Status st)
    : j_(j), origin_(std::move(origin)), path_(std::move(path)), st_(std::move(st)) {}

const nlohmann::json* StrictReader::Get(const std::string& key, nlohmann::json::value_t want, const char* what) {
  if (!st_.ok()) return nullptr;
  const auto it = j_.is_object() ? j_.find(key) : j_.end();
  if (it == j_.end()) {
    Error(key, "missing");
    return nullptr;
  }
  const nlohmann::json& v = *it;
  const bool match = v.type() == want || (want == nlohmann::json::value_t::number_integer && v.is_number_integer());
  if (!match) {
    Error(key, fmt::format("expected {}, got {}", what, Got(v)));
    return nullptr;
  }
  return &v;
}

int64_t StrictReader::Int(const std::string& key) {
  const nlohmann::json* v = Get(key, nlohmann::json::value_t::number_integer, "an integer");
  if (v && v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    Error(key, fmt::format("{} does not fit a signed 64-bit integer", v->get<uint64_t>()));
    return 0;
  }
  return v ? v->get<int64_t>() : 0;
}

int64_t StrictReader::IntIn(const std::string& key, int64_t lo, int64_t hi) {
  const int64_t v = Int(key);
  if (ok() && (v < lo || v > hi)) Error(key, fmt::format("{} is out of range: expected an integer in [{}, {}]", v, lo, hi));
  return v;
}

std::string StrictReader::Str(const std::string& key) {
  const nlohmann::json* v = Get(key, nlohmann::json::value_t::string, "a string");
  return v ? v->get<std::string>() : std::string();
}

StrictReader StrictReader::Sub(const std::string& key, nlohmann::json::value_t want, const char* what) {
  static const nlohmann::json kNothing = nlohmann::json::array();  // an empty array: size() 0, no fields
  const nlohmann::json* v = Get(key, want, what);
  return StrictReader(v ? *v : kNothing, origin_, path_ + key + ".", st_);
}

StrictReader StrictReader::At(size_t i) const {
  static const nlohmann::json kNothing = nlohmann::json::array();
  const std::string parent = path_.empty() ? "" : path_.substr(0, path_.size() - 1);
  const bool there = j_.is_array() && i < j_.size();
  return StrictReader(there ? j_[i] : kNothing, origin_, fmt::format("{}[{}].", parent, i), st_);
}

void StrictReader::Error(const std::string& key, const std::string& detail) {
  if (!st_.ok()) return;
  std::string path = path_ + key;
  if (key.empty() && !path.empty()) path.pop_back();  // an error of the object itself
  st_ = Status::Corruption(fmt::format("{}: field '{}': {}", origin_, path, detail));
}

// ---- Lenient readers ----------------------------------------------------------------------

double LenientNumber(const nlohmann::json& j, const char* key, double def) {
  if (!j.is_object()) return def;
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : def;
}

int64_t LenientInteger(const nlohmann::json& j, const char* key, int64_t def) {
  if (!j.is_object()) return def;
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return def;
  if (it->is_number_unsigned())
    return it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX) ? def : static_cast<int64_t>(it->get<uint64_t>());
  if (it->is_number_integer()) return it->get<int64_t>();
  const double d = it->get<double>();  // a float: only a value int64 can hold converts
  return d >= -9.2e18 && d <= 9.2e18 ? static_cast<int64_t>(d) : def;
}

std::string LenientString(const nlohmann::json& j, const char* key, const std::string& def) {
  if (!j.is_object()) return def;
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : def;
}

}  // namespace elastrain
