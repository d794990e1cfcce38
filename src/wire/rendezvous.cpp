#include "wire/rendezvous.h"

namespace elastrain {

namespace {
constexpr char kFileScheme[] = "file:";
constexpr char kEtcdScheme[] = "etcd://";
constexpr char kEtcdTlsScheme[] = "etcds://";
bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }
}  // namespace

bool IsEtcdRendezvousUrl(const std::string& store_url) {
  return StartsWith(store_url, kEtcdScheme) || StartsWith(store_url, kEtcdTlsScheme);
}

RendezvousAddress RendezvousAddress::File(std::string dir) {
  RendezvousAddress a;
  a.kind = Kind::kFile;
  a.dir = std::move(dir);
  return a;
}

RendezvousAddress RendezvousAddress::Etcd(std::string store_url, std::string prefix) {
  RendezvousAddress a;
  a.kind = Kind::kEtcd;
  a.store_url = std::move(store_url);
  a.prefix = std::move(prefix);
  return a;
}

Result<RendezvousAddress> RendezvousAddress::Parse(const std::string& text) {
  const Status bad = Status::InvalidArgument("rendezvous '" + text.substr(0, 200) +
                                             "': expected file:<dir> or etcd[s]://host:port/<prefix>");
  if (StartsWith(text, kFileScheme)) {
    std::string dir = text.substr(sizeof(kFileScheme) - 1);
    if (dir.empty()) return bad;
    return File(std::move(dir));
  }
  if (!IsEtcdRendezvousUrl(text)) return bad;
  const size_t host_at = text.find("://") + 3;
  const size_t slash = text.find('/', host_at);
  if (text.size() == host_at || slash == host_at) return bad;  // no host
  if (slash == std::string::npos) return Etcd(text, "");
  return Etcd(text.substr(0, slash), text.substr(slash + 1));
}

std::string RendezvousAddress::ToString() const {
  if (kind == Kind::kFile) return kFileScheme + dir;
  return prefix.empty() ? store_url : store_url + "/" + prefix;
}

}  // namespace elastrain
