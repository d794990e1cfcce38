#include "cli/cost_args.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>

namespace elastrain {

namespace {

bool ParseDouble(const std::string& s, double* v) {
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return !s.empty() && ec == std::errc() && p == s.data() + s.size() && std::isfinite(*v);
}

}  // namespace

// CLI11 reads the flags (`--name VALUE`, `--name=VALUE`; the last one given wins) and
// collects everything else as positionals; the checks and messages are this file's, so
// that every `cost` error stays one line naming the flag and what was expected.
Result<CostArgs> CostArgs::Parse(const std::vector<std::string>& args, const std::set<std::string>& flags) {
  if (!args.empty() && flags.count(args.back()))  // CLI11 would say "1 required TEXT missing"
    return Status::InvalidArgument(fmt::format("{}: missing its value", args.back()));
  CLI::App app;
  app.set_help_flag();  // `cost` handles -h and --help before any subcommand parses
  app.allow_extras(true);
  std::map<std::string, std::string> bound;
  std::map<std::string, CLI::Option*> options;
  for (const std::string& f : flags)
    options[f] = app.add_option(f, bound[f])->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::vector<std::string> positionals;
  app.add_option("args", positionals);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes argv reversed
  try {
    app.parse(reversed);
  } catch (const CLI::ArgumentMismatch& e) {  // `--flag=`: no value
    const std::string what = e.what();
    return Status::InvalidArgument(fmt::format("{}: missing its value", what.substr(0, what.find(':'))));
  } catch (const CLI::ParseError& e) {
    return Status::InvalidArgument(e.what());
  }
  for (const std::string& extra : app.remaining()) {
    if (extra.rfind("-", 0) != 0) continue;
    std::string all;
    for (const std::string& f : flags) all += (all.empty() ? "" : " ") + f;
    return Status::InvalidArgument(
        fmt::format("unknown flag {} (expected one of: {})", extra.substr(0, extra.find('=')), all));
  }
  CostArgs a;
  for (const std::string& s : positionals) {
    if (s.find('=') == std::string::npos && !a.passthrough_.empty())
      return Status::InvalidArgument(
          fmt::format("unexpected argument '{}': expected --flag VALUE or key=value (a config file goes first)", s));
    a.passthrough_.push_back(s);
  }
  for (const auto& [flag, option] : options)
    if (option->count() > 0) a.values_[flag] = bound[flag];
  return a;
}

std::string CostArgs::String(const std::string& flag, const std::string& fallback) const {
  auto it = values_.find(flag);
  return it == values_.end() ? fallback : it->second;
}

Result<double> CostArgs::Number(const std::string& flag, double fallback, double lo, double hi, bool lo_open) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return fallback;
  double v = 0;
  const bool ok = ParseDouble(it->second, &v) && (lo_open ? v > lo : v >= lo) && v <= hi;
  if (!ok) {
    const std::string range = std::isinf(hi) ? fmt::format("{} {}", lo_open ? ">" : ">=", lo)
                                             : fmt::format("in {}{}, {}]", lo_open ? "(" : "[", lo, hi);
    return Status::InvalidArgument(fmt::format("{}={}: expected a number {}", flag, it->second, range));
  }
  return v;
}

Result<int64_t> CostArgs::Integer(const std::string& flag, int64_t fallback, int64_t lo, int64_t hi) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return fallback;
  int64_t v = 0;
  const std::string& s = it->second;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi)
    return Status::InvalidArgument(fmt::format("{}={}: expected an integer in [{}, {}]", flag, s, lo, hi));
  return v;
}

Result<double> CostArgs::Seconds(const std::string& flag, double fallback, double bare_unit_seconds) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return fallback;
  std::string s = it->second;
  double unit = bare_unit_seconds;
  if (!s.empty()) {
    const char c = s.back();
    if (c == 's' || c == 'm' || c == 'h' || c == 'd') {
      unit = c == 's' ? 1 : c == 'm' ? 60 : c == 'h' ? 3600 : 86400;
      s.pop_back();
    }
  }
  double v = 0;
  if (!ParseDouble(s, &v) || v <= 0)
    return Status::InvalidArgument(
        fmt::format("{}={}: expected a duration > 0 such as 72h, 90m, 300s or 2d", flag, it->second));
  return v * unit;
}

std::string CostArgs::TakeKey(const std::string& key) {
  std::string value;
  for (auto it = passthrough_.begin(); it != passthrough_.end();) {
    if (it->rfind(key + "=", 0) == 0) {
      value = it->substr(key.size() + 1);
      it = passthrough_.erase(it);
    } else {
      ++it;
    }
  }
  return value;
}

bool CostArgs::HasKey(const std::string& key) const {
  for (const std::string& s : passthrough_)
    if (s.rfind(key + "=", 0) == 0) return true;
  return false;
}

}  // namespace elastrain
