// The flags that say how to reach the store, for every command that takes --store.
#pragma once

#include <CLI/CLI.hpp>

#include "store/store.h"

namespace elastrain {

// Adds --store-ca, --store-cert, --store-key, --store-user, --store-password-file and
// --insecure-store to `app`, writing into *opt (which must outlive the parse). Each
// credential starts from its ELASTRAIN_ETCD_* variable, read through `getenv`, so a flag
// given wins over the environment. Sets opt->key_scope to elastrain's key prefix
// (wire/protocol.h keys::kRoot).
// There is no flag for the password itself: argv is visible to every user of the host.
void AddStoreOptions(CLI::App& app, StoreOptions* opt,
                     const std::function<const char*(const char*)>& getenv = std::getenv);

// Plain etcd:// to a host that is not loopback (IsLoopbackHost) is refused, naming the
// risk and --insecure-store (AddStoreOptions sets opt.insecure_store); with the flag it
// is accepted with a logged warning. etcds://, memory:// and loopback need nothing.
// OpenStoreWaiting calls it first, so every command that takes --store checks it.
Status CheckStoreTransport(const std::string& url, const StoreOptions& opt);

// --store-wait SECONDS, for the long-running commands (head, agent): a cluster whose
// pieces start in any order (Kubernetes pods, a batch script) retries a store that does
// not answer yet instead of exiting.
void AddStoreWaitOption(CLI::App& app, double* seconds);

// OpenStore, tried again every second while the store is unreachable (Unavailable) for
// up to `wait_seconds`; any other error (a refused certificate, a bad URL) at once.
Result<std::shared_ptr<Store>> OpenStoreWaiting(const std::string& url, const StoreOptions& opt,
                                                double wait_seconds);

}  // namespace elastrain
