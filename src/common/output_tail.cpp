#include "common/output_tail.h"

#include <algorithm>

namespace elastrain {

void OutputTail::Append(std::string_view bytes) {
  if (bytes.size() >= max_bytes_) {
    cut_ = cut_ || bytes.size() > max_bytes_ || !kept_.empty();
    kept_.assign(bytes.substr(bytes.size() - max_bytes_));
    return;
  }
  kept_.append(bytes);
  if (kept_.size() > 2 * max_bytes_) {  // amortised: trim once it doubled
    kept_.erase(0, kept_.size() - max_bytes_);
    cut_ = true;
  }
}

namespace {

// The length of the valid UTF-8 sequence at s[i] (2 to 4 bytes), or 0.
size_t Utf8SequenceAt(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  size_t n = 0;
  unsigned min = 0;
  unsigned cp = 0;
  if (c >= 0xc2 && c <= 0xdf) n = 2, cp = c & 0x1f, min = 0x80;
  else if (c >= 0xe0 && c <= 0xef) n = 3, cp = c & 0x0f, min = 0x800;
  else if (c >= 0xf0 && c <= 0xf4) n = 4, cp = c & 0x07, min = 0x10000;
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

}  // namespace

std::string PrintableLine(std::string_view line) {
  std::string out;
  out.reserve(line.size());
  for (size_t i = 0; i < line.size();) {
    const unsigned char c = static_cast<unsigned char>(line[i]);
    if (c == '\t') {
      out += ' ';
      ++i;
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      ++i;
    } else if (const size_t n = c >= 0x80 ? Utf8SequenceAt(line, i) : 0; n > 0) {
      // C1 controls (U+0080..U+009F) are control characters too.
      const bool c1 = c == 0xc2 && static_cast<unsigned char>(line[i + 1]) < 0xa0;
      out += c1 ? std::string("?") : std::string(line.substr(i, n));
      i += n;
    } else {
      out += '?';
      ++i;
    }
  }
  return out;
}

std::vector<std::string> OutputTail::Lines(size_t max_lines) const {
  std::vector<std::string> lines;
  std::string_view rest = kept_;
  if (rest.size() > max_bytes_) rest.remove_prefix(rest.size() - max_bytes_);
  if (cut_ || kept_.size() > max_bytes_) {  // the first line is a fragment (perhaps of a UTF-8 sequence)
    const size_t end = rest.find_first_of("\r\n");
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
  }
  while (!rest.empty()) {
    const size_t end = rest.find_first_of("\r\n");
    std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    std::string printable = PrintableLine(line);
    const size_t first = printable.find_first_not_of(' ');
    if (first == std::string::npos) continue;
    const size_t last = printable.find_last_not_of(' ');
    lines.push_back(printable.substr(first, last - first + 1));
  }
  if (lines.size() > max_lines) lines.erase(lines.begin(), lines.end() - static_cast<std::ptrdiff_t>(max_lines));
  return lines;
}

std::string OutputTail::OneLine(size_t max_lines) const {
  std::string out;
  for (const std::string& l : Lines(max_lines)) out += (out.empty() ? "" : " | ") + l;
  return out;
}

}  // namespace elastrain
