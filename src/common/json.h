// The one way elastrain reads JSON. Three readers, by what a bad value may cost:
//
// 1. Records, strict: ELASTRAIN_JSON_RECORD(Type, field...) defines to_json and from_json
//    with one key per field (like nlohmann's NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT)
//    and reads every value checked: a missing key keeps the field's default (records of
//    older or newer versions still load), a std::optional field is left out when empty
//    and reads as empty when absent or null, a floating field reads null as NaN (nlohmann
//    writes NaN and the infinities as null), a value of the wrong JSON type, or an integer
//    out of the field's range, throws JsonFieldError naming the field's path
//    ("members[2].rank"). nlohmann's own get<int>() static_casts a float such as 4.2e14
//    to int, undefined behaviour (fuzz/fuzz_worker_messages.cpp found it); a record
//    takes only a JSON integer in range. ParseRecord<T> is the Status form: any
//    exception becomes a Corruption naming what was read and the field, and RecordRules
//    may require keys or refuse unknown ones (request bodies, answers of the API).
//    For the store's records, messages between processes, request bodies, API answers.
// 2. StrictReader: every field required, read one at a time with its path and a range;
//    the first error sticks. For files whose every field matters (ckpt's manifest.json).
// 3. Lenient readers, LenientNumber / LenientInteger / LenientString: a missing or
//    wrong-typed field gives the default, never throws. Only for views of logs written
//    by many versions (events.jsonl, metrics.jsonl), where a damaged line must not stop
//    the dashboard, and never for data that decides anything.
// ParseJson turns a whole text into JSON or a Corruption; it never throws, and refuses
// nesting deeper than a limit before nlohmann's recursive parser sees it.
//
// Error messages have one form: "<what>: field '<path>': expected <X>, got <Y> (<value>)",
// "<what>: field '<path>': <value> is out of range: expected an integer in [lo, hi]",
// "<what>: field '<path>': missing".
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace elastrain {

// The default nesting limit of ParseJson: far above any document elastrain writes
// (a manifest nests 6 levels), far below what overflows nlohmann's recursive parser.
inline constexpr int kMaxJsonDepth = 64;

// A field that does not read: `path` ("restore.kind", "members[2].rank"; "" for the value
// itself) and `detail` ("expected an integer, got a string (\"x\")"). what() is the
// message "field '<path>': <detail>".
class JsonFieldError : public std::invalid_argument {
 public:
  JsonFieldError(std::string path, std::string detail);
  const std::string& path() const { return path_; }
  const std::string& detail() const { return detail_; }
  // The same error one level up: under the key `key` ("x" or "[3]").
  JsonFieldError Under(std::string_view key) const;

 private:
  std::string path_, detail_;
};

// "an integer", "a string", "null", ...: the JSON type of `v` as an error names it.
const char* JsonTypeName(const nlohmann::json& v);
// `v` as an error message quotes it: compact, at most `max_chars` characters.
std::string JsonShown(const nlohmann::json& v, size_t max_chars = 40);

// The whole `text` as JSON; Corruption "<what>: ..." when it is empty, not JSON, or nested
// deeper than `max_depth`. Never throws.
Result<nlohmann::json> ParseJson(std::string_view text, std::string_view what, int max_depth = kMaxJsonDepth);

// ---- 1. Records -----------------------------------------------------------------------

namespace json_detail {
[[noreturn]] void ThrowWrongType(const nlohmann::json& v, const char* expected);
// "<value> is out of range: expected <expected>".
[[noreturn]] void ThrowOutOfRange(const nlohmann::json& v, const std::string& expected);
[[noreturn]] void ThrowWrapped(const std::exception& e);
template <typename T> struct IsOptional : std::false_type {};
template <typename T> struct IsOptional<std::optional<T>> : std::true_type {};
template <typename T> struct IsVector : std::false_type {};
template <typename E, typename A> struct IsVector<std::vector<E, A>> : std::true_type {};
template <typename T> struct IsStringMap : std::false_type {};
template <typename V, typename C, typename A> struct IsStringMap<std::map<std::string, V, C, A>> : std::true_type {};
}  // namespace json_detail

// `v` as an integer of type T: a JSON integer within T's range, else JsonFieldError.
template <typename T>
T StrictInteger(const nlohmann::json& v) {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  using L = std::numeric_limits<T>;
  if (!v.is_number_integer()) json_detail::ThrowWrongType(v, "an integer");
  bool in_range;
  if (v.is_number_unsigned()) {
    in_range = v.get<uint64_t>() <= static_cast<uint64_t>(L::max());
  } else {
    const int64_t s = v.get<int64_t>();
    in_range = std::is_signed_v<T> ? s >= static_cast<int64_t>(L::min()) && s <= static_cast<int64_t>(L::max())
                                   : s >= 0 && static_cast<uint64_t>(s) <= L::max();
  }
  if (!in_range)
    json_detail::ThrowOutOfRange(
        v, "an integer in [" + std::to_string(L::min() + 0) + ", " + std::to_string(L::max() + 0) + "]");
  return v.is_number_unsigned() ? static_cast<T>(v.get<uint64_t>()) : static_cast<T>(v.get<int64_t>());
}

// Sets `out` from `v`, checked: scalars by their JSON type (an integer field takes an
// integer in range; a floating field any number; a string a string; a bool a boolean),
// vectors and string-keyed maps element by element, anything else (records, enums by
// name) through its from_json. Throws JsonFieldError with the path below `v`.
template <typename T>
void ReadJsonValue(const nlohmann::json& v, T& out) {
  if constexpr (json_detail::IsOptional<T>::value) {  // null or absent: empty
    if (v.is_null()) {
      out.reset();
      return;
    }
    typename T::value_type x{};
    ReadJsonValue(v, x);
    out = std::move(x);
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) json_detail::ThrowWrongType(v, "true or false");
    out = v.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    out = StrictInteger<T>(v);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (v.is_null()) {  // nlohmann writes NaN and the infinities as null
      out = std::numeric_limits<T>::quiet_NaN();
      return;
    }
    if (!v.is_number()) json_detail::ThrowWrongType(v, "a number");
    const double d = v.get<double>();
    if constexpr (sizeof(T) < sizeof(double)) {  // a double beyond float's range does not convert
      if (d > std::numeric_limits<T>::max() || d < std::numeric_limits<T>::lowest())
        json_detail::ThrowOutOfRange(v, "a number within a float's range");
    }
    out = static_cast<T>(d);
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) json_detail::ThrowWrongType(v, "a string");
    out = v.get_ref<const std::string&>();
  } else if constexpr (json_detail::IsVector<T>::value) {
    if (!v.is_array()) json_detail::ThrowWrongType(v, "an array");
    T items;
    items.reserve(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      typename T::value_type item{};
      try {
        ReadJsonValue(v[i], item);
      } catch (const JsonFieldError& e) {
        throw e.Under("[" + std::to_string(i) + "]");
      }
      items.push_back(std::move(item));
    }
    out = std::move(items);
  } else if constexpr (json_detail::IsStringMap<T>::value) {
    if (!v.is_object()) json_detail::ThrowWrongType(v, "an object");
    T items;
    for (const auto& [key, item_json] : v.items()) {
      typename T::mapped_type item{};
      try {
        ReadJsonValue(item_json, item);
      } catch (const JsonFieldError& e) {
        throw e.Under(key);
      }
      items.emplace(key, std::move(item));
    }
    out = std::move(items);
  } else {
    try {
      v.get_to(out);
    } catch (const JsonFieldError&) {
      throw;
    } catch (const std::exception& e) {
      json_detail::ThrowWrapped(e);
    }
  }
}

