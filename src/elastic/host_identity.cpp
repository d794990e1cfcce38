#include "elastic/host_identity.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "common/safe_path.h"

namespace elastrain {

namespace {

// The value of `name` in the environment, "" when unset.
std::string Env(const EnvLookup& getenv, const char* name) {
  const char* v = getenv(name);
  return v ? std::string(v) : std::string();
}

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-';
}

Status CheckName(const std::string& value, const std::string& what) {
  bool ok = !value.empty() && value.size() <= 253;
  for (char c : value) ok = ok && IsNameChar(c);
  if (ok) return Status::OK();
  return Status::InvalidArgument(fmt::format("{} is '{}'; expected 1-253 characters of A-Z a-z 0-9 . _ -", what,
                                             value.substr(0, 80)));
}

Status CheckAddress(const std::string& value, const std::string& what) {
  unsigned char buf[sizeof(in6_addr)];
  if (inet_pton(AF_INET, value.c_str(), buf) == 1 || inet_pton(AF_INET6, value.c_str(), buf) == 1)
    return Status::OK();
  return Status::InvalidArgument(
      fmt::format("{} is '{}'; expected a numeric IPv4 or IPv6 address", what, value.substr(0, 80)));
}

// One value: the flag's when given, else the first set variable of `vars`.
struct Pick {
  std::string value, source;  // source: "--id" or the variable's name
};
Pick Choose(const std::string& flag_value, const char* flag, const EnvLookup& getenv,
            std::initializer_list<const char*> vars) {
  if (!flag_value.empty()) return {flag_value, flag};
  for (const char* v : vars)
    if (std::string e = Env(getenv, v); !e.empty()) return {e, v};
  return {};
}

}  // namespace

Result<HostIdentity> ResolveHostIdentity(const HostIdentity& flags, const EnvLookup& getenv) {
  HostIdentity out;
  std::vector<std::string> learned;
  auto note = [&learned](const Pick& p, const char* flag) {
    if (!p.source.empty() && p.source != flag) learned.push_back(p.source);
  };

  const Pick host = Choose(flags.host, "--host-name", getenv, {"NODE_NAME", "SLURMD_NODENAME"});
  if (!host.value.empty()) {
    ELASTRAIN_RETURN_IF_ERROR(CheckName(host.value, "the host name (" + host.source + ")"));
    out.host = host.value;
    note(host, "--host-name");
  }

  Pick id = Choose(flags.id, "--id", getenv, {"POD_NAME"});
  if (id.value.empty()) {
    // One agent per node and step: a requeued or relaunched step is a new agent.
    const std::string node = Env(getenv, "SLURMD_NODENAME"), job = Env(getenv, "SLURM_JOB_ID"),
                      step = Env(getenv, "SLURM_STEP_ID");
    if (!node.empty() && !job.empty())
      id = {fmt::format("{}-{}{}", node, job, step.empty() ? "" : "." + step), "SLURM_JOB_ID"};
  }
  if (!id.value.empty()) {
    ELASTRAIN_RETURN_IF_ERROR(CheckName(id.value, "the agent id (" + id.source + ")"));
    out.id = id.value;
    note(id, "--id");
  }

  const Pick address = Choose(flags.address, "--address", getenv, {"POD_IP"});
  if (!address.value.empty()) {
    ELASTRAIN_RETURN_IF_ERROR(CheckAddress(address.value, "the address (" + address.source + ")"));
    out.address = address.value;
    note(address, "--address");
  }

  if (flags.slots > 0) {
    out.slots = flags.slots;
  } else if (std::string gpus = Env(getenv, "SLURM_GPUS_ON_NODE"); !gpus.empty()) {
    int n = 0;
    const auto [end, ec] = std::from_chars(gpus.data(), gpus.data() + gpus.size(), n);
    if (ec != std::errc() || end != gpus.data() + gpus.size() || n < 1 || n > 4096)
      return Status::InvalidArgument(
          fmt::format("SLURM_GPUS_ON_NODE is '{}'; expected a count 1-4096 (or pass --slots)", gpus.substr(0, 40)));
    out.slots = n;
    learned.push_back("SLURM_GPUS_ON_NODE");
  } else {
    return Status::InvalidArgument("--slots is required (how many workers this host runs); under Slurm it defaults "
                                   "to SLURM_GPUS_ON_NODE when the job asks for GPUs");
  }

  if (!learned.empty()) {
    std::string names;
    for (const std::string& n : learned) names += (names.empty() ? "" : ", ") + n;
    const bool k8s = !Env(getenv, "POD_NAME").empty() || !Env(getenv, "NODE_NAME").empty() ||
                     !Env(getenv, "POD_IP").empty();
    out.learned_from = fmt::format("{} ({})", k8s ? "the Kubernetes downward API" : "Slurm", names);
  }
  return out;
}

namespace {

// The local address of the route to the first address of `family` that `host` has, ""
// when it has none or none routes; *err says why.
std::string LocalAddressOfFamily(const std::string& host, int port, int family, std::string* err) {
  addrinfo hints{};
  hints.ai_family = family;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0) {
    *err = gai_strerror(rc);
    return "";
  }
  std::string found;
  for (addrinfo* ai = res; ai != nullptr && found.empty(); ai = ai->ai_next) {
    UniqueFd fd(::socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    if (fd.get() < 0 || ::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 ||
        ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &len) != 0) {
      *err = std::strerror(errno);
      continue;
    }
    char text[INET6_ADDRSTRLEN] = {};
    const void* a = local.ss_family == AF_INET
                        ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
                        : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
    if (inet_ntop(local.ss_family, a, text, sizeof(text)) != nullptr) found = text;
  }
  freeaddrinfo(res);
  return found;
}

}  // namespace

Result<std::string> LocalAddressToward(const std::string& host, int port) {
  // IPv4 first: "localhost" often resolves to ::1 before 127.0.0.1, and the workers'
  // ports are IPv4 (a host reached only over IPv6 still gets its IPv6 address).
  std::string err = "no address";
  for (int family : {AF_INET, AF_INET6})
    if (std::string a = LocalAddressOfFamily(host, port, family, &err); !a.empty()) return a;
  return Status::InvalidArgument(fmt::format("cannot tell this host's address toward the store {}:{} ({}); pass "
                                             "--address",
                                             host, port, err));
}

}  // namespace elastrain
