// Reading fields of events.jsonl and metrics.jsonl records: a missing field, or one of
// another type (an older or damaged line), gives the default instead of throwing as
// nlohmann::json::value does.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace elastrain {

inline double JsonNumber(const nlohmann::json& j, const char* key, double def = 0) {
  if (!j.is_object()) return def;
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : def;
}
inline int64_t JsonInteger(const nlohmann::json& j, const char* key, int64_t def = -1) {
  if (!j.is_object()) return def;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return def;
  if (it->is_number_unsigned()) return it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX) ? def : it->get<int64_t>();
  if (it->is_number_integer()) return it->get<int64_t>();
  const double d = it->get<double>();  // a float: only a value int64 can hold converts
  return d >= -9.2e18 && d <= 9.2e18 ? static_cast<int64_t>(d) : def;
}
inline std::string JsonString(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace elastrain
