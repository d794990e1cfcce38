// The classes of MaxText's keys (docs/maxtext.md): what LoadConfig does with each, written
// out for the page and for the warning that lists the ignored ones.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "config/config.h"
#include "config/config_keys.h"
#include "config/model_keys.h"

namespace elastrain {
namespace {

// `words` joined with ", " and wrapped before `width` columns, each line indented.
std::string Wrapped(const std::vector<std::string>& words, size_t width, const std::string& indent) {
  std::string out, line;
  for (const std::string& w : words) {
    if (!line.empty() && line.size() + w.size() + 2 > width) {
      out += indent + line + ",\n";
      line.clear();
    }
    line += (line.empty() ? "" : ", ") + w;
  }
  if (!line.empty()) out += indent + line + "\n";
  return out;
}

}  // namespace

std::string IgnoredKeysSummary(const std::vector<std::string>& ignored) {
  std::vector<std::string> known, unknown;
  for (const std::string& k : ignored) (IsMaxTextOnlyKey(k) ? known : unknown).push_back(k);
  std::sort(known.begin(), known.end());
  std::sort(unknown.begin(), unknown.end());
  std::string out;
  if (!known.empty())
    out += fmt::format("ignoring {} MaxText keys that do not change what is trained here (TPU/XLA/JAX plumbing, "
                       "logging, inference; docs/maxtext.md):\n{}",
                       known.size(), Wrapped(known, 100, "  "));
  if (!unknown.empty())
    out += fmt::format("ignoring {} keys elastrain does not know (a newer MaxText's?), check that none changes the "
                       "model:\n{}",
                       unknown.size(), Wrapped(unknown, 100, "  "));
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::string MaxTextKeyTable() {
  std::set<std::string> honoured, refused, irrelevant;
  for (std::string_view k : MaxTextKeyNames()) {
    const std::string key(k);
    if (FindConfigKey(key) || IsModelKey(key)) honoured.insert(key);
    else if (IsRefusedUnlessNeutralKey(key)) refused.insert(key);
    else irrelevant.insert(key);
  }
  for (const ConfigKey& k : ConfigKeys())
    if (std::binary_search(MaxTextKeyNames().begin(), MaxTextKeyNames().end(), std::string_view(k.name)))
      honoured.insert(k.name);
  std::string out;
  out += fmt::format("### Honoured ({} keys)\n\nTrained as MaxText means them (configs/base.yml and the model keys "
                     "above).\n\n",
                     honoured.size());
  out += Wrapped(std::vector<std::string>(honoured.begin(), honoured.end()), 100, "");
  out += fmt::format("\n### Refused unless neutral ({} keys)\n\nModel- or objective-defining keys elastrain does not "
                     "implement: refused, naming the key and value, unless they hold the value below.\n\n"
                     "| key | trains only at | otherwise |\n|---|---|---|\n",
                     refused.size());
  for (const std::string& k : refused) out += fmt::format("| `{}` | {} | {} |\n", k, NeutralValues(k), RefusalReason(k));
  out += fmt::format("\n### Irrelevant here ({} keys)\n\nTPU/XLA/JAX plumbing, kernels, sharding rules, logging "
                     "destinations, inference and multimodal settings: read, listed once as ignored, no effect on "
                     "what is trained.\n\n",
                     irrelevant.size());
  out += Wrapped(std::vector<std::string>(irrelevant.begin(), irrelevant.end()), 100, "");
  return out;
}

}  // namespace elastrain
