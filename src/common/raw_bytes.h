// Fixed-width values in byte strings, in the machine's (little-endian) order: the headers
// of elastrain's own binary files (the token cache, data prepare's part files).
#pragma once

#include <cstring>
#include <string>

namespace elastrain {

template <typename T>
void PutRaw(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}
// The T at `offset` of `in`; the caller has checked that in.size() >= offset + sizeof(T).
template <typename T>
T GetRaw(const std::string& in, size_t offset) {
  T v;
  std::memcpy(&v, in.data() + offset, sizeof(v));
  return v;
}

}  // namespace elastrain
