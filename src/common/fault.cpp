#include "common/fault.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "common/log.h"

namespace elastrain::fault {

namespace {
constexpr unsigned kStepKeys = kGen | kRank | kStep;
// Bounds on ELASTRAIN_FAULT, so that no input can make a parse expensive.
constexpr size_t kMaxText = 4096;
constexpr size_t kMaxFaults = 64;
constexpr int64_t kMaxRank = 1'000'000;

struct KeyWord {
  Key key;
  const char* word;
};
constexpr KeyWord kKeyWords[] = {{kGen, "gen"}, {kRank, "rank"}, {kStep, "step"}, {kPath, "path"}};

std::string KeyList(unsigned keys) {
  std::string out;
  for (const KeyWord& k : kKeyWords)
    if (keys & k.key) out += std::string(out.empty() ? "" : ", ") + k.word;
  return out.empty() ? "none" : out;
}

std::string PointList() {
  std::string out;
  for (const PointInfo& p : FaultPoints()) out += std::string(out.empty() ? "" : ", ") + p.name;
  return out;
}

// The item as it may be printed: control and non-ASCII bytes as '?'.
std::string Printable(std::string_view item) {
  std::string out(item);
  for (char& ch : out)
    if (ch < 0x20 || ch > 0x7e) ch = '?';
  return out;
}

Status Bad(std::string_view item, const std::string& what) {
  return Status::InvalidArgument(fmt::format("{}: '{}': {} (grammar: point[@key=value[:key=value...]][,...]; "
                                             "docs/faults.md)",
                                             kEnv, Printable(item), Printable(what)));
}

Result<int64_t> ParseCount(std::string_view item, std::string_view key, std::string_view v) {
  int64_t n = -1;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size() || n < 0)
    return Bad(item, fmt::format("{}={}: expected an integer >= 0", key, v));
  return n;
}

Status ParseCondition(std::string_view item, std::string_view cond, unsigned accepted, Fault* f) {
  const size_t eq = cond.find('=');
  if (eq == std::string_view::npos) return Bad(item, fmt::format("condition '{}': expected key=value", cond));
  const std::string_view key = cond.substr(0, eq), value = cond.substr(eq + 1);
  const KeyWord* kw = nullptr;
  for (const KeyWord& k : kKeyWords)
    if (key == k.word) kw = &k;
  if (kw == nullptr) return Bad(item, fmt::format("unknown condition '{}': expected one of gen, rank, step, path", key));
  if (!(accepted & kw->key))
    return Bad(item, fmt::format("this point's context has no {} (it takes: {})", key, KeyList(accepted)));
  if (kw->key == kPath) {
    if (f->path) return Bad(item, "path given twice");
    const bool printable = std::all_of(value.begin(), value.end(), [](char ch) { return ch >= 0x20 && ch <= 0x7e; });
    if (value.empty() || !printable || value.find('@') != std::string_view::npos)
      return Bad(item, fmt::format("path={}: expected a non-empty substring of printable characters without '@'", value));
    f->path = std::string(value);
    return Status::OK();
  }
  ELASTRAIN_ASSIGN_OR_RETURN(const int64_t n, ParseCount(item, key, value));
  if (kw->key == kRank && n > kMaxRank) return Bad(item, fmt::format("rank={}: expected a rank below {}", n, kMaxRank));
  std::optional<int64_t>& slot = kw->key == kGen ? f->generation : kw->key == kRank ? f->rank : f->step;
  if (slot) return Bad(item, fmt::format("{} given twice", key));
  slot = n;
  return Status::OK();
}

Result<Fault> ParseOne(std::string_view item) {
  if (item.empty()) return Bad(item, "an empty fault (two commas, or one at either end)");
  const size_t at = item.find('@');
  const std::string_view name = item.substr(0, at);
  const PointInfo* info = nullptr;
  for (const PointInfo& p : FaultPoints())
    if (name == p.name) info = &p;
  if (info == nullptr) return Bad(item, fmt::format("unknown fault point '{}': expected one of {}", name, PointList()));
  Fault f;
  f.point = info->point;
  if (at == std::string_view::npos) return f;
  std::string_view rest = item.substr(at + 1);
  if (rest.empty()) return Bad(item, "nothing after '@': expected key=value");
  while (true) {
    const size_t colon = rest.find(':');
    ELASTRAIN_RETURN_IF_ERROR(ParseCondition(item, rest.substr(0, colon), info->keys, &f));
    if (colon == std::string_view::npos) break;
    rest = rest.substr(colon + 1);
  }
  return f;
}

// The faults armed by front-ends, and the last ELASTRAIN_FAULT parsed (the variable may
// change between calls in tests; re-parsing only when its text changes keeps Fires cheap).
struct Registry {
  std::mutex mu;
  std::map<std::string, std::vector<Fault>> armed;  // GUARDED_BY(mu), by origin
  std::string env_text;                             // GUARDED_BY(mu)
  std::vector<Fault> env_faults;                    // GUARDED_BY(mu)
  bool env_parsed = false;                          // GUARDED_BY(mu)
};
Registry& TheRegistry() {
  static Registry* r = new Registry();  // never destroyed: Fires may run during exit
  return *r;
}

std::string DescribeContext(const Context& c) {
  std::string out;
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : " ") + s; };
  if (c.generation >= 0) add(fmt::format("gen={}", c.generation));
  if (c.rank >= 0) add(fmt::format("rank={}", c.rank));
  if (c.step >= 0) add(fmt::format("step={}", c.step));
  if (!c.path.empty()) add(fmt::format("path={}", c.path));
  return out;
}
}  // namespace

