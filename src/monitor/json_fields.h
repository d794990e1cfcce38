// Reading fields of events.jsonl and metrics.jsonl records: a missing field, or one of
// another type (an older or damaged line), gives the default instead of throwing as
// nlohmann::json::value does.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace elastrain {

inline double JsonNumber(const nlohmann::json& j, const char* key, double def = 0) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : def;
}
inline int64_t JsonInteger(const nlohmann::json& j, const char* key, int64_t def = -1) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<int64_t>() : def;
}
inline std::string JsonString(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace elastrain
