// The JSON form of the structs of wire/ (protocol.h records, worker_messages.h messages):
// ELASTRAIN_JSON_RECORD(Type, field...) defines to_json and from_json with one key per
// field, like nlohmann's NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT, but reads each
// value checked: a missing key keeps the field's default (records of older or newer
// versions still load), and an integer field takes only a JSON integer within the
// field's range. nlohmann's own get<int>() static_casts a float such as 4.2e14 to int,
// which is undefined behaviour (fuzz/fuzz_worker_messages.cpp found it). Errors throw,
// as nlohmann's do; the loaders (Load in protocol.cpp and worker_messages.cpp) turn them
// into a Corruption naming the record. A std::optional field is left out when empty, and
// reads as empty when absent or null; a floating-point field reads null as NaN (nlohmann
// writes NaN and the infinities as null).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

namespace elastrain {

// `key`'s value as an integer of type T: a JSON integer within T's range, else throws.
template <typename T>
T JsonInteger(const nlohmann::json& v, const char* key) {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  if (!v.is_number_integer())
    throw std::invalid_argument(std::string("field '") + key + "': expected an integer, got " + v.dump());
  bool in_range;
  if (v.is_number_unsigned()) {
    in_range = v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  } else {
    const int64_t s = v.get<int64_t>();
    in_range = std::is_signed_v<T> ? s >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                                         s <= static_cast<int64_t>(std::numeric_limits<T>::max())
                                   : s >= 0 && static_cast<uint64_t>(s) <= std::numeric_limits<T>::max();
  }
  if (!in_range)
    throw std::invalid_argument(std::string("field '") + key + "': " + v.dump() + " is out of range");
  return v.is_number_unsigned() ? static_cast<T>(v.get<uint64_t>()) : static_cast<T>(v.get<int64_t>());
}

template <typename T>
struct IsStdOptional : std::false_type {};
template <typename T>
struct IsStdOptional<std::optional<T>> : std::true_type {};

// `out` from the value `v` of `key`: integers checked, optionals and NaN as above.
template <typename T>
void ReadJsonValue(const nlohmann::json& v, const char* key, T& out) {
  if constexpr (IsStdOptional<T>::value) {
    if (v.is_null()) {
      out.reset();
      return;
    }
    typename T::value_type x{};
    ReadJsonValue(v, key, x);
    out = std::move(x);
  } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    out = JsonInteger<T>(v, key);
  } else if constexpr (std::is_floating_point_v<T>) {
    out = v.is_null() ? std::numeric_limits<T>::quiet_NaN() : v.get<T>();
  } else {
    v.get_to(out);
  }
}

// Sets `out` from j[key] when the key is there (otherwise `out` keeps its value).
template <typename T>
void ReadJsonField(const nlohmann::json& j, const char* key, T& out) {
  const auto it = j.find(key);
  if (it == j.end()) return;
  ReadJsonValue(*it, key, out);
}

// Sets j[key] to `v`; an empty optional sets nothing.
template <typename T>
void WriteJsonField(nlohmann::json& j, const char* key, const T& v) {
  if constexpr (IsStdOptional<T>::value) {
    if (v) j[key] = *v;
  } else {
    j[key] = v;
  }
}

}  // namespace elastrain

#define ELASTRAIN_JSON_READ_FIELD(v1) ::elastrain::ReadJsonField(nlohmann_json_j, #v1, nlohmann_json_t.v1);
#define ELASTRAIN_JSON_WRITE_FIELD(v1) ::elastrain::WriteJsonField(nlohmann_json_j, #v1, nlohmann_json_t.v1);
#define ELASTRAIN_JSON_RECORD(Type, ...)                                                         \
  inline void to_json(nlohmann::json& nlohmann_json_j, const Type& nlohmann_json_t) {            \
    NLOHMANN_JSON_EXPAND(NLOHMANN_JSON_PASTE(ELASTRAIN_JSON_WRITE_FIELD, __VA_ARGS__))           \
  }                                                                                              \
  inline void from_json(const nlohmann::json& nlohmann_json_j, Type& nlohmann_json_t) {          \
    NLOHMANN_JSON_EXPAND(NLOHMANN_JSON_PASTE(ELASTRAIN_JSON_READ_FIELD, __VA_ARGS__))            \
  }
