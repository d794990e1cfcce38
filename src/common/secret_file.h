// Files that hold a secret (the API token, a private key, a password) come in two kinds:
//   - a file of one's own: regular, owned by this user, readable by nobody else (each
//     reader states its own mode rule);
//   - a mounted secret, as Kubernetes mounts a Secret volume: a read-only file system
//     (nobody can swap or rewrite the file there), root-owned files reached through
//     symbolic links (..data/), group-readable for the pod's fsGroup.
// CheckMountedSecret decides the second kind for an open file: true when the file sits on
// a read-only file system and passes its rule (owned by root or this user; nothing for
// others; no write bit but the owner's; group bits only read, and only for a group this
// process is in); false when it is not on a read-only file system (apply the rule of a
// file of one's own); an error naming the file when it is, but breaks the rule.
#pragma once

#include <string>

#include "common/status.h"

namespace elastrain {

// `what` names the file in errors, e.g. "the API token file /etc/elastrain/api/token".
Result<bool> CheckMountedSecret(int fd, const std::string& what);
// The same for a path (opened read-only, following links).
Result<bool> CheckMountedSecretPath(const std::string& path, const std::string& what);

}  // namespace elastrain