const std::vector<PointInfo>& FaultPoints() {
  static const std::vector<PointInfo> kPoints = {
      {Point::kCrashAfterShard, "crash_after_shard", kPath, "ckpt/checkpoint.cpp: WriteShardFile",
       "SIGKILL right after a shard file is renamed into place"},
      {Point::kCrashBeforeManifest, "crash_before_manifest", kPath, "ckpt/manifest.cpp: WriteManifest",
       "SIGKILL on entering WriteManifest"},
      {Point::kCrashBeforeCommit, "crash_before_commit", kPath, "ckpt/checkpoint.cpp: Commit",
       "SIGKILL on entering Commit"},
      {Point::kCrashBeforeLatest, "crash_before_latest", kPath, "ckpt/checkpoint.cpp: SetLatest",
       "SIGKILL on entering SetLatest"},
      {Point::kFailWrite, "fail_write", kPath, "ckpt/safetensors.cpp: SafetensorsWriter::Append",
       "the shard write fails with IOError after writing part of its temp file (as a full disk would), "
       "leaving nothing behind"},
      {Point::kKillAfterUpdate, "kill_after_update", kStepKeys, "train/train_step.cpp: Trainer::ApplyUpdate",
       "SIGKILL right after the update of step `step` (1-based), before its metrics line"},
      {Point::kExitAfterStep, "exit_after_step", kStepKeys, "train/trainer.cpp: Trainer::MaybeInjectFailure",
       "after step `step` (its metrics and checkpoint done): the generation fails and the process exits 1"},
      {Point::kKillAfterStep, "kill_after_step", kStepKeys, "train/trainer.cpp: Trainer::MaybeInjectFailure",
       "after step `step` and its RAM-tier copy: SIGKILL"},
      {Point::kHangAfterStep, "hang_after_step", kStepKeys, "train/trainer.cpp: Trainer::MaybeInjectFailure",
       "after step `step`: SIGSTOP (a hung rank; resumes only on SIGCONT)"},
      {Point::kPreemptAfterStep, "preempt_after_step", kStepKeys, "train/trainer.cpp: Trainer::MaybeInjectFailure",
       "after step `step`: SIGTERM to the process (a spot notice: it saves and exits 3)"},
      {Point::kKillMidSnapshot, "kill_mid_snapshot", kStepKeys, "train/ram_tier_copies.cpp: RamTierCopies::Exchange",
       "SIGKILL halfway through sending the RAM-tier copy of step `step` (only the parameters go out: the "
       "buddy's copy is torn); without a RAM tier, SIGKILL after the step"},
  };
  return kPoints;
}

