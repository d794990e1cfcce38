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

}  // namespace elastrain