// Sets `out` from j[key] when the key is there (otherwise `out` keeps its value).
template <typename T>
void ReadJsonField(const nlohmann::json& j, const char* key, T& out) {
  const auto it = j.find(key);
  if (it == j.end()) return;
  try {
    ReadJsonValue(*it, out);
  } catch (const JsonFieldError& e) {
    throw e.Under(key);
  }
}

// Sets j[key] to `v`; an empty optional sets nothing (the key is left out).
template <typename T>
void WriteJsonField(nlohmann::json& j, const char* key, const T& v) {
  if constexpr (json_detail::IsOptional<T>::value) {
    if (v) j[key] = *v;
  } else {
    j[key] = v;
  }
}

// A record's from_json starts here: anything but an object is refused (a record of all
// defaults read from a number would hide the damage).
void RequireJsonObject(const nlohmann::json& j);

// What ParseRecord checks besides the fields' values.
struct RecordRules {
  std::vector<std::string_view> required = {};  // keys that must be present
  bool reject_unknown = false;             // a key that is no field of the record fails
};

namespace json_detail {
Status RecordError(std::string_view what, const std::exception& e);
Status CheckRecordKeys(const nlohmann::json& j, std::string_view what, const RecordRules& rules,
                       const std::vector<std::string_view>* known);
}  // namespace json_detail

