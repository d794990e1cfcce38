// Shared by the harnesses of fuzz/: a property that fails is a crash the fuzzer reports.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

// Aborts (a crash for libFuzzer, with the input saved) when a harness's property fails.
// Parsers may refuse any input; what they accept must hold these properties.
#define FUZZ_CHECK(cond, what)                                                            \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s\n", __FILE__, __LINE__, what); \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)

namespace elastrain::fuzz {
inline std::string AsString(const unsigned char* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}
}  // namespace elastrain::fuzz
