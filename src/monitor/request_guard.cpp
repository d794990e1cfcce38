#include "monitor/request_guard.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace elastrain {

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](unsigned char x, unsigned char y) {
           return std::tolower(x) == std::tolower(y);
         });
}

// "::1", "fe80::2": two colons or more; "proxy:8443" has one.
bool IsBareIpv6(std::string_view name) {
  return std::count(name.begin(), name.end(), ':') >= 2 && name.front() != '[';
}

}  // namespace

bool IsLoopbackHost(std::string_view host) {
  return host.rfind("127.", 0) == 0 || host == "::1" || host == "[::1]" || EqualsIgnoreCase(host, "localhost");
}

bool IsWildcardHost(std::string_view host) { return host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]"; }

std::vector<std::string> AllowedHostHeaders(const std::string& bind_host, int port, int default_port,
                                            const std::vector<std::string>& names) {
  std::vector<std::string> out;
  auto add = [&](std::string name) {
    if (name.empty()) return;
    name = Lower(name);
    if (IsBareIpv6(name)) name = "[" + name + "]";
    else if (name.find(':') != std::string::npos && name.front() != '[') {  // "proxy:8443"
      out.push_back(name);
      return;
    } else if (name.front() == '[' && name.find("]:") != std::string::npos) {  // "[::1]:8443"
      out.push_back(name);
      return;
    }
    out.push_back(fmt::format("{}:{}", name, port));
    if (port == default_port) out.push_back(name);
  };
  if (!IsWildcardHost(bind_host)) add(bind_host);
  if (IsLoopbackHost(bind_host)) add("localhost");
  for (const std::string& n : names) add(n);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

bool HostHeaderAllowed(std::string_view host, const std::vector<std::string>& allowed) {
  for (const std::string& a : allowed)
    if (EqualsIgnoreCase(host, a)) return true;
  return false;
}

std::string EscapeForLog(std::string_view text, size_t max_bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  const std::string_view shown = text.substr(0, max_bytes);
  out.reserve(shown.size() + 3);
  for (unsigned char c : shown) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (text.size() > max_bytes) out += "...";
  return out;
}

size_t RequestHeadEnd(std::string_view buffer) {
  // The first blank line: "\n" followed by "\r\n" or "\n".
  for (size_t i = buffer.find('\n'); i != std::string_view::npos; i = buffer.find('\n', i + 1)) {
    if (i + 1 < buffer.size() && buffer[i + 1] == '\n') return i + 2;
    if (i + 2 < buffer.size() && buffer[i + 1] == '\r' && buffer[i + 2] == '\n') return i + 3;
  }
  return std::string_view::npos;
}

std::string_view RequestLine(std::string_view buffer) {
  std::string_view line = buffer.substr(0, buffer.find('\n'));
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

std::optional<std::string_view> RawHeaderValue(std::string_view head, std::string_view name) {
  size_t pos = head.find('\n');  // past the request line
  while (pos != std::string_view::npos && pos + 1 < head.size()) {
    const size_t start = pos + 1;
    const size_t end = head.find('\n', start);
    std::string_view line = head.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) break;  // the blank line: end of the head
    const size_t colon = line.find(':');
    if (colon != std::string_view::npos && EqualsIgnoreCase(line.substr(0, colon), name)) {
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
      while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
      return value;
    }
    pos = end;
  }
  return std::nullopt;
}

bool IsJsonContentType(std::string_view content_type) {
  const size_t semi = content_type.find(';');
  std::string_view media = content_type.substr(0, semi);
  while (!media.empty() && (media.back() == ' ' || media.back() == '\t')) media.remove_suffix(1);
  while (!media.empty() && (media.front() == ' ' || media.front() == '\t')) media.remove_prefix(1);
  return EqualsIgnoreCase(media, "application/json");
}

}  // namespace elastrain