const PointInfo& Info(Point p) { return FaultPoints()[static_cast<size_t>(p)]; }

bool Fault::Matches(Point p, const Context& c) const {
  if (p != point) return false;
  if (generation && *generation != c.generation) return false;
  if (rank && *rank != c.rank) return false;
  if (step && *step != c.step) return false;
  return !path || c.path.find(*path) != std::string_view::npos;
}

Result<std::vector<Fault>> ParseFaults(std::string_view text) {
  std::vector<Fault> out;
  if (text.empty()) return out;
  if (text.size() > kMaxText) return Bad(text.substr(0, 40), fmt::format("longer than {} characters", kMaxText));
  while (true) {
    const size_t comma = text.find(',');
    if (out.size() == kMaxFaults) return Bad(text.substr(0, comma), fmt::format("more than {} faults", kMaxFaults));
    ELASTRAIN_ASSIGN_OR_RETURN(Fault f, ParseOne(text.substr(0, comma)));
    out.push_back(std::move(f));
    if (comma == std::string_view::npos) return out;
    text = text.substr(comma + 1);
  }
}

std::string FormatFault(const Fault& f) {
  std::vector<std::string> conds;
  if (f.generation) conds.push_back(fmt::format("gen={}", *f.generation));
  if (f.rank) conds.push_back(fmt::format("rank={}", *f.rank));
  if (f.step) conds.push_back(fmt::format("step={}", *f.step));
  if (f.path) conds.push_back("path=" + *f.path);
  std::string out = Info(f.point).name;
  for (size_t i = 0; i < conds.size(); ++i) out += (i == 0 ? "@" : ":") + conds[i];
  return out;
}

Status CheckEnvironment() {
  const char* env = std::getenv(kEnv);
  return env == nullptr ? Status::OK() : ParseFaults(env).status();
}

void ArmFaults(const std::string& origin, std::vector<Fault> faults) {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (faults.empty()) r.armed.erase(origin);
  else r.armed[origin] = std::move(faults);
}

bool Fires(Point p, const Context& c) {
  Registry& r = TheRegistry();
  const char* env = std::getenv(kEnv);
  std::lock_guard<std::mutex> lock(r.mu);
  if (env == nullptr) env = "";
  if (!r.env_parsed || r.env_text != env) {
    r.env_text = env;
    r.env_parsed = true;
    auto parsed = ParseFaults(env);
    if (!parsed.ok()) LOG_ERROR("{} (no fault armed)", parsed.status().message());
    r.env_faults = parsed.ok() ? std::move(parsed.value()) : std::vector<Fault>{};
  }
  std::string origin;
  for (const Fault& f : r.env_faults)
    if (f.Matches(p, c)) origin = fmt::format("{}={}", kEnv, FormatFault(f));
  for (const auto& [name, faults] : r.armed)
    for (const Fault& f : faults)
      if (origin.empty() && f.Matches(p, c)) origin = fmt::format("{} ({})", name, FormatFault(f));
  if (origin.empty()) return false;
  LOG_WARN("fault {} fires at {} (armed by {})", Info(p).name, DescribeContext(c), origin);
  return true;
}

void CrashIfFires(Point p, const Context& c) {
  if (Fires(p, c)) Crash();
}

void Crash() {
  spdlog::default_logger()->flush();
  ::raise(SIGKILL);
  ::_exit(137);  // not reached; SIGKILL cannot be caught
}

}  // namespace elastrain::fault
