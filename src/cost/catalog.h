// The accelerator catalog: what a chip costs and computes, one row per offer, from the
// CSV files of configs/catalog/ (compiled into the binary) or a file or folder given
// with --catalog. Columns (in this order):
//   name, accelerator, chips_per_host, memory_gib, peak_bf16_tflops,
//   on_demand_usd_per_chip_hour, spot_usd_per_chip_hour, region, source, price_date
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace elastrain {

struct AcceleratorOffer {
  std::string name;         // unique key, e.g. "gcp-tpu-v6e"
  std::string accelerator;  // e.g. "TPU v6e", "H100 80GB SXM"
  int chips_per_host = 0;   // chips that come and go together (a VM / TPU host)
  double memory_gib = 0;    // accelerator memory per chip
  double peak_flops = 0;    // peak dense bf16 FLOP/s per chip (the CSV holds TFLOP/s)
  double on_demand_usd_per_chip_hour = 0;
  double spot_usd_per_chip_hour = 0;
  std::string region;       // where the prices were quoted
  std::string source;       // URL of the published price
  std::string price_date;   // when that price was published / read (YYYY-MM)
  std::string origin;       // "FILE:LINE", for messages
};

const std::vector<std::string>& CatalogColumns();

// Rows of one catalog CSV; errors name the file, line and column.
Result<std::vector<AcceleratorOffer>> ParseCatalog(const std::string& text, const std::string& origin);
// `path` is a CSV file or a folder of *.csv files (read in name order).
Result<std::vector<AcceleratorOffer>> LoadCatalog(const std::string& path);
// The catalog compiled in from configs/catalog/*.csv.
Result<std::vector<AcceleratorOffer>> EmbeddedCatalog();

}  // namespace elastrain
