// OpenStore: the --store URL to a Store. An etcd store is checked at once (one revision
// read, bounded by the request timeout; with a user, the authentication first) so that a
// wrong address or credential fails at startup with the URL in the message, not later
// inside the controller or a rendezvous.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "common/log.h"
#include "store/store.h"

namespace elastrain {

namespace {

constexpr char kExpected[] = "expected memory://, etcd://HOST:PORT or etcds://HOST:PORT";

Status BadUrl(const std::string& url, const std::string& why = "") {
  return Status::InvalidArgument("--store '" + url + "': " + kExpected + (why.empty() ? "" : " (" + why + ")"));
}

}  // namespace

Result<StoreAddress> ParseStoreUrl(const std::string& url) {
  StoreAddress a;
  if (url == "memory://") return a;
  std::string hostport;
  for (const auto& [scheme, tls] : {std::pair<std::string, bool>{"etcd://", false}, {"etcds://", true}}) {
    if (url.compare(0, scheme.size(), scheme) == 0) {
      a.kind = StoreAddress::Kind::kEtcd;
      a.tls = tls;
      hostport = url.substr(scheme.size());
    }
  }
  if (a.kind != StoreAddress::Kind::kEtcd) return BadUrl(url);
  if (!hostport.empty() && hostport.back() == '/') hostport.pop_back();  // "etcd://h:2379/"
  const size_t colon = hostport.rfind(':');
  if (colon == std::string::npos) return BadUrl(url, "the port is missing");
  std::string host = hostport.substr(0, colon);
  const std::string port_text = hostport.substr(colon + 1);
  // "[::1]:2379": brackets only delimit an IPv6 address; the client wants it bare.
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) return BadUrl(url, "the host is missing");
  if (host.find_first_of("/[]") != std::string::npos) return BadUrl(url, "bad host '" + host + "'");
  int port = 0;
  const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() || port < 1 ||
      port > 65535)
    return BadUrl(url, "port '" + port_text + "': expected 1..65535");
  a.host = std::move(host);
  a.port = port;
  return a;
}

bool IsLoopbackHost(const std::string& host) {
  std::string lower = host;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "localhost" || lower == "localhost.") return true;
  in_addr v4{};
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (::inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

Result<std::shared_ptr<Store>> OpenStore(const std::string& url, const StoreOptions& opt) {
  ELASTRAIN_ASSIGN_OR_RETURN(StoreAddress a, ParseStoreUrl(url));
  if (a.kind == StoreAddress::Kind::kMemory) return MakeMemoryStore();
  ELASTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<Store> store, MakeEtcdStore(a.host, a.port, opt, a.tls));
  Result<int64_t> revision = store->Revision();
  if (!revision.ok()) return revision.status();
  LOG_DEBUG("store: connected to {} (revision {})", store->url(), *revision);
  return store;
}

}  // namespace elastrain
