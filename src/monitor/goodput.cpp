#include "monitor/goodput.h"

#include <algorithm>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "common/json.h"
#include "wire/events.h"
#include "wire/job_state.h"

namespace elastrain {

namespace {

struct StateSegment {
  double begin = 0, end = 0;
  JobState state = JobState::kPending;
  std::optional<JobState> next;  // the state that ended it (none while it lasts)
  int64_t generation = -1;
};

struct StepRecord {
  int64_t step = 0;
  double time = 0;  // wall time when it was logged
};

class Accountant {
 public:
  Accountant(const std::vector<nlohmann::json>& lines, const std::vector<nlohmann::json>& metrics, double now);
  GoodputBreakdown Run();

 private:
  void Add(double begin, double end, TimeCategory c, int64_t gen);
  void NotTraining(double begin, double end, int64_t gen);
  void Train(const StateSegment& seg, double begin, GenerationSummary* gs);
  int64_t StepsBefore(int64_t gen) const;

  std::vector<EventRecord> events_;  // the lines that decode (wire/events.h); the others are skipped
  double now_;
  GoodputBreakdown out_;
  std::map<int64_t, GenerationSummary> gens_;
  std::map<int64_t, std::vector<StepRecord>> steps_;  // generation -> logged steps
  std::map<int64_t, int64_t> failed_at_;              // generation -> step when it failed
  std::map<int64_t, StepRecord> redone_;              // generation -> its last redone step (steps_redone)
  std::vector<std::pair<double, double>> stalls_;     // (event time, stall seconds)
  bool trained_ = false;
  double pending_recovery_ = 0;
};

Accountant::Accountant(const std::vector<nlohmann::json>& lines, const std::vector<nlohmann::json>& metrics,
                       double now)
    : now_(now) {
  for (const nlohmann::json& line : lines)
    if (auto r = DecodeEvent(line); r.ok()) events_.push_back(std::move(r).value());
  for (const nlohmann::json& m : metrics) {
    if (!m.is_object() || !m.contains("loss") || !m.contains("wall_time")) continue;
    steps_[LenientInteger(m, "generation", 0)].push_back({LenientInteger(m, "step", 0), LenientNumber(m, "wall_time")});
  }
  for (auto& [g, v] : steps_)
    std::stable_sort(v.begin(), v.end(), [](const StepRecord& a, const StepRecord& b) { return a.step < b.step; });
  for (const EventRecord& r : events_) {
    if (const auto* e = EventAs<GenerationStartedEvent>(r)) {
      GenerationSummary& s = gens_[e->generation];
      s.generation = e->generation;
      s.world = e->world;
      s.started = r.time;
      s.start_step = e->restore.step.value_or(0);
    } else if (const auto* e = EventAs<GenerationFirstStepEvent>(r)) {
      GenerationSummary& s = gens_[e->generation];
      s.generation = e->generation;
      s.first_step = e->step_started > 0 ? e->step_started : e->first_step_time;
      if (e->start_step >= 0) s.start_step = e->start_step;
    } else if (const auto* e = EventAs<StateRestoredEvent>(r)) {  // the chief's word on the step it restored
      GenerationSummary& s = gens_[e->generation];
      s.generation = e->generation;
      s.start_step = e->step;
    } else if (const auto* e = EventAs<StepsRedoneEvent>(r)) {
      redone_[e->generation] = {e->to, r.time};
    } else if (const auto* e = EventAs<GenerationFailedEvent>(r)) {
      failed_at_[e->generation] = std::max(failed_at_[e->generation], e->step);
    } else if (const auto* e = EventAs<CheckpointSavedEvent>(r)) {
      stalls_.push_back({r.time, std::max(0.0, e->stall_seconds)});
    }
  }
}

void Accountant::Add(double begin, double end, TimeCategory c, int64_t gen) {
  if (!(end > begin)) return;
  out_.seconds[static_cast<int>(c)] += end - begin;
  if (!out_.spans.empty()) {
    TimeSpan& last = out_.spans.back();
    if (last.category == c && last.generation == gen && last.end >= begin - 1e-9) {
      last.end = end;
      return;
    }
  }
  out_.spans.push_back({begin, end, c, gen});
}

void Accountant::NotTraining(double begin, double end, int64_t gen) {
  if (!(end > begin)) return;
  if (trained_) pending_recovery_ += end - begin;
  Add(begin, end, trained_ ? TimeCategory::kRecovery : TimeCategory::kInit, gen);
}

int64_t Accountant::StepsBefore(int64_t gen) const {
  int64_t m = 0;
  for (const auto& [g, v] : steps_)
    if (g < gen && !v.empty()) m = std::max(m, v.back().step);
  for (const auto& [g, s] : failed_at_)
    if (g < gen) m = std::max(m, s);
  return m;
}

// The training part of generation `seg.generation`'s RUNNING span: [begin, seg.end).
void Accountant::Train(const StateSegment& seg, double begin, GenerationSummary* gs) {
  const double end = seg.end;
  const int64_t g = seg.generation;
  if (trained_) {
    out_.recoveries.push_back(pending_recovery_);
    gs->recovery_seconds = pending_recovery_;
  }
  trained_ = true;
  pending_recovery_ = 0;

  static const std::vector<StepRecord> kNone;
  auto it = steps_.find(g);
  const std::vector<StepRecord>& recs = it == steps_.end() ? kNone : it->second;
  const int64_t start = gs->start_step;
  double last_t = begin;
  int64_t last_step = start;
  for (const StepRecord& r : recs)
    if (r.time <= end + 1e-6 && r.step >= last_step) last_t = std::clamp(r.time, begin, end), last_step = r.step;

  // Redone: until the step the earlier generations had reached is completed again. The
  // chief says when (steps_redone): those steps already have their lines, so the
  // generation writes none for them.
  const int64_t before = StepsBefore(g);
  double redo_end = begin;
  if (auto redo = redone_.find(g); redo != redone_.end()) {
    redo_end = std::clamp(redo->second.time, begin, end);
    last_t = std::max(last_t, redo_end);
    gs->redone_steps = std::max<int64_t>(0, redo->second.step - start);
    out_.redone_steps += gs->redone_steps;
  } else if (before > start) {
    // Without the event (it failed first; log_period > 1): interpolated between the
    // logged steps, and the steps it reached by its failure.
    if (auto f = failed_at_.find(g); f != failed_at_.end()) last_step = std::max(last_step, f->second);
    redo_end = last_t;
    double prev_t = begin;
    int64_t prev_step = start;
    for (const StepRecord& r : recs) {
      if (r.step < before) {
        prev_t = std::max(prev_t, r.time), prev_step = r.step;
        continue;
      }
      const double f = r.step == prev_step ? 1.0 : double(before - prev_step) / double(r.step - prev_step);
      redo_end = prev_t + f * (r.time - prev_t);
      break;
    }
    redo_end = std::clamp(redo_end, begin, last_t);
    gs->redone_steps = std::min(before, last_step) - start;
    out_.redone_steps += gs->redone_steps;
  }
  double stall_redo = 0, stall_train = 0, stall_tail = 0;
  for (const auto& [t, s] : stalls_) {
    if (t < begin || t > end) continue;
    (t < redo_end ? stall_redo : t <= last_t ? stall_train : stall_tail) += s;
  }
  stall_redo = std::min(stall_redo, redo_end - begin);
  stall_train = std::min(stall_train, last_t - redo_end);
  stall_tail = std::min(stall_tail, end - last_t);

  double t = begin;
  auto piece = [&](double len, TimeCategory c) {
    Add(t, t + len, c, g);
    t += len;
  };
  piece(redo_end - begin - stall_redo, TimeCategory::kRedone);
  piece(stall_redo, TimeCategory::kCheckpoint);
  piece(last_t - redo_end - stall_train, TimeCategory::kProductive);
  piece(stall_train, TimeCategory::kCheckpoint);
  piece(stall_tail, TimeCategory::kCheckpoint);
  // The tail after the last logged step: lost work when the generation failed, the
  // stop-step save when it was resized or stopped, the final eval when it succeeded.
  TimeCategory tail = TimeCategory::kProductive;
  if (seg.next == JobState::kRecovering || seg.next == JobState::kFailed) tail = TimeCategory::kRedone;
  if (seg.next == JobState::kResizing || seg.next == JobState::kStopped) tail = TimeCategory::kCheckpoint;
  Add(t, end, tail, g);
}

GoodputBreakdown Accountant::Run() {
  double start = -1;
  for (const EventRecord& r : events_)
    if (EventAs<JobSubmittedEvent>(r)) {
      start = r.time;
      break;
    }
  if (start < 0)
    for (const EventRecord& r : events_)
      if (r.time > 0) {
        start = r.time;
        break;
      }
  if (start < 0) return out_;
  out_.start = start;
  out_.end = std::max(start, now_);

  std::vector<StateSegment> segs;
  StateSegment cur{start, 0, JobState::kPending, std::nullopt, -1};
  for (const EventRecord& r : events_) {
    const auto* e = EventAs<JobStateEvent>(r);
    if (!e) continue;
    auto to = ParseJobState(e->to);
    if (!to.ok()) continue;  // not a state this version knows: the segment goes on
    const double t = std::max(r.time, cur.begin);
    cur.end = t;
    cur.next = to.value();
    segs.push_back(cur);
    cur = {t, 0, to.value(), std::nullopt, e->generation};
    if (IsTerminal(cur.state)) {
      out_.finished = true;
      out_.end = t;
      break;
    }
  }
  out_.state = JobStateName(cur.state);
  if (!out_.finished) {
    cur.end = std::max(out_.end, cur.begin);
    out_.end = cur.end;
    segs.push_back(cur);
  }

  for (const StateSegment& seg : segs) {
    if (seg.state == JobState::kWaitingForResources) {
      Add(seg.begin, seg.end, TimeCategory::kWaiting, seg.generation);
      continue;
    }
    if (seg.state != JobState::kRunning) {
      NotTraining(seg.begin, seg.end, seg.generation);
      continue;
    }
    GenerationSummary& gs = gens_[seg.generation];
    gs.generation = seg.generation;
    out_.worker_seconds += gs.world * (seg.end - seg.begin);
    gs.ended = seg.next ? seg.end : 0;
    gs.ended_as = seg.next ? JobStateName(*seg.next) : "";
    const double first = gs.first_step > 0 ? std::clamp(gs.first_step, seg.begin, seg.end) : seg.end;
    NotTraining(seg.begin, first, seg.generation);
    if (first < seg.end) Train(seg, first, &gs);
  }
  for (auto& [g, s] : gens_)
    if (g >= 0) out_.generations.push_back(s);
  return out_;
}

}  // namespace

const char* TimeCategoryName(TimeCategory c) {
  switch (c) {
    case TimeCategory::kProductive: return "productive";
    case TimeCategory::kRedone: return "redone";
    case TimeCategory::kRecovery: return "recovery";
    case TimeCategory::kCheckpoint: return "checkpoint";
    case TimeCategory::kWaiting: return "waiting";
    case TimeCategory::kInit: return "initialisation";
  }
  return "?";
}

double GoodputBreakdown::total() const {
  double t = 0;
  for (double s : seconds) t += s;
  return t;
}

nlohmann::json GoodputBreakdown::ToJson() const {
  nlohmann::json cats = nlohmann::json::object();
  for (int i = 0; i < kNumTimeCategories; ++i) cats[TimeCategoryName(static_cast<TimeCategory>(i))] = seconds[i];
  nlohmann::json spans = nlohmann::json::array();
  for (const TimeSpan& s : this->spans)
    spans.push_back({{"begin", s.begin}, {"end", s.end}, {"category", TimeCategoryName(s.category)},
                     {"generation", s.generation}});
  nlohmann::json gens = nlohmann::json::array();
  for (const GenerationSummary& g : generations) {
    nlohmann::json j = {{"generation", g.generation}, {"world", g.world},         {"started", g.started},
                        {"first_step", g.first_step}, {"ended", g.ended},         {"ended_as", g.ended_as},
                        {"start_step", g.start_step}, {"redone_steps", g.redone_steps}};
    if (g.recovery_seconds >= 0) j["recovery_seconds"] = g.recovery_seconds;
    gens.push_back(j);
  }
  return {{"start", start},   {"end", end},           {"wall_seconds", wall()},       {"finished", finished},
          {"state", state},   {"seconds", cats},      {"goodput", goodput()},         {"redone_steps", redone_steps},
          {"worker_seconds", worker_seconds},          {"recoveries", recoveries},     {"generations", gens},
          {"spans", spans}};
}

std::string FormatGoodput(const GoodputBreakdown& g) {
  std::string s = fmt::format("wall time {:.1f}s ({}), goodput {:.1f}%\n", g.wall(),
                              g.finished ? "finished: " + g.state : "running: " + g.state, 100 * g.goodput());
  for (int i = 0; i < kNumTimeCategories; ++i) {
    const double v = g.seconds[i];
    s += fmt::format("  {:<15} {:9.2f}s  {:5.1f}%\n", TimeCategoryName(static_cast<TimeCategory>(i)), v,
                     g.wall() > 0 ? 100 * v / g.wall() : 0.0);
  }
  s += fmt::format("  {:<15} {:9.2f}s  (categories sum to {:.2f}s)\n", "total", g.total(), g.total());
  s += fmt::format("generations {}, recoveries {}, redone steps {}, worker-seconds {:.1f}\n", g.generations.size(),
                   g.recoveries.size(), g.redone_steps, g.worker_seconds);
  for (size_t i = 0; i < g.recoveries.size(); ++i) s += fmt::format("  recovery {}: {:.3f}s\n", i + 1, g.recoveries[i]);
  return s;
}

GoodputBreakdown ComputeGoodput(const std::vector<nlohmann::json>& events,
                                const std::vector<nlohmann::json>& metrics, double now) {
  return Accountant(events, metrics, now).Run();
}

}  // namespace elastrain
