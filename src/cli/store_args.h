// The flags that say how to reach the store, for every command that takes --store.
#pragma once

#include <CLI/CLI.hpp>

#include "store/store.h"

namespace elastrain {

// Adds --store-ca, --store-cert, --store-key, --store-user and --store-password-file to
// `app`, writing into *opt (which must outlive the parse). Each starts from its
// ELASTRAIN_ETCD_* variable, read through `getenv`, so a flag given wins over the
// environment. Sets opt->key_scope to elastrain's key prefix (wire/protocol.h keys::kRoot).
// There is no flag for the password itself: argv is visible to every user of the host.
void AddStoreOptions(CLI::App& app, StoreOptions* opt,
                     const std::function<const char*(const char*)>& getenv = std::getenv);

// --store-wait SECONDS, for the long-running commands (head, agent): a cluster whose
// pieces start in any order (Kubernetes pods, a batch script) retries a store that does
// not answer yet instead of exiting.
void AddStoreWaitOption(CLI::App& app, double* seconds);

// OpenStore, tried again every second while the store is unreachable (Unavailable) for
// up to `wait_seconds`; any other error (a refused certificate, a bad URL) at once.
Result<std::shared_ptr<Store>> OpenStoreWaiting(const std::string& url, const StoreOptions& opt,
                                                double wait_seconds);

}  // namespace elastrain
