// The rendezvous stores ProcessGroup::Connect (comm/process_group.h) meets its peers
// through, both Gloo's rendezvous::Store (set / get / wait with a timeout):
//   MakeFileStore  files in a directory: embedded mode, every rank on this machine;
//   MakeGlooStore  keys of an elastrain Store (store/store.h): etcd in cluster mode.
// Both factories live here, in comm/ (the Gloo runtime), so that store/ -- the
// coordination store the controller and the agents use -- does not link Gloo.
// Gloo expects its store to throw (it catches gloo::IoException around connectFullMesh),
// so these are the one place where store errors become exceptions; ProcessGroup turns
// them back into a Status.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "store/store.h"

namespace gloo::rendezvous {
class Store;
}  // namespace gloo::rendezvous

namespace elastrain {

// A rendezvous store backed by files under `dir` (created if missing). Any number of
// processes on this machine (or on a shared filesystem) may open the same dir.
Result<std::shared_ptr<gloo::rendezvous::Store>> MakeFileStore(const std::string& dir);

// Gloo's rendezvous::Store over `store`, every key under `prefix`. get() and wait() poll
// until the keys exist or the timeout passes, then throw gloo::IoException as Gloo's own
// stores do. So ProcessGroup::Connect rendezvouses through etcd in cluster mode exactly
// as through the file store in embedded mode.
std::shared_ptr<gloo::rendezvous::Store> MakeGlooStore(std::shared_ptr<Store> store, std::string prefix,
                                                       const StoreOptions& opt = {});

}  // namespace elastrain
