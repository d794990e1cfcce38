#include "cost/failure_trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include "common/json.h"
#include "cost/csv.h"

namespace elastrain {

namespace {

// The chaos API's bounds (wire/protocol.h: kMaxSlowFactor, kMaxSlowSeconds).
constexpr double kMaxFactor = 100;
constexpr double kMaxEventSeconds = 7 * 24 * 3600;
constexpr int kMaxRank = 1'000'000;
constexpr size_t kMaxHostChars = 253;

const char* kCsvHeader = "time_seconds,event,target,factor,seconds";

Status Bad(const std::string& where, const std::string& what) {
  return Status::InvalidArgument(fmt::format("{}: {}", where, what));
}

bool ParseNumber(const std::string& s, double* out) {
  if (s.empty()) return false;
  const char* b = s.data();
  auto [p, ec] = std::from_chars(b, b + s.size(), *out);
  return ec == std::errc() && p == b + s.size() && std::isfinite(*out);
}

bool HostNameOk(const std::string& h) {
  if (h.empty() || h.size() > kMaxHostChars) return false;
  for (char c : h)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_')) return false;
  return true;
}

// One event's fields as text (CSV cells, or JSON values rendered), checked together.
// `where` names the line or index; `prev` is the time of the event before (or -1).
Result<TraceEvent> MakeEvent(const std::string& where, const std::string& time, const std::string& action,
                             const std::string& target, const std::string& factor, const std::string& seconds,
                             double prev) {
  TraceEvent e;
  if (!ParseNumber(time, &e.time_seconds) || e.time_seconds < 0 || e.time_seconds > kMaxTraceSeconds)
    return Bad(where, fmt::format("time_seconds '{}': expected a number of seconds in [0, {:.0f}]", time,
                                  kMaxTraceSeconds));
  if (e.time_seconds < prev)
    return Bad(where, fmt::format("time_seconds {}: expected times in order (the event before is at {})", time, prev));
  const auto a = ParseChoice(kTraceActionChoices, action);
  if (!a) return Bad(where, ChoiceRefusal(kTraceActionChoices, fmt::format("event '{}'", action)));
  e.action = *a;
  if (e.action == TraceAction::kHostLoss) {
    if (!HostNameOk(target))
      return Bad(where, fmt::format("target '{}': host_loss expects a host name (letters, digits, '-', '.', '_') "
                                    "or any",
                                    target));
    e.host = target;
  } else if (target.empty() || target == "any") {
    e.rank = kAnyRank;
  } else {
    double r = 0;
    if (!ParseNumber(target, &r) || r < 0 || r > kMaxRank || r != std::floor(r))
      return Bad(where, fmt::format("target '{}': expected a rank (an integer >= 0) or any", target));
    e.rank = static_cast<int>(r);
  }
  const bool slow = e.action == TraceAction::kSlow, preempt = e.action == TraceAction::kPreempt;
  const bool host = e.action == TraceAction::kHostLoss;
  if (slow) {
    if (!ParseNumber(factor, &e.factor) || !(e.factor > 1 && e.factor <= kMaxFactor))
      return Bad(where, fmt::format("factor '{}': slow expects a factor in (1, {:.0f}]", factor, kMaxFactor));
  } else if (!factor.empty()) {
    return Bad(where, fmt::format("factor '{}': only slow takes a factor", factor));
  }
  if (slow || preempt || host) {
    if (!seconds.empty() && (!ParseNumber(seconds, &e.seconds) || e.seconds < 0 || e.seconds > kMaxEventSeconds))
      return Bad(where, fmt::format("seconds '{}': expected 0 to {:.0f} ({})", seconds, kMaxEventSeconds,
                                    slow      ? "how long the slowdown lasts, 0: until unslow"
                                    : preempt ? "when the preempted slot returns, 0: never"
                                              : "when a replacement host arrives, 0: never"));
  } else if (!seconds.empty()) {
    return Bad(where, fmt::format("seconds '{}': only slow, preempt and host_loss take seconds", seconds));
  }
  return e;
}

Result<std::vector<TraceEvent>> ParseCsvTrace(const std::string& text, const std::string& origin) {
  ELASTRAIN_ASSIGN_OR_RETURN(CsvTable t, ParseCsv(text, origin));
  ELASTRAIN_RETURN_IF_ERROR(CheckCsvHeader(t, {"time_seconds", "event", "target", "factor", "seconds"}));
  if (t.rows.size() > kMaxTraceEvents)
    return Bad(origin, fmt::format("{} events: expected at most {}", t.rows.size(), kMaxTraceEvents));
  std::vector<TraceEvent> out;
  out.reserve(t.rows.size());
  for (const CsvRow& r : t.rows) {
    const auto& f = r.fields;
    ELASTRAIN_ASSIGN_OR_RETURN(
        TraceEvent e, MakeEvent(fmt::format("{}:{}", origin, r.line), f[0], f[1], f[2], f[3], f[4],
                                out.empty() ? 0.0 : out.back().time_seconds));
    out.push_back(std::move(e));
  }
  return out;
}

// A JSON value as the text a CSV cell would hold: numbers and strings; null or absent
// is empty. Anything else is refused by the caller's check.
bool CellOf(const nlohmann::json& j, const char* key, std::string* out) {
  const auto it = j.find(key);
  out->clear();
  if (it == j.end() || it->is_null()) return true;
  if (it->is_string()) {
    *out = it->get<std::string>();
    return !out->empty();
  }
  if (it->is_number()) {
    *out = it->dump();
    return true;
  }
  return false;
}

Result<std::vector<TraceEvent>> ParseJsonTrace(const std::string& text, const std::string& origin) {
  ELASTRAIN_ASSIGN_OR_RETURN(nlohmann::json j, ParseJson(text, origin));
  if (!j.is_object() || !j.contains("events") || !j["events"].is_array())
    return Bad(origin, "expected an object {\"events\": [{\"time_seconds\": ..., \"event\": ...}, ...]}");
  for (const auto& [key, v] : j.items())
    if (key != "events" && key != "comment")
      return Bad(origin, fmt::format("unknown key '{}': expected events (and an optional comment)", key));
  const auto& events = j["events"];
  if (events.size() > kMaxTraceEvents)
    return Bad(origin, fmt::format("{} events: expected at most {}", events.size(), kMaxTraceEvents));
  static const char* kKeys[] = {"time_seconds", "event", "target", "factor", "seconds"};
  std::vector<TraceEvent> out;
  out.reserve(events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    const std::string where = fmt::format("{}: events[{}]", origin, i);
    const auto& ev = events[i];
    if (!ev.is_object()) return Bad(where, "expected an object");
    for (const auto& [key, v] : ev.items())
      if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys))
        return Bad(where, fmt::format("unknown key '{}': expected time_seconds, event, target, factor, seconds", key));
    std::string cells[5];
    for (int k = 0; k < 5; ++k)
      if (!CellOf(ev, kKeys[k], &cells[k]))
        return Bad(where, fmt::format("{}: expected a number or a non-empty string", kKeys[k]));
    if (!ev.contains("time_seconds") || !ev.contains("event")) return Bad(where, "expected time_seconds and event");
    ELASTRAIN_ASSIGN_OR_RETURN(TraceEvent e, MakeEvent(where, cells[0], cells[1], cells[2], cells[3], cells[4],
                                                       out.empty() ? 0.0 : out.back().time_seconds));
    out.push_back(std::move(e));
  }
  return out;
}

