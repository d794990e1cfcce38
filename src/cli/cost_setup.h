// What `elastrain cost plan` and `cost simulate` share: turning flags and config
// overrides into a PlanRequest (model, tokens, MFU, failure assumptions) and a catalog,
// and describing those assumptions in the printed report.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "cli/cost_args.h"
#include "common/status.h"
#include "cost/catalog.h"
#include "cost/planner.h"

namespace elastrain {

struct CostSetup {
  PlanRequest req;
  std::vector<AcceleratorOffer> offers;
  std::string catalog_origin;  // "embedded configs/catalog/*.csv" or the --catalog path
  std::string mfu_note;        // "assumed MFU 0.40" / "measured MFU 0.51 from FILE"
  std::string shape_note;      // where seq_len, per_device_batch_size and remat came from
};

// The flags BuildCostSetup reads (plan and simulate accept them all).
const std::set<std::string>& CostSetupFlags();
// Reads tokens= and the config overrides out of `args` (removing tokens=) and the
// setup flags; errors name the flag or key.
Result<CostSetup> BuildCostSetup(CostArgs& args);
// The lines printed above a plan or simulation: model, MFU, memory, failures.
std::string DescribeSetup(const CostSetup& s);
// The median `mfu` of a metrics.jsonl (lines without one are skipped).
Result<double> MeasuredMfu(const std::string& path);

}  // namespace elastrain
