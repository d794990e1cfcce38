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

bool IsJsonContentType(std::string_view content_type) {
  const size_t semi = content_type.find(';');
  std::string_view media = content_type.substr(0, semi);
  while (!media.empty() && (media.back() == ' ' || media.back() == '\t')) media.remove_suffix(1);
  while (!media.empty() && (media.front() == ' ' || media.front() == '\t')) media.remove_prefix(1);
  return EqualsIgnoreCase(media, "application/json");
}

}  // namespace elastrain
