#include "wire/program_messages.h"

#include <cmath>

#include <fmt/format.h>

#include "common/collective_kind.h"

namespace elastrain {

namespace {

constexpr int64_t kMaxStep = int64_t{1} << 50;
constexpr size_t kMaxMetrics = 32, kMaxMetricName = 64;
// How far compute_seconds may exceed step_seconds: rounding of the program's clock
// arithmetic (a fraction of it, plus a nanosecond), not a measurement.
constexpr double kComputeRounding = 1e-6;

Status Bad(const std::string& type, const std::string& field, const std::string& expected) {
  return Status::InvalidArgument(fmt::format("program message '{}': field '{}': expected {}", type, field, expected));
}

// An optional integer field in [lo, hi]; `*out` keeps its value when the field is absent.
Status Int(const nlohmann::json& j, const std::string& type, const char* field, int64_t lo, int64_t hi, int64_t* out,
           bool required = false) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return required ? Bad(type, field, "an integer (required)") : Status::OK();
  if (!it->is_number_integer()) return Bad(type, field, fmt::format("an integer in [{}, {}]", lo, hi));
  const int64_t v = it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                        ? INT64_MAX
                        : it->get<int64_t>();
  if (v < lo || v > hi) return Bad(type, field, fmt::format("an integer in [{}, {}]", lo, hi));
  *out = v;
  return Status::OK();
}

Status Num(const nlohmann::json& j, const std::string& type, const char* field, double lo, double* out) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return Status::OK();
  if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < lo)
    return Bad(type, field, fmt::format("a finite number >= {}", lo));
  *out = it->get<double>();
  return Status::OK();
}

bool MetricName(const std::string& s) {
  if (s.empty() || s.size() > kMaxMetricName) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  return true;
}

}  // namespace

Status ParseProgramMessage(const nlohmann::json& j, ProgramMessage* out) {
  if (!j.is_object()) return Status::InvalidArgument("program message: expected a JSON object");
  auto t = j.find("type");
  if (t == j.end() || !t->is_string()) return Status::InvalidArgument("program message: expected a string 'type'");
  const std::string type = t->get<std::string>();
  if (type == "hello") {
    ProgramHello h;
    int64_t pid = 0;
    ELASTRAIN_RETURN_IF_ERROR(Int(j, type, "pid", 0, INT32_MAX, &pid));
    h.pid = static_cast<int>(pid);
    auto w = j.find("warm");
    if (w != j.end() && !w->is_boolean()) return Bad(type, "warm", "true or false");
    h.warm = w != j.end() && w->get<bool>();
    *out = h;
  } else if (type == "waiting") {
    *out = ProgramWaiting{};
  } else if (type == "heartbeat") {
    *out = ProgramHeartbeat{};
  } else if (type == "step") {
    ProgramStep s;
    s.loss = std::nan("");
    ELASTRAIN_RETURN_IF_ERROR(Int(j, type, "step", 0, kMaxStep, &s.step, /*required=*/true));
    auto l = j.find("loss");
    if (l != j.end() && !l->is_null()) {
      if (!l->is_number() || !std::isfinite(l->get<double>())) return Bad(type, "loss", "a finite number");
      s.loss = l->get<double>();
    }
    ELASTRAIN_RETURN_IF_ERROR(Int(j, type, "tokens", 0, kMaxStep, &s.tokens));
    ELASTRAIN_RETURN_IF_ERROR(Num(j, type, "step_seconds", 0, &s.step_seconds));
    if (auto c = j.find("compute_seconds"); c != j.end() && !c->is_null()) {
      double compute = 0;
      ELASTRAIN_RETURN_IF_ERROR(Num(j, type, "compute_seconds", 0, &compute));
      if (s.step_seconds > 0 && compute > s.step_seconds * (1 + kComputeRounding) + 1e-9)
        return Bad(type, "compute_seconds",
                   fmt::format("at most step_seconds ({}), got {}", s.step_seconds, compute));
      s.compute_seconds = compute;
    }
    auto m = j.find("metrics");
    if (m != j.end() && !m->is_null()) {
      if (!m->is_object() || m->size() > kMaxMetrics)
        return Bad(type, "metrics", "an object of at most 32 numbers");
      for (auto it = m->begin(); it != m->end(); ++it) {
        if (!MetricName(it.key())) return Bad(type, "metrics", "names of 1 to 64 of A-Z a-z 0-9 _ .");
        if (!it->is_number() || !std::isfinite(it->get<double>()))
          return Bad(type, "metrics." + it.key(), "a finite number");
        s.metrics[it.key()] = it->get<double>();
      }
    }
    *out = std::move(s);
  } else if (type == "checkpoint") {
    ProgramCheckpoint c;
    ELASTRAIN_RETURN_IF_ERROR(Int(j, type, "step", 0, kMaxStep, &c.step, /*required=*/true));
    ELASTRAIN_RETURN_IF_ERROR(Num(j, type, "seconds", 0, &c.seconds));
    *out = c;
  } else if (type == "collective") {
    ProgramCollective c;
    ELASTRAIN_RETURN_IF_ERROR(Int(j, type, "seq", 0, kMaxStep, &c.seq, /*required=*/true));
    auto k = j.find("kind");
    const std::string kind = k != j.end() && k->is_string() ? k->get<std::string>() : "";
    if (kind.empty() || !ParseChoice(kCollectiveKindChoices, kind))
      return Bad(type, "kind", "one of allreduce, allgather, reduce_scatter, broadcast, barrier, exchange, connect");
    c.kind = kind;
    auto in = j.find("inside");
    if (in == j.end() || !in->is_boolean()) return Bad(type, "inside", "true or false");
    c.inside = in->get<bool>();
    *out = std::move(c);
  } else {
    return Status::InvalidArgument(fmt::format(
        "program message: unknown type '{}' (expected hello, waiting, heartbeat, step, checkpoint or collective)",
        type.substr(0, 40)));
  }
  return Status::OK();
}

nlohmann::json AssignToProgram(const std::map<std::string, std::string>& env) {
  return {{"type", "assign"}, {"env", env}};
}

nlohmann::json ControlToProgram(const ProgramControl& c) {
  return {{"type", "control"}, {"stop", c.stop}, {"reason", c.reason}, {"deadline", c.deadline},
          {"checkpoint_period", c.checkpoint_period}};
}

}  // namespace elastrain
