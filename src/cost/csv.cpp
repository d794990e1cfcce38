#include "cost/csv.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <sstream>

namespace elastrain {

namespace {

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// Splits one line into fields; an error names the field where the quoting broke.
Status SplitLine(const std::string& line, const std::string& where, std::vector<std::string>* out) {
  out->clear();
  std::string field;
  bool quoted = false, was_quoted = false;
  for (size_t i = 0; i <= line.size(); ++i) {
    const char c = i < line.size() ? line[i] : ',';
    if (quoted) {
      if (i == line.size())
        return Status::InvalidArgument(
            fmt::format("{}:{}: unterminated quoted field (expected a closing \")", where, out->size() + 1));
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == ',') {
      out->push_back(was_quoted ? field : Trim(field));
      field.clear();
      was_quoted = false;
    } else if (c == '"') {
      if (!Trim(field).empty())
        return Status::InvalidArgument(
            fmt::format("{}:{}: a quote inside an unquoted field (quote the whole field)", where, out->size() + 1));
      field.clear();
      quoted = was_quoted = true;
    } else {
      if (was_quoted && c != ' ' && c != '\t' && c != '\r')
        return Status::InvalidArgument(
            fmt::format("{}:{}: text after a closing quote (expected ',')", where, out->size() + 1));
      if (!was_quoted) field += c;
    }
  }
  return Status::OK();
}

std::string Where(const CsvTable& t, const CsvRow& row, size_t col) {
  return fmt::format("{}:{}:{}", t.origin, row.line, col + 1);
}

}  // namespace

Result<CsvTable> ParseCsv(const std::string& text, const std::string& origin) {
  CsvTable t;
  t.origin = origin;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  std::vector<std::string> fields;
  while (std::getline(in, line)) {
    ++n;
    const std::string trimmed = Trim(line);
    if (trimmed.empty() || trimmed[0] == '#') continue;
    ELASTRAIN_RETURN_IF_ERROR(SplitLine(line, fmt::format("{}:{}", origin, n), &fields));
    if (t.header.empty()) {
      t.header = fields;
      t.header_line = n;
      continue;
    }
    if (fields.size() != t.header.size())
      return Status::InvalidArgument(fmt::format("{}:{}:{}: expected {} fields as in the header (line {}), got {}",
                                                 origin, n, std::min(fields.size(), t.header.size()) + 1,
                                                 t.header.size(), t.header_line, fields.size()));
    t.rows.push_back({n, fields});
  }
  if (t.header.empty()) return Status::InvalidArgument(fmt::format("{}: empty (expected a header line)", origin));
  return t;
}

Status CheckCsvHeader(const CsvTable& t, const std::vector<std::string>& expected) {
  for (size_t i = 0; i < expected.size() || i < t.header.size(); ++i) {
    const std::string got = i < t.header.size() ? t.header[i] : "(nothing)";
    const std::string want = i < expected.size() ? expected[i] : "(nothing)";
    if (got != want) {
      std::string all;
      for (const std::string& e : expected) all += (all.empty() ? "" : ",") + e;
      return Status::InvalidArgument(fmt::format("{}:{}:{}: header column '{}', expected '{}' (header: {})", t.origin,
                                                 t.header_line, i + 1, got, want, all));
    }
  }
  return Status::OK();
}

Result<double> CsvNumber(const CsvTable& t, const CsvRow& row, size_t col) {
  const std::string& s = row.fields[col];
  double v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v))
    return Status::InvalidArgument(
        fmt::format("{}: {}='{}': expected a number", Where(t, row, col), t.header[col], s));
  return v;
}

Result<int64_t> CsvInteger(const CsvTable& t, const CsvRow& row, size_t col) {
  const std::string& s = row.fields[col];
  int64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size())
    return Status::InvalidArgument(
        fmt::format("{}: {}='{}': expected an integer", Where(t, row, col), t.header[col], s));
  return v;
}

}  // namespace elastrain
