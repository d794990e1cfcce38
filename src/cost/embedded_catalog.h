// The catalog CSVs compiled into the binary: CMakeLists.txt generates their
// definition from configs/catalog/*.csv (build/generated/catalog_csv.cpp).
#pragma once

namespace elastrain {

struct EmbeddedCatalogFile {
  const char* name;  // "configs/catalog/gcp_tpu.csv"
  const char* text;  // the whole file
};
extern const EmbeddedCatalogFile kEmbeddedCatalogFiles[];
extern const int kEmbeddedCatalogFileCount;

}  // namespace elastrain
