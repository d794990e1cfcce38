// Who an agent is, learned from the engine that started it where its flags are silent:
//
//   value     flag          Kubernetes (downward API)     Slurm                                    otherwise
//   id        --id          POD_NAME (metadata.name)      <SLURMD_NODENAME>-<SLURM_JOB_ID>.<SLURM_STEP_ID>   <host>-<pid>
//   host      --host-name   NODE_NAME (spec.nodeName)     SLURMD_NODENAME                          hostname
//   address   --address     POD_IP (status.podIP)         (the local address that routes to the store)
//   slots     --slots       -                             SLURM_GPUS_ON_NODE                       (required)
//
// A flag always wins. The address last falls back to the local address of the route to
// the store: the interface the other hosts reach this one by (a UDP connect, no packet).
// Every value is checked, whichever source gave it: an id or host name is 1-253 of
// [A-Za-z0-9._-] (it becomes part of store keys and paths), an address a numeric IPv4
// or IPv6 address, slots 1-4096.
#pragma once

#include <functional>
#include <string>

#include "common/status.h"

namespace elastrain {

struct HostIdentity {
  std::string id, host, address;
  int slots = 0;
  // What gave the values that did not come from flags ("Kubernetes downward API
  // (POD_NAME, NODE_NAME, POD_IP)", "Slurm (SLURMD_NODENAME, ...)"); empty: flags only.
  std::string learned_from;
};

using EnvLookup = std::function<const char*(const char*)>;

// `flags`: what the command line gave ("" and 0 where it gave nothing). The result
// leaves id or host empty where nothing gave one (the agent's own defaults apply) and
// the address empty where only the route to the store can tell (LocalAddressToward).
Result<HostIdentity> ResolveHostIdentity(const HostIdentity& flags, const EnvLookup& getenv);

// The local address of the route to host:port (numeric, or a name resolved once), found
// by connecting a UDP socket: nothing is sent. IPv4 first, then IPv6.
Result<std::string> LocalAddressToward(const std::string& host, int port);

}  // namespace elastrain
