// Encoding for etcd's JSON gateway: base64 for proto `bytes`, prefix ranges, and the
// readers of proto3 JSON, which omits default values.
#include "store/etcd_codec.h"

#include <charconv>

namespace elastrain {

using json = nlohmann::json;

// --- base64 (RFC 4648 with padding), what grpc-gateway uses for `bytes` ---------------

namespace {

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

}  // namespace

std::string Base64Encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    out += {kB64[v >> 18], kB64[(v >> 12) & 63], kB64[(v >> 6) & 63], kB64[v & 63]};
  }
  if (i + 1 == in.size()) {
    const uint32_t v = uint8_t(in[i]) << 16;
    out += {kB64[v >> 18], kB64[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += {kB64[v >> 18], kB64[(v >> 12) & 63], kB64[(v >> 6) & 63], '='};
  }
  return out;
}

namespace {

int B64Digit(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;  // also accept the URL-safe alphabet
  if (c == '/' || c == '_') return 63;
  return -1;
}

}  // namespace

// nullopt on a character outside the alphabet or a dangling single digit.
std::optional<std::string> Base64Decode(std::string_view in) {
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  std::string out;
  out.reserve(in.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    const int d = B64Digit(c);
    if (d < 0) return std::nullopt;
    acc = (acc << 6) | uint32_t(d);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += char((acc >> bits) & 0xff);
    }
  }
  if (bits >= 6) return std::nullopt;  // 1 digit left over: not a whole byte
  return out;
}

// ---------------------------------------------------------------------------------------

// etcd's prefix convention: range_end is the prefix with its last byte incremented
// (trailing 0xff bytes dropped first); "\0" means "to the end of the keyspace".
std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    const auto c = static_cast<unsigned char>(prefix.back());
    if (c < 0xff) {
      prefix.back() = static_cast<char>(c + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');
}

// etcd rejects an empty key, so "every key" is the range ["\0", "\0"-meaning-end).
std::string PrefixStart(const std::string& prefix) { return prefix.empty() ? std::string(1, '\0') : prefix; }

// int64 fields arrive as strings ("42"); absent means 0.
int64_t Int(const json& obj, const char* field) {
  if (!obj.is_object()) return 0;
  auto it = obj.find(field);
  if (it == obj.end()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (!it->is_string()) return 0;
  const auto& s = it->get_ref<const std::string&>();
  int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

std::string Str(const json& obj, const char* field) {
  if (!obj.is_object()) return "";
  auto it = obj.find(field);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

// For messages: keys are text in practice, but a binary byte must not garble a log line.
std::string Printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

}  // namespace elastrain