std::string Number(double v) { return fmt::format("{}", v); }

}  // namespace

bool IsFailureTraceText(const std::string& text) {
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    return line[first] == '{' || line.compare(first, 12, "time_seconds") == 0;
  }
  return false;
}

std::string ReadTraceBytes(std::istream& in) {
  std::string text(kMaxTraceBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

Result<std::vector<TraceEvent>> ParseFailureTrace(const std::string& text, const std::string& origin) {
  if (text.size() > kMaxTraceBytes)
    return Bad(origin, fmt::format("{} bytes: expected a trace of at most {} bytes", text.size(), kMaxTraceBytes));
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') return ParseJsonTrace(text, origin);
  return ParseCsvTrace(text, origin);
}

Result<std::vector<TraceEvent>> LoadFailureTrace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(fmt::format("trace {}: cannot open it (expected a CSV or JSON trace file)", path));
  std::string text = ReadTraceBytes(in);
  if (in.bad()) return Status::IOError(fmt::format("trace {}: read failed", path));
  return ParseFailureTrace(text, path);
}

std::string FailureTraceCsv(const std::vector<TraceEvent>& events) {
  std::string out = std::string(kCsvHeader) + "\n";
  for (const TraceEvent& e : events) {
    std::string target = e.action == TraceAction::kHostLoss ? e.host
                         : e.rank == kAnyRank                ? "any"
                                                             : std::to_string(e.rank);
    const bool slow = e.action == TraceAction::kSlow, preempt = e.action == TraceAction::kPreempt;
    const bool host = e.action == TraceAction::kHostLoss;
    out += fmt::format("{},{},{},{},{}\n", Number(e.time_seconds), ChoiceWord(kTraceActionChoices, e.action), target,
                       slow ? Number(e.factor) : "", slow || preempt || (host && e.seconds > 0) ? Number(e.seconds) : "");
  }
  return out;
}

constexpr double kNever = std::numeric_limits<double>::infinity();

std::vector<PreemptionEvent> TraceInterruptions(const std::vector<TraceEvent>& events) {
  std::vector<PreemptionEvent> out;
  for (const TraceEvent& e : events) {
    if (e.action == TraceAction::kSlow || e.action == TraceAction::kUnslow) continue;
    PreemptionEvent p{e.time_seconds, 1};
    switch (e.action) {
      case TraceAction::kKill:
      case TraceAction::kHang: p.return_seconds = 0; break;  // the slot stays: a new process takes it
      case TraceAction::kPreempt:
        p.notice = true;
        p.return_seconds = e.seconds > 0 ? e.seconds : kNever;
        break;
      default:  // a host loss: no notice; a replacement host after its seconds (never when 0)
        p.return_seconds = e.seconds > 0 ? e.seconds : kNever;
        break;
    }
    out.push_back(p);
  }
  return out;
}

Result<std::vector<std::pair<TraceAction, double>>> ParseTraceMix(const std::string& spec) {
  std::vector<std::pair<TraceAction, double>> out;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t colon = item.find(':');
    const std::string word = item.substr(0, colon);
    const auto a = ParseChoice(kTraceActionChoices, word);
    double w = 1;
    if (!a || a == TraceAction::kUnslow ||
        (colon != std::string::npos && (!ParseNumber(item.substr(colon + 1), &w) || !(w > 0 && w <= 1e6))))
      return Status::InvalidArgument(fmt::format(
          "--mix '{}': bad entry '{}'; expected EVENT[:WEIGHT],... with EVENT one of kill, hang, preempt, host_loss, "
          "slow and weights > 0, e.g. kill:2,preempt:1",
          spec, item));
    out.emplace_back(*a, w);
  }
  if (out.empty()) return Status::InvalidArgument("--mix '': expected EVENT[:WEIGHT],..., e.g. kill:2,preempt:1");
  return out;
}

