// The cost planner's CSV inputs (src/cost/): the accelerator catalog (ParseCatalog, as
// `--catalog FILE` reads it) and a preemption trace (ParsePreemptionTrace), over the
// generic reader (ParseCsv, CsvNumber, CsvInteger). The input is one CSV file's text.
// Property: a parsed table's rows have as many fields as its header.
#include <string>

#include "cost/catalog.h"
#include "cost/csv.h"
#include "cost/preemption.h"
#include "fuzz_check.h"

using namespace elastrain;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = fuzz::AsString(data, size);
  Result<CsvTable> t = ParseCsv(text, "fuzz.csv");
  if (t.ok()) {
    for (const CsvRow& row : t->rows) {
      FUZZ_CHECK(row.fields.size() == t->header.size(), "every row has the header's field count");
      for (size_t col = 0; col < row.fields.size(); ++col) {
        (void)CsvNumber(*t, row, col);
        (void)CsvInteger(*t, row, col);
      }
    }
  }
  Result<std::vector<AcceleratorOffer>> offers = ParseCatalog(text, "fuzz.csv");
  if (offers.ok())
    for (const AcceleratorOffer& o : *offers) FUZZ_CHECK(!o.name.empty(), "an offer has a name");
  (void)ParsePreemptionTrace(text, "fuzz.csv");
  return 0;
}
