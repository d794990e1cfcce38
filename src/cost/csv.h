// A small CSV reader for the cost planner's inputs (catalogs, preemption traces).
// RFC 4180 subset: comma-separated fields, double-quoted fields may hold commas and
// doubled quotes (""), no newlines inside fields. Blank lines and lines whose first
// character is '#' are skipped. The first remaining line is the header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace elastrain {

struct CsvRow {
  int line = 0;                     // 1-based line number in the file
  std::vector<std::string> fields;  // trimmed of surrounding spaces (outside quotes)
};

struct CsvTable {
  std::string origin;  // the file name, for messages
  int header_line = 0;
  std::vector<std::string> header;
  std::vector<CsvRow> rows;  // every row has header.size() fields
};

// Parses `text`; `origin` names it in errors, which read
// "FILE:LINE:COLUMN: what was wrong" (COLUMN is the 1-based field number).
Result<CsvTable> ParseCsv(const std::string& text, const std::string& origin);

// Requires the header to be exactly `expected` (in order), naming the first mismatch.
Status CheckCsvHeader(const CsvTable& t, const std::vector<std::string>& expected);

// Field `col` of `row` as a number; errors name origin, line, column and header name.
Result<double> CsvNumber(const CsvTable& t, const CsvRow& row, size_t col);
Result<int64_t> CsvInteger(const CsvTable& t, const CsvRow& row, size_t col);

}  // namespace elastrain
