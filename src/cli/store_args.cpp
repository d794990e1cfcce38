#include "cli/store_args.h"

#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "common/log.h"
#include "wire/protocol.h"

namespace elastrain {

void AddStoreOptions(CLI::App& app, StoreOptions* opt, const std::function<const char*(const char*)>& getenv) {
  opt->key_scope = keys::kRoot;
  FillStoreCredentialsFromEnv(opt, getenv);
  const auto env = [](const char* name) { return std::string(" (default: $") + name + ")"; };
  app.add_option("--store-ca", opt->ca_file,
                 "etcds://: PEM CA that signed etcd's certificate; else the system's CAs" + env(kEnvEtcdCa));
  app.add_option("--store-cert", opt->cert_file,
                 "etcds://: PEM client certificate for etcd --client-cert-auth" + env(kEnvEtcdCert));
  app.add_option("--store-key", opt->key_file, "etcds://: its private key, mode 0600" + env(kEnvEtcdKey));
  app.add_option("--store-user", opt->user, "etcds://: etcd user, when etcd auth is enabled" + env(kEnvEtcdUser));
  app.add_option("--store-password-file", opt->password_file,
                 "etcds://: file whose first line is that user's password, mode 0600" + env(kEnvEtcdPasswordFile));
  app.add_flag("--insecure-store", opt->insecure_store,
               "accept plain etcd:// to a host that is not loopback (anyone on the network can read and rewrite "
               "the job's keys; a private test network only)");
}

Status CheckStoreTransport(const std::string& url, const StoreOptions& opt) {
  auto a = ParseStoreUrl(url);
  if (!a.ok()) return a.status();  // OpenStore says the same, with the accepted forms
  if (a->kind != StoreAddress::Kind::kEtcd || a->tls || IsLoopbackHost(a->host)) return Status::OK();
  const std::string risk = fmt::format(
      "plain etcd:// to {}:{}, which is not loopback: the job's keys (its spec, plan and commands) travel in clear, "
      "and anyone who can reach that address can read and rewrite them",
      a->host, a->port);
  if (!opt.insecure_store)
    return Status::InvalidArgument(fmt::format(
        "--store '{}': {}; use etcds://HOST:PORT with client certificates and an etcd user (docs/etcd-tls.md), "
        "or pass --insecure-store to accept that risk on a private network",
        url, risk));
  LOG_WARN("--insecure-store: {}; use etcds:// (docs/etcd-tls.md) anywhere but a private test network", risk);
  return Status::OK();
}

void AddStoreWaitOption(CLI::App& app, double* seconds) {
  app.add_option("--store-wait", *seconds,
                 "seconds to keep trying a store that does not answer yet (pieces of a cluster starting in any "
                 "order); 0: fail at once")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
}

Result<std::shared_ptr<Store>> OpenStoreWaiting(const std::string& url, const StoreOptions& opt,
                                                double wait_seconds) {
  ELASTRAIN_RETURN_IF_ERROR(CheckStoreTransport(url, opt));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_seconds);
  bool told = false;
  for (;;) {
    auto store = OpenStore(url, opt);
    if (store.ok() || store.status().code() != StatusCode::kUnavailable ||
        std::chrono::steady_clock::now() >= deadline) {
      if (!store.ok() && told && store.status().code() == StatusCode::kUnavailable)
        return Status::Unavailable(fmt::format("{} (still, after --store-wait {} s)", store.status().message(),
                                               wait_seconds));
      return store;
    }
    if (!told) LOG_WARN("{}; trying again every second for up to {} s (--store-wait)", store.status().message(), wait_seconds);
    told = true;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

}  // namespace elastrain
