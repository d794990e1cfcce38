// nlohmann::json conversions of the enums of wire/worker_vocab.h and wire/job_state.h, for
// the (de)serialisers in wire/ (protocol.cpp, worker_messages.cpp): an enum travels by the
// word of its Choice table (common/choice.h); an unknown word throws, and Load turns that
// into a Corruption naming the record. (Not NLOHMANN_JSON_SERIALIZE_ENUM, which would be
// a second table and maps an unknown word silently to the first value.)
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "wire/job_state.h"
#include "wire/rendezvous.h"
#include "wire/worker_vocab.h"

namespace elastrain {

template <typename E>
void EnumFromJson(const nlohmann::json& j, E& v) {
  auto parsed = Parse<E>(j.get<std::string>());
  if (!parsed.ok()) throw std::invalid_argument(parsed.status().message());
  v = parsed.value();
}

inline void to_json(nlohmann::json& j, WorkerPhase v) { j = Name(v); }
inline void to_json(nlohmann::json& j, TrainPhase v) { j = Name(v); }
inline void to_json(nlohmann::json& j, GenerationOutcome v) { j = Name(v); }
inline void to_json(nlohmann::json& j, ExitKind v) { j = Name(v); }
inline void to_json(nlohmann::json& j, RestoreKind v) { j = Name(v); }
inline void to_json(nlohmann::json& j, CommandAction v) { j = Name(v); }
inline void from_json(const nlohmann::json& j, WorkerPhase& v) { EnumFromJson(j, v); }
inline void from_json(const nlohmann::json& j, TrainPhase& v) { EnumFromJson(j, v); }
inline void from_json(const nlohmann::json& j, GenerationOutcome& v) { EnumFromJson(j, v); }
inline void from_json(const nlohmann::json& j, ExitKind& v) { EnumFromJson(j, v); }
inline void from_json(const nlohmann::json& j, RestoreKind& v) { EnumFromJson(j, v); }
inline void from_json(const nlohmann::json& j, CommandAction& v) { EnumFromJson(j, v); }

// The job state and the rendezvous address likewise, by their names.
inline void to_json(nlohmann::json& j, JobState s) { j = JobStateName(s); }
inline void from_json(const nlohmann::json& j, JobState& s) {
  auto parsed = ParseJobState(j.get<std::string>());
  if (!parsed.ok()) throw std::invalid_argument(parsed.status().message());
  s = parsed.value();
}
inline void to_json(nlohmann::json& j, const RendezvousAddress& a) { j = a.ToString(); }
inline void from_json(const nlohmann::json& j, RendezvousAddress& a) {
  auto parsed = RendezvousAddress::Parse(j.get<std::string>());
  if (!parsed.ok()) throw std::invalid_argument(parsed.status().message());
  a = parsed.value();
}

}  // namespace elastrain
