// Flags of `elastrain cost ...`, parsed with CLI11: `--name VALUE` or `--name=VALUE`, plus
// key=value config overrides and at most one positional CONFIG.yml, passed through untouched. Every
// error is one line naming the flag, the value and what was expected.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"

namespace elastrain {

class CostArgs {
 public:
  // `flags`: the accepted flag names (with "--"); an unknown one is an error listing them.
  static Result<CostArgs> Parse(const std::vector<std::string>& args, const std::set<std::string>& flags);

  bool Has(const std::string& flag) const { return values_.count(flag) > 0; }
  std::string String(const std::string& flag, const std::string& fallback) const;
  // A finite number in [lo, hi] (lo_open: excluding lo); the message says so.
  Result<double> Number(const std::string& flag, double fallback, double lo, double hi, bool lo_open = false) const;
  Result<int64_t> Integer(const std::string& flag, int64_t fallback, int64_t lo, int64_t hi) const;
  // "72h", "90m", "300s", "2d", or a bare number in `bare_unit_seconds` units; > 0.
  Result<double> Seconds(const std::string& flag, double fallback, double bare_unit_seconds) const;

  // key=value arguments and a leading positional (config file), in order.
  const std::vector<std::string>& passthrough() const { return passthrough_; }
  // Removes key=value for `key` from passthrough and returns its value ("" if absent).
  std::string TakeKey(const std::string& key);
  bool HasKey(const std::string& key) const;

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> passthrough_;
};

}  // namespace elastrain