Result<std::vector<TraceEvent>> GenerateFailureTrace(const TraceSpec& s) {
  if (!(s.duration_seconds > 0 && s.duration_seconds <= kMaxTraceSeconds))
    return Status::InvalidArgument(fmt::format("--duration {}: expected seconds in (0, {:.0f}]", s.duration_seconds,
                                               kMaxTraceSeconds));
  if (!(s.rate_per_hour > 0 && s.rate_per_hour <= 3600))
    return Status::InvalidArgument(fmt::format("--rate {}: expected events (or bursts) per hour in (0, 3600]",
                                               s.rate_per_hour));
  if (s.bursty && !(s.burst_extra >= 0 && s.burst_extra <= 100 && s.burst_seconds >= 0 && s.burst_seconds <= 3600))
    return Status::InvalidArgument("--burst-extra/--burst-seconds: expected 0 to 100 events and 0 to 3600 s");
  if (s.mix.empty()) return Status::InvalidArgument("--mix: expected at least one event kind");
  std::mt19937_64 rng(s.seed);
  std::exponential_distribution<double> gap(s.rate_per_hour / 3600.0);
  std::vector<double> weights;
  for (const auto& [a, w] : s.mix) weights.push_back(w);
  std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
  std::poisson_distribution<int> extra(s.burst_extra > 0 ? s.burst_extra : 1e-9);
  std::uniform_real_distribution<double> within(0, s.burst_seconds);
  std::vector<TraceEvent> out;
  for (double t = gap(rng); t < s.duration_seconds; t += gap(rng)) {
    std::vector<double> times = {t};
    if (s.bursty)
      for (int k = extra(rng); k > 0; --k)
        if (double u = t + within(rng); u < s.duration_seconds) times.push_back(u);
    for (double u : times) {
      TraceEvent e;
      e.time_seconds = std::round(u * 1000) / 1000;
      e.action = s.mix[pick(rng)].first;
      if (e.action == TraceAction::kHostLoss) e.host = "any";
      if (e.action == TraceAction::kSlow) {
        e.factor = s.slow_factor;
        e.seconds = s.slow_seconds;
      }
      if (e.action == TraceAction::kPreempt || e.action == TraceAction::kHostLoss) e.seconds = s.return_seconds;
      out.push_back(std::move(e));
    }
    if (out.size() > kMaxTraceEvents)
      return Status::InvalidArgument(fmt::format("more than {} events: expected a shorter --duration or lower --rate",
                                                 kMaxTraceEvents));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const TraceEvent& a, const TraceEvent& b) { return a.time_seconds < b.time_seconds; });
  return out;
}

}  // namespace elastrain
