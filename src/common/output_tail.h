// The end of what a child process wrote (its stderr), kept within a bound, and its last
// lines made printable: a failed program's error names its cause (a Python traceback's
// last line, "No module named ...") instead of only its exit code.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace elastrain {

inline constexpr size_t kOutputTailBytes = 2048;  // what a failed program's error quotes at most
inline constexpr size_t kOutputTailLines = 10;

// Keeps the last `max_bytes` of a byte stream. Thread-safety: none.
class OutputTail {
 public:
  explicit OutputTail(size_t max_bytes = kOutputTailBytes) : max_bytes_(max_bytes) {}
  void Append(std::string_view bytes);
  // The last `max_lines` non-blank lines of the kept bytes ('\n' and '\r' end a line; a
  // first line cut by the bound is dropped), each trimmed and made printable
  // (PrintableLine). Empty when nothing printable was written.
  std::vector<std::string> Lines(size_t max_lines = kOutputTailLines) const;
  // The lines joined by " | " (one line, for an error message or an event), or "".
  std::string OneLine(size_t max_lines = kOutputTailLines) const;

 private:
  size_t max_bytes_;
  std::string kept_;
  bool cut_ = false;  // bytes before kept_ were dropped
};

// `line` with every control character (tabs as a space) and every byte that is not part
// of valid UTF-8 replaced by '?': safe for a terminal, a log line and JSON.
std::string PrintableLine(std::string_view line);

}  // namespace elastrain
