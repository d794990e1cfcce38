#include "cli/store_args.h"

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
}

}  // namespace elastrain
