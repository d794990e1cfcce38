#include "elastic/hang.h"

#include <algorithm>

#include <fmt/format.h>

namespace elastrain {
namespace {

std::string Where(const HangMember& m) {
  if (!m.reported) return "no report of it left";
  if (m.collective_seq < 0) return "no collective reported";
  return fmt::format("{} collective #{} ({})", m.in_collective ? "in" : "after", m.collective_seq,
                     m.collective_kind.empty() ? "?" : m.collective_kind);
}

}  // namespace

HangDiagnosedEvent DiagnoseHang(int64_t generation, const std::vector<HangMember>& members, double now,
                                const std::string& trigger) {
  HangDiagnosedEvent e;
  e.generation = generation;
  e.trigger = trigger;
  std::vector<HangMember> ms = members;
  std::sort(ms.begin(), ms.end(), [](const HangMember& a, const HangMember& b) { return a.rank < b.rank; });
  int64_t furthest = -1;
  for (const HangMember& m : ms) {
    HangRank r;
    r.rank = m.rank;
    r.worker = m.worker;
    r.host = m.host;
    r.collective_seq = m.collective_seq;
    r.collective_kind = m.collective_kind;
    r.in_collective = m.in_collective;
    r.silent_seconds = m.last_progress > 0 ? std::max(0.0, now - m.last_progress) : 0;
    e.ranks.push_back(std::move(r));
    furthest = std::max(furthest, m.collective_seq);
  }
  std::vector<std::string> why;
  auto name = [&](const HangMember& m, std::string reason) {
    e.behind.push_back(m.rank);
    e.hosts.push_back(m.host);
    why.push_back(fmt::format("rank {} on {} {}", m.rank, m.host, reason));
  };
  // Silence counts only while someone else talks: when every member is silent, what is
  // stale is the view (the store, the reports), not a rank.
  auto silent = [&](size_t i) { return ms[i].last_progress > 0 && e.ranks[i].silent_seconds > kSilentSeconds; };
  bool someone_talks = false;
  for (size_t i = 0; i < ms.size(); ++i) someone_talks |= !ms[i].gone && !silent(i);
  for (size_t i = 0; i < ms.size(); ++i) {
    const HangMember& m = ms[i];
    if (m.gone) name(m, fmt::format("is gone ({}; silent {:.1f}s)", Where(m), e.ranks[i].silent_seconds));
    else if (someone_talks && silent(i))
      name(m, fmt::format("is silent for {:.1f}s ({})", e.ranks[i].silent_seconds, Where(m)));
  }
  if (e.behind.empty() && furthest >= 0) {
    for (const HangMember& m : ms)
      if (m.collective_seq < furthest)
        name(m, fmt::format("never entered collective #{} ({})", furthest, Where(m)));
  }
  if (e.behind.empty()) {
    e.reason = furthest >= 0
                   ? fmt::format("no rank is behind: every member entered collective #{}; the links between them?",
                                 furthest)
                   : "no rank is behind: none reported entering a collective";
  } else {
    for (const std::string& w : why) e.reason += (e.reason.empty() ? "" : "; ") + w;
  }
  return e;
}

}  // namespace elastrain
