// Credentials for etcd: the ELASTRAIN_ETCD_* environment and the checks of the files.
#include "store/etcd_credentials.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "common/secret_file.h"

namespace elastrain {

namespace {

// One credential: where it lives in StoreOptions, its flag and its variable.
struct CredentialField {
  std::string StoreOptions::*field;
  const char* flag;
  const char* env;
};

constexpr CredentialField kFields[] = {
    {&StoreOptions::ca_file, "--store-ca", kEnvEtcdCa},
    {&StoreOptions::cert_file, "--store-cert", kEnvEtcdCert},
    {&StoreOptions::key_file, "--store-key", kEnvEtcdKey},
    {&StoreOptions::user, "--store-user", kEnvEtcdUser},
    {&StoreOptions::password_file, "--store-password-file", kEnvEtcdPasswordFile},
};

std::string Source(const CredentialField& f) { return std::string(f.flag) + " or " + f.env; }

const CredentialField& FieldOf(std::string StoreOptions::*field) {
  for (const auto& f : kFields)
    if (f.field == field) return f;
  return kFields[0];  // unreachable: every field is in the table
}

// A regular file this process can read; `secret`: neither group nor others may read it.
Status CheckFile(const std::string& url, std::string StoreOptions::*field, const std::string& path, bool secret) {
  const CredentialField& f = FieldOf(field);
  const std::string what = url + ": " + Source(f) + " '" + path + "'";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return Status::InvalidArgument(what + ": " + std::strerror(errno) + ": expected a readable PEM file");
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument(what + ": not a regular file");
  if (secret) {
    // A Kubernetes Secret volume (read-only, group-readable for the pod's fsGroup) has
    // its own rule (common/secret_file.h).
    auto mounted = CheckMountedSecretPath(path, what);
    if (!mounted.ok()) return mounted.status();
    if (mounted.value()) return Status::OK();
  }
  if (secret && (st.st_mode & (S_IRGRP | S_IROTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Status::InvalidArgument(what + " is readable by group or others (mode " + mode +
                                   "): expected a private file (chmod 600 " + path + ")");
  }
  if (::access(path.c_str(), R_OK) != 0)
    return Status::InvalidArgument(what + ": " + std::strerror(errno) + ": expected a file this user can read");
  return Status::OK();
}

}  // namespace

void FillStoreCredentialsFromEnv(StoreOptions* opt, const std::function<const char*(const char*)>& getenv) {
  for (const auto& f : kFields) {
    std::string& value = opt->*f.field;
    if (!value.empty()) continue;
    if (const char* env = getenv(f.env); env != nullptr) value = env;
  }
}

std::map<std::string, std::string> StoreCredentialsEnv(const StoreOptions& opt) {
  std::map<std::string, std::string> env;
  for (const auto& f : kFields)
    if (!(opt.*f.field).empty()) env[f.env] = opt.*f.field;
  return env;
}

Result<EtcdCredentials> LoadEtcdCredentials(const std::string& url, const StoreOptions& opt, bool tls) {
  EtcdCredentials c{opt.ca_file, opt.cert_file, opt.key_file, opt.user, ""};
  if (!tls) {
    for (const auto& f : kFields)
      if (!(opt.*f.field).empty())
        return Status::InvalidArgument(url + ": " + Source(f) +
                                       " is set but the store is plain HTTP, where credentials travel in "
                                       "clear: use etcds://HOST:PORT (or unset it)");
    return c;
  }
  if (opt.cert_file.empty() != opt.key_file.empty())
    return Status::InvalidArgument(url + ": a client certificate needs both " + Source(FieldOf(&StoreOptions::cert_file)) +
                                   " and " + Source(FieldOf(&StoreOptions::key_file)) + "; only one is set");
  if (opt.user.empty() != opt.password_file.empty())
    return Status::InvalidArgument(url + ": etcd authentication needs both " + Source(FieldOf(&StoreOptions::user)) +
                                   " and " + Source(FieldOf(&StoreOptions::password_file)) + "; only one is set");
  if (!opt.ca_file.empty()) ELASTRAIN_RETURN_IF_ERROR(CheckFile(url, &StoreOptions::ca_file, opt.ca_file, false));
  if (!opt.cert_file.empty()) {
    ELASTRAIN_RETURN_IF_ERROR(CheckFile(url, &StoreOptions::cert_file, opt.cert_file, false));
    ELASTRAIN_RETURN_IF_ERROR(CheckFile(url, &StoreOptions::key_file, opt.key_file, true));
  }
  if (!opt.user.empty()) {
    ELASTRAIN_RETURN_IF_ERROR(CheckFile(url, &StoreOptions::password_file, opt.password_file, true));
    std::ifstream in(opt.password_file);
    std::getline(in, c.password);
    while (!c.password.empty() && c.password.back() == '\r') c.password.pop_back();  // a file from Windows
    if (c.password.empty())
      return Status::InvalidArgument(url + ": " + Source(FieldOf(&StoreOptions::password_file)) + " '" +
                                     opt.password_file + "': expected the password on its first line");
  }
  return c;
}

}  // namespace elastrain
