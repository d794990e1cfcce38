#include "cost/preemption.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include "cost/csv.h"
#include "cost/failure_trace.h"

namespace elastrain {

const char* CapacityName(Capacity c) { return ChoiceWord(kCapacityChoices, c).data(); }

PreemptionModel DefaultPreemption(Capacity c) {
  PreemptionModel m;
  if (c == Capacity::kOnDemand) {
    m.host_mtti_seconds = kDefaultOnDemandHostMttiSeconds;
    m.loss_sizes = {{1, 1.0}};
    m.replacement_seconds = kDefaultOnDemandReplacementSeconds;
  } else {
    m.host_mtti_seconds = kDefaultSpotHostMttiSeconds;
    m.loss_sizes = {{1, 0.7}, {2, 0.2}, {4, 0.1}};
    m.replacement_seconds = kDefaultSpotReplacementSeconds;
  }
  return m;
}

Result<std::vector<LossSize>> ParseLossSizes(const std::string& spec, const std::string& flag) {
  const std::string expected = "expected HOSTS:PROBABILITY[,HOSTS:PROBABILITY...] with probabilities summing to 1, "
                               "e.g. 1:0.7,2:0.2,4:0.1";
  std::vector<LossSize> out;
  double sum = 0;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t colon = item.find(':');
    LossSize l;
    bool ok = colon != std::string::npos;
    if (ok) {
      const char* b = item.data();
      auto [p1, e1] = std::from_chars(b, b + colon, l.hosts);
      auto [p2, e2] = std::from_chars(b + colon + 1, b + item.size(), l.probability);
      ok = e1 == std::errc() && p1 == b + colon && e2 == std::errc() && p2 == b + item.size() && l.hosts >= 1 &&
           l.probability >= 0 && l.probability <= 1;
    }
    if (!ok) return Status::InvalidArgument(fmt::format("{} '{}': bad entry '{}'; {}", flag, spec, item, expected));
    sum += l.probability;
    out.push_back(l);
  }
  if (out.empty() || std::fabs(sum - 1.0) > 1e-6)
    return Status::InvalidArgument(fmt::format("{} '{}': probabilities sum to {:.6g}; {}", flag, spec, sum, expected));
  return out;
}

double MeanHostsLost(const std::vector<LossSize>& sizes) {
  double m = 0;
  for (const LossSize& l : sizes) m += l.hosts * l.probability;
  return m;
}

int HostsLostFor(const std::vector<LossSize>& sizes, double u) {
  double acc = 0;
  for (const LossSize& l : sizes) {
    acc += l.probability;
    if (u < acc) return l.hosts;
  }
  return sizes.empty() ? 1 : sizes.back().hosts;
}

Result<std::vector<PreemptionEvent>> ParsePreemptionTrace(const std::string& text, const std::string& origin) {
  ELASTRAIN_ASSIGN_OR_RETURN(CsvTable t, ParseCsv(text, origin));
  ELASTRAIN_RETURN_IF_ERROR(CheckCsvHeader(t, {"timestamp_seconds", "hosts_lost"}));
  std::vector<PreemptionEvent> out;
  for (const CsvRow& r : t.rows) {
    PreemptionEvent e;
    ELASTRAIN_ASSIGN_OR_RETURN(e.time_seconds, CsvNumber(t, r, 0));
    ELASTRAIN_ASSIGN_OR_RETURN(int64_t lost, CsvInteger(t, r, 1));
    if (e.time_seconds < 0 || (!out.empty() && e.time_seconds < out.back().time_seconds))
      return Status::InvalidArgument(fmt::format("{}:{}:1: timestamp_seconds={}: expected >= 0 and >= the line above",
                                                 origin, r.line, r.fields[0]));
    if (lost < 1 || lost > 1'000'000)
      return Status::InvalidArgument(
          fmt::format("{}:{}:2: hosts_lost={}: expected an integer >= 1", origin, r.line, r.fields[1]));
    e.hosts_lost = static_cast<int>(lost);
    out.push_back(e);
  }
  return out;
}

Result<std::vector<PreemptionEvent>> LoadPreemptionTrace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(fmt::format("--trace {}: no such file", path));
  const std::string text = ReadTraceBytes(in);
  if (text.size() > kMaxTraceBytes)
    return Status::InvalidArgument(fmt::format("--trace {}: more than {} bytes: expected a trace of at most that",
                                               path, kMaxTraceBytes));
  if (IsFailureTraceText(text)) {  // chaos replay's (cost/failure_trace.h): its interruptions
    ELASTRAIN_ASSIGN_OR_RETURN(std::vector<TraceEvent> events, ParseFailureTrace(text, path));
    return TraceInterruptions(events);
  }
  return ParsePreemptionTrace(text, path);
}

}  // namespace elastrain
