// The cost planner's CSV inputs (src/cost/): the accelerator catalog (ParseCatalog, as
// `--catalog FILE` reads it), a preemption trace (ParsePreemptionTrace) and a failure
// trace of `chaos replay` (ParseFailureTrace, CSV or JSON), over the generic reader
// (ParseCsv, CsvNumber, CsvInteger). The input is one file's text. Properties: a parsed
// table's rows have as many fields as its header; a parsed failure trace is in time
// order, and its CSV form parses back to the same CSV.
#include <string>

#include "cost/catalog.h"
#include "cost/csv.h"
#include "cost/failure_trace.h"
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
  Result<std::vector<TraceEvent>> trace = ParseFailureTrace(text, "fuzz.csv");
  if (trace.ok()) {
    for (size_t i = 1; i < trace->size(); ++i)
      FUZZ_CHECK((*trace)[i].time_seconds >= (*trace)[i - 1].time_seconds, "a trace's events are in time order");
    const std::string csv = FailureTraceCsv(*trace);
    Result<std::vector<TraceEvent>> back = ParseFailureTrace(csv, "again.csv");
    FUZZ_CHECK(back.ok() && FailureTraceCsv(*back) == csv, "a trace's CSV form reads back the same");
  }
  return 0;
}
