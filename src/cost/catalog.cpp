#include "cost/catalog.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "cost/csv.h"
#include "cost/embedded_catalog.h"

namespace elastrain {

namespace {

enum Col { kName, kAccel, kChips, kMem, kPeak, kOnDemand, kSpot, kRegion, kSource, kDate };

Result<double> Positive(const CsvTable& t, const CsvRow& r, size_t col) {
  ELASTRAIN_ASSIGN_OR_RETURN(double v, CsvNumber(t, r, col));
  if (v <= 0)
    return Status::InvalidArgument(fmt::format("{}:{}:{}: {}={}: expected a number > 0", t.origin, r.line, col + 1,
                                               t.header[col], r.fields[col]));
  return v;
}

Status CheckUnique(const std::vector<AcceleratorOffer>& offers) {
  std::set<std::string> seen;
  for (const AcceleratorOffer& o : offers)
    if (!seen.insert(o.name).second)
      return Status::InvalidArgument(fmt::format("{}:1: name '{}' appears twice in the catalog", o.origin, o.name));
  return Status::OK();
}

}  // namespace

const std::vector<std::string>& CatalogColumns() {
  static const std::vector<std::string> cols = {
      "name", "accelerator", "chips_per_host", "memory_gib", "peak_bf16_tflops", "on_demand_usd_per_chip_hour",
      "spot_usd_per_chip_hour", "region", "source", "price_date"};
  return cols;
}

Result<std::vector<AcceleratorOffer>> ParseCatalog(const std::string& text, const std::string& origin) {
  ELASTRAIN_ASSIGN_OR_RETURN(CsvTable t, ParseCsv(text, origin));
  ELASTRAIN_RETURN_IF_ERROR(CheckCsvHeader(t, CatalogColumns()));
  std::vector<AcceleratorOffer> out;
  for (const CsvRow& r : t.rows) {
    AcceleratorOffer o;
    o.origin = fmt::format("{}:{}", origin, r.line);
    for (int c : {kName, kAccel, kSource, kDate})
      if (r.fields[c].empty())
        return Status::InvalidArgument(
            fmt::format("{}:{}:{}: {} is empty (expected text)", origin, r.line, c + 1, t.header[c]));
    o.name = r.fields[kName];
    o.accelerator = r.fields[kAccel];
    ELASTRAIN_ASSIGN_OR_RETURN(int64_t chips, CsvInteger(t, r, kChips));
    if (chips < 1 || chips > 1024)
      return Status::InvalidArgument(fmt::format("{}:{}:{}: chips_per_host={}: expected an integer in [1, 1024]",
                                                 origin, r.line, kChips + 1, chips));
    o.chips_per_host = static_cast<int>(chips);
    ELASTRAIN_ASSIGN_OR_RETURN(o.memory_gib, Positive(t, r, kMem));
    ELASTRAIN_ASSIGN_OR_RETURN(double tflops, Positive(t, r, kPeak));
    o.peak_flops = tflops * 1e12;
    ELASTRAIN_ASSIGN_OR_RETURN(o.on_demand_usd_per_chip_hour, Positive(t, r, kOnDemand));
    ELASTRAIN_ASSIGN_OR_RETURN(o.spot_usd_per_chip_hour, Positive(t, r, kSpot));
    o.region = r.fields[kRegion];
    o.source = r.fields[kSource];
    o.price_date = r.fields[kDate];
    out.push_back(std::move(o));
  }
  if (out.empty()) return Status::InvalidArgument(fmt::format("{}: no rows after the header", origin));
  return out;
}

Result<std::vector<AcceleratorOffer>> LoadCatalog(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::string> files;
  if (fs::is_directory(path, ec)) {
    for (const auto& e : fs::directory_iterator(path, ec))
      if (e.path().extension() == ".csv") files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    if (files.empty())
      return Status::NotFound(fmt::format("--catalog {}: no *.csv files in that folder", path));
  } else if (fs::exists(path, ec)) {
    files.push_back(path);
  } else {
    return Status::NotFound(fmt::format("--catalog {}: no such file or directory", path));
  }
  std::vector<AcceleratorOffer> all;
  for (const std::string& f : files) {
    std::ifstream in(f);
    if (!in) return Status::IOError(fmt::format("--catalog {}: cannot read", f));
    std::stringstream ss;
    ss << in.rdbuf();
    ELASTRAIN_ASSIGN_OR_RETURN(auto offers, ParseCatalog(ss.str(), f));
    all.insert(all.end(), offers.begin(), offers.end());
  }
  ELASTRAIN_RETURN_IF_ERROR(CheckUnique(all));
  return all;
}

Result<std::vector<AcceleratorOffer>> EmbeddedCatalog() {
  std::vector<AcceleratorOffer> all;
  for (int i = 0; i < kEmbeddedCatalogFileCount; ++i) {
    ELASTRAIN_ASSIGN_OR_RETURN(auto offers, ParseCatalog(kEmbeddedCatalogFiles[i].text, kEmbeddedCatalogFiles[i].name));
    all.insert(all.end(), offers.begin(), offers.end());
  }
  ELASTRAIN_RETURN_IF_ERROR(CheckUnique(all));
  return all;
}

}  // namespace elastrain