// `j` as a T (a type with ELASTRAIN_JSON_RECORD, or any from_json that throws on bad
// input): Corruption "<what>: field '<path>': ..." on any error; never throws.
template <typename T>
Result<T> ParseRecord(const nlohmann::json& j, std::string_view what, const RecordRules& rules = {}) {
  const std::vector<std::string_view>* known = nullptr;
  if constexpr (requires { JsonRecordKeys(static_cast<const T*>(nullptr)); })
    known = &JsonRecordKeys(static_cast<const T*>(nullptr));
  if (Status st = json_detail::CheckRecordKeys(j, what, rules, known); !st.ok()) return st;
  try {
    T v{};
    ReadJsonValue(j, v);
    return v;
  } catch (const std::exception& e) {
    return json_detail::RecordError(what, e);
  }
}
template <typename T>
Result<T> ParseRecord(std::string_view text, std::string_view what, const RecordRules& rules = {}) {
  ELASTRAIN_ASSIGN_OR_RETURN(nlohmann::json j, ParseJson(text, what));
  return ParseRecord<T>(j, what, rules);
}
// Disambiguates a string literal or std::string (text, not a JSON string value).
template <typename T>
Result<T> ParseRecord(const char* text, std::string_view what, const RecordRules& rules = {}) {
  return ParseRecord<T>(std::string_view(text), what, rules);
}
template <typename T>
Result<T> ParseRecord(const std::string& text, std::string_view what, const RecordRules& rules = {}) {
  return ParseRecord<T>(std::string_view(text), what, rules);
}

// ---- 2. StrictReader --------------------------------------------------------------------

// Typed access to a JSON object whose every field is required: each read names the
// field's path in its error, the first error sticks (later reads return 0 or ""), and
// status() is Corruption "<origin>: field '<path>': <detail>". Holds a reference to the
// JSON: it must outlive the reader.
class StrictReader {
 public:
  StrictReader(const nlohmann::json& j, std::string origin);
  Status status() const { return st_; }
  bool ok() const { return st_.ok(); }
  // The value at `key` if it is there and of type `want` (an integer also of
  // number_unsigned), else nullptr after the error "missing" or "expected <what>".
  const nlohmann::json* Get(const std::string& key, nlohmann::json::value_t want, const char* what);
  int64_t Int(const std::string& key);
  // An integer in [lo, hi]; the error names the value and the range.
  int64_t IntIn(const std::string& key, int64_t lo, int64_t hi);
  std::string Str(const std::string& key);
  // The object or array at `key` (of type `want`), read with the path "<path>.<key>".
  StrictReader Sub(const std::string& key, nlohmann::json::value_t want, const char* what);
  // Element i of this array, with the path "<path>[i]".
  StrictReader At(size_t i) const;
  size_t size() const { return j_.is_array() ? j_.size() : 0; }
  const nlohmann::json& raw() const { return j_; }
  // Records the error "field '<path><key>': <detail>" unless one is already recorded.
  void Error(const std::string& key, const std::string& detail);

 private:
  StrictReader(const nlohmann::json& j, std::string origin, std::string path, Status st);
  const nlohmann::json& j_;
  std::string origin_, path_;  // path_ is "" or ends with '.'
  Status st_;
};

// ---- 3. Lenient readers -----------------------------------------------------------------

// j[key] as a number; `def` when j is not an object, the key is missing or not a number.
double LenientNumber(const nlohmann::json& j, const char* key, double def = 0);
// j[key] as an integer; `def` when missing, not a number, or beyond int64. A float in
// range is truncated (2.9 -> 2).
int64_t LenientInteger(const nlohmann::json& j, const char* key, int64_t def);
// j[key] as a string; `def` when missing or not a string.
std::string LenientString(const nlohmann::json& j, const char* key, const std::string& def = "");

}  // namespace elastrain

#define ELASTRAIN_JSON_READ_FIELD(v1) ::elastrain::ReadJsonField(nlohmann_json_j, #v1, nlohmann_json_t.v1);
#define ELASTRAIN_JSON_WRITE_FIELD(v1) ::elastrain::WriteJsonField(nlohmann_json_j, #v1, nlohmann_json_t.v1);
#define ELASTRAIN_JSON_KEY_NAME(v1) #v1,
#define ELASTRAIN_JSON_RECORD(Type, ...)                                                           \
  inline void to_json(nlohmann::json& nlohmann_json_j, const Type& nlohmann_json_t) {              \
    NLOHMANN_JSON_EXPAND(NLOHMANN_JSON_PASTE(ELASTRAIN_JSON_WRITE_FIELD, __VA_ARGS__))             \
  }                                                                                                \
  inline void from_json(const nlohmann::json& nlohmann_json_j, Type& nlohmann_json_t) {            \
    ::elastrain::RequireJsonObject(nlohmann_json_j);                                               \
    NLOHMANN_JSON_EXPAND(NLOHMANN_JSON_PASTE(ELASTRAIN_JSON_READ_FIELD, __VA_ARGS__))              \
  }                                                                                                \
  [[maybe_unused]] inline const std::vector<std::string_view>& JsonRecordKeys(const Type*) {       \
    static const std::vector<std::string_view> keys = {                                            \
        NLOHMANN_JSON_EXPAND(NLOHMANN_JSON_PASTE(ELASTRAIN_JSON_KEY_NAME, __VA_ARGS__))};          \
    return keys;                                                                                   \
  }
