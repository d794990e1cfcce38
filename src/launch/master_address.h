// MASTER_ADDR and MASTER_PORT of one generation of a launched job: rank 0's worker picks
// a free port on its host and publishes "address:port" in the generation's rendezvous
// store (the file store in embedded mode, etcd in a cluster); the other ranks' workers
// wait for it. The program's own rank 0 then binds the port (PyTorch's TCPStore, JAX's
// coordinator), as under torchrun with TORCHELASTIC_USE_AGENT_STORE=False.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "common/status.h"
#include "wire/rendezvous.h"

namespace gloo::rendezvous {
class Store;
}

namespace elastrain {

class MasterAddress {
 public:
  // The rendezvous store of `generation` (credentials for etcd from ELASTRAIN_ETCD_*).
  static Result<MasterAddress> Open(const RendezvousAddress& rdzv, int64_t generation);

  // Rank 0: a free TCP port on `address` (bound, read, released), not yet published.
  Result<std::pair<std::string, int>> Pick(const std::string& address);
  // Rank 0: publishes what Pick chose.
  Status Publish();
  // The other ranks: rank 0's "address:port", checked. Looks every 100 ms for up to
  // `timeout_seconds` (then DeadlineExceeded); between looks `keep_going()` (answer the
  // agent, tick) may give up (then Cancelled).
  Result<std::pair<std::string, int>> Await(double timeout_seconds, const std::function<bool()>& keep_going);

 private:
  std::shared_ptr<gloo::rendezvous::Store> store_;
  std::string key_;
  std::string value_;  // "address:port" once picked
};

// Whether some socket of this host listens on TCP `port` (/proc/net/tcp and tcp6).
bool PortListening(int port);

}  // namespace elastrain
