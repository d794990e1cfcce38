#include "wire/worker_messages.h"

#include <stdexcept>
#include <type_traits>
#include <utility>

#include "common/json.h"
#include "wire/shared_records.h"
#include "wire/vocab_json.h"

namespace elastrain {

// Missing fields keep their defaults, as the agent and the worker always read them.
ELASTRAIN_JSON_RECORD(JobMessage, config_yaml, worker_id, host, threads, peak_flops, head_public_key, confined,
                      allowed_programs, allowed_paths, agent)
ELASTRAIN_JSON_RECORD(AssignPeer, rank, host, pid)
ELASTRAIN_JSON_RECORD(AssignMessage, generation, rank, world, data, fsdp, tensor, restore,
                                                rendezvous, inject_failure, failures, job_started_at, address, members,
                                                covered_failures)
ELASTRAIN_JSON_RECORD(AbortMessage, generation)
ELASTRAIN_JSON_RECORD(ReadyMessage, pid, state_step, peak_flops)
ELASTRAIN_JSON_RECORD(StartedMessage, generation, rank, world)
ELASTRAIN_JSON_RECORD(StepMessage, generation, step, start_step, loss, step_seconds, time, compute_seconds,
                      wait_seconds)
ELASTRAIN_JSON_RECORD(CheckpointMessage, step, time)
ELASTRAIN_JSON_RECORD(ProgressMessage, generation, step, phase, time, collective_seq, collective_kind,
                      in_collective)
ELASTRAIN_JSON_RECORD(EndedMessage, generation, outcome, stop_reasons, start_step, step,
                                                state_step, copies_generation, copies, leaving, error, timed_out)
ELASTRAIN_JSON_RECORD(FatalMessage, error)

// stop's reason travels as "user" or "resize".
namespace {
constexpr std::pair<StopReason, const char*> kStopNames[] = {{kStopUser, "user"}, {kStopResize, "resize"}};
}  // namespace
void to_json(nlohmann::json& j, const StopMessage& m) {
  const char* reason = kStopNames[1].second;
  for (const auto& [bit, name] : kStopNames)
    if (bit == m.reason) reason = name;
  j = {{"generation", m.generation}, {"reason", reason}};
}
void from_json(const nlohmann::json& j, StopMessage& m) {
  ReadJsonField(j, "generation", m.generation);
  const std::string reason = j.value("reason", std::string(kStopNames[1].second));
  for (const auto& [bit, name] : kStopNames)
    if (reason == name) {
      m.reason = bit;
      return;
    }
  throw std::invalid_argument("reason '" + reason + "': expected user or resize");
}
void to_json(nlohmann::json& j, const ExitMessage&) { j = nlohmann::json::object(); }
void from_json(const nlohmann::json&, ExitMessage&) {}

namespace {

// The "type" of each message.
template <typename T> struct TypeName;
template <> struct TypeName<JobMessage> { static constexpr const char* value = "job"; };
template <> struct TypeName<AssignMessage> { static constexpr const char* value = "assign"; };
template <> struct TypeName<StopMessage> { static constexpr const char* value = "stop"; };
template <> struct TypeName<AbortMessage> { static constexpr const char* value = "abort"; };
template <> struct TypeName<ExitMessage> { static constexpr const char* value = "exit"; };
template <> struct TypeName<ReadyMessage> { static constexpr const char* value = "ready"; };
template <> struct TypeName<StartedMessage> { static constexpr const char* value = "started"; };
template <> struct TypeName<StepMessage> { static constexpr const char* value = "step"; };
template <> struct TypeName<CheckpointMessage> { static constexpr const char* value = "checkpoint"; };
template <> struct TypeName<ProgressMessage> { static constexpr const char* value = "progress"; };
template <> struct TypeName<EndedMessage> { static constexpr const char* value = "ended"; };
template <> struct TypeName<FatalMessage> { static constexpr const char* value = "fatal"; };

template <typename Variant>
nlohmann::json Dump(const Variant& m) {
  return std::visit(
      [](const auto& v) {
        nlohmann::json j = v;
        j["type"] = TypeName<std::decay_t<decltype(v)>>::value;
        return j;
      },
      m);
}

// Sets *out to the alternative whose type is `type`; false when none is.
template <typename Variant, size_t... I>
bool LoadAlternative(const std::string& type, const nlohmann::json& j, Variant* out, std::index_sequence<I...>) {
  auto try_one = [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (type != TypeName<T>::value) return false;
    *out = j.get<T>();
    return true;
  };
  return (try_one(std::type_identity<std::variant_alternative_t<I, Variant>>{}) || ...);
}

template <typename Variant>
Status Load(const nlohmann::json& j, const char* what, Variant* out) {
  if (!j.is_object()) return Status::Corruption(std::string(what) + ": expected a JSON object, got " + j.dump());
  // value() throws when "type" is there but not a string: the peer's bytes must not
  // end this process (an uncaught exception), only this message.
  const auto type_field = j.find("type");
  if (type_field != j.end() && !type_field->is_string())
    return Status::Corruption(std::string(what) + ": \"type\" must be a string, got " + type_field->dump());
  const std::string type = j.value("type", std::string());
  try {
    if (LoadAlternative(type, j, out, std::make_index_sequence<std::variant_size_v<Variant>>{})) return Status::OK();
  } catch (const std::exception& e) {
    return Status::Corruption(std::string(what) + " '" + type + "': " + e.what());
  }
  return Status::Corruption(std::string(what) + ": unknown type '" + type + "'");
}

}  // namespace

nlohmann::json ToJson(const AgentMessage& m) { return Dump(m); }
nlohmann::json ToJson(const WorkerMessage& m) { return Dump(m); }
Status FromJson(const nlohmann::json& j, AgentMessage* m) { return Load(j, "message to a worker", m); }
Status FromJson(const nlohmann::json& j, WorkerMessage* m) { return Load(j, "message from a worker", m); }

}  // namespace elastrain
