// The etcd store's credentials, checked once when it is made (internal to store/; the
// public side is StoreOptions and the ELASTRAIN_ETCD_* variables in store.h).
#pragma once

#include <string>

#include "common/status.h"
#include "store/store.h"

namespace elastrain {

struct EtcdCredentials {
  std::string ca_file, cert_file, key_file;  // as in StoreOptions, checked
  std::string user;
  std::string password;  // read from StoreOptions::password_file; never logged
};

// Checks `opt`'s credentials for a store at `url` (`tls`: etcds://): no credential with
// plain etcd://; cert and key together; user and password file together; every file a
// readable regular file; the key and password files unreadable by group and others.
// Errors name the URL, the flag and variable, the file and a fix.
Result<EtcdCredentials> LoadEtcdCredentials(const std::string& url, const StoreOptions& opt, bool tls);

}  // namespace elastrain
