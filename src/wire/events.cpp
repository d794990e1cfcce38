#include "wire/events.h"

#include <array>
#include <exception>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "common/events.h"

namespace elastrain {

namespace {

// Field names of earlier versions, read when the current one is absent.
template <typename T>
void ReadOldNames(const nlohmann::json&, T&) {}
void ReadOldNames(const nlohmann::json& j, GenerationFirstStepEvent& e) {
  if (!j.contains("first_step_time")) ReadJsonField(j, "step_time", e.first_step_time);
}

template <typename T>
AnyEvent Decode(const nlohmann::json& j) {
  // A record field must be an object and a list an array (a record's from_json alone
  // would take `"restore": 5` as a record of defaults).
  static const nlohmann::json kDefaults = T{};
  for (const auto& [key, def] : kDefaults.items()) {
    const auto it = j.find(key);
    if (it == j.end()) continue;
    if ((def.is_object() && !it->is_object()) || (def.is_array() && !it->is_array()))
      throw std::invalid_argument(fmt::format("field '{}': expected {}, got {}", key, def.type_name(),
                                              it->dump().substr(0, 40)));
  }
  T e;
  from_json(j, e);
  ReadOldNames(j, e);
  return e;
}

using Decoder = AnyEvent (*)(const nlohmann::json&);
struct NamedDecoder {
  std::string_view name;
  Decoder decode;
};

template <size_t... I>
constexpr std::array<NamedDecoder, sizeof...(I)> MakeDecoders(std::index_sequence<I...>) {
  return {NamedDecoder{std::variant_alternative_t<I, AnyEvent>::kName, &Decode<std::variant_alternative_t<I, AnyEvent>>}...};
}
constexpr auto kDecoders = MakeDecoders(std::make_index_sequence<std::variant_size_v<AnyEvent>>());

}  // namespace

std::string_view EventName(const AnyEvent& e) {
  return std::visit([](const auto& x) { return std::decay_t<decltype(x)>::kName; }, e);
}

AnyEvent WorkerExitEvent(ExitKind kind, WorkerEndFields f) {
  switch (kind) {
    case ExitKind::kPreempted: return WorkerPreemptedEvent{std::move(f)};
    case ExitKind::kHung: return WorkerHungEvent{std::move(f)};
    case ExitKind::kEnded: return WorkerTerminatedEvent{std::move(f)};
    default: return WorkerFailedEvent{std::move(f)};
  }
}

std::vector<std::string_view> AllEventNames() {
  std::vector<std::string_view> out;
  for (const NamedDecoder& d : kDecoders) out.push_back(d.name);
  return out;
}

nlohmann::json EncodeEvent(const AnyEvent& e, double time) {
  return std::visit([&](const auto& x) { return EventLine(std::decay_t<decltype(x)>::kName, nlohmann::json(x), time); },
                    e);
}

Result<EventRecord> DecodeEvent(const nlohmann::json& line) {
  if (!line.is_object()) return Status::Corruption(fmt::format("event line: not a JSON object ({})", line.type_name()));
  const auto name = line.find("event");
  if (name == line.end() || !name->is_string())
    return Status::Corruption("event line: no `event` name (a string), in " + line.dump().substr(0, 80));
  const std::string& n = name->get_ref<const std::string&>();
  for (const NamedDecoder& d : kDecoders) {
    if (d.name != n) continue;
    try {
      double time = 0;
      ReadJsonField(line, "time", time);
      return EventRecord{time, d.decode(line)};
    } catch (const std::exception& ex) {
      return Status::Corruption(fmt::format("event '{}': {}", n, ex.what()));
    }
  }
  return Status::NotFound(fmt::format("event '{}': not an event this version knows", n.substr(0, 80)));
}

Result<EventRecord> DecodeEventLine(std::string_view text) {
  const nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Corruption("event line: not valid JSON: " + std::string(text.substr(0, 80)));
  return DecodeEvent(j);
}

}  // namespace elastrain
