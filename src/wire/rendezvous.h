// Where the workers of a generation meet (Gloo's rendezvous store), as the controller
// tells them in the plan: a directory on a shared file system (embedded mode) or a key
// prefix in the cluster's etcd. On the wire it is one string, "file:<dir>" or
// "etcd://host:port/<prefix>" ("etcds://" over TLS), parsed here once. Credentials never
// travel in it: workers take them from the ELASTRAIN_ETCD_* environment (store/store.h).
#pragma once

#include <string>

#include "common/status.h"

namespace elastrain {

struct RendezvousAddress {
  enum class Kind { kFile, kEtcd };
  Kind kind = Kind::kFile;
  std::string dir;        // kFile: the directory
  std::string store_url;  // kEtcd: "etcd://host:port" or "etcds://host:port" (store/store.h OpenStore)
  std::string prefix;     // kEtcd: the key prefix

  static RendezvousAddress File(std::string dir);
  static RendezvousAddress Etcd(std::string store_url, std::string prefix);
  // "file:<dir>" or "etcd[s]://host:port/<prefix>"; anything else is refused, naming it.
  static Result<RendezvousAddress> Parse(const std::string& text);
  std::string ToString() const;
  bool operator==(const RendezvousAddress& o) const {
    return kind == o.kind && dir == o.dir && store_url == o.store_url && prefix == o.prefix;
  }
};

// Whether workers can rendezvous in the store at `store_url` (etcd:// or etcds://; an
// in-process memory:// store is not reachable from them).
bool IsEtcdRendezvousUrl(const std::string& store_url);

}  // namespace elastrain
