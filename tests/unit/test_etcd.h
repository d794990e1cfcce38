// etcd for unit tests: EtcdServer starts one on free loopback ports (the fixture of
// store_test.cpp; any suite that needs a real etcd uses the same), skipped by the caller
// when kEtcdBinary is not installed. StartTls starts one that serves only HTTPS, demands
// client certificates and has etcd's authentication on (docs/etcd-tls.md).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "store/store.h"
#include "test_dirs.h"

namespace elastrain {

inline constexpr char kEtcdBinary[] = "/usr/bin/etcd";

// A loopback port that was free a moment ago (bind to port 0, read it, close). Another
// process may take it before etcd binds, so the caller retries on a failed start.
inline int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

inline std::string Tail(const std::string& path, size_t max_chars = 2000) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  return s.size() > max_chars ? s.substr(s.size() - max_chars) : s;
}

// A single-member etcd on loopback for a test suite (the unit tests' one etcd launcher;
// the integration tests have tests/integration/etcd_lib.sh). Its data and log live in a
// ScopedTempDir, removed with this object or by RemoveDir; it dies with the test binary (PR_SET_PDEATHSIG). Not thread-safe:
// start and stop it from the suite's set-up and tear-down.
class EtcdServer {
 public:
  // Starts etcd on free loopback ports (3 tries) and waits until it answers (15 s).
  bool Start(std::string* error) {
    dir_ = scratch_.emplace("etcd").path();
    return Launch(error);
  }

  // As Start, over TLS: certificates from `source_dir`/scripts/make_certs.sh (needs bash
  // and openssl), https only, --client-cert-auth, and authentication enabled with users
  // root (role root) and elastrain (role elastrain: readwrite on the prefix "elastrain/").
  // A token lives `token_ttl_seconds` unused.
  bool StartTls(const std::string& source_dir, int token_ttl_seconds, std::string* error) {
    dir_ = scratch_.emplace("etcds").path();
    tls_ = true;
    token_ttl_seconds_ = token_ttl_seconds;
    const std::string script = source_dir + "/scripts/make_certs.sh";
    if (std::system(("bash '" + script + "' '" + certs() + "' >'" + dir_ + "/certs.log' 2>&1").c_str()) != 0) {
      *error = script + " failed: " + Tail(dir_ + "/certs.log");
      return false;
    }
    for (const auto& [user, password] : {std::pair<std::string, std::string>{"root", "root-password"},
                                         {"elastrain", "elastrain-password"}}) {
      std::ofstream(PasswordFile(user)) << password << "\n";
      std::filesystem::permissions(PasswordFile(user), std::filesystem::perms::owner_read |
                                                           std::filesystem::perms::owner_write);
    }
    return Launch(error) && EnableAuth(error);
  }

  // What a client of the TLS etcd passes: the CA, the CN-less client certificate and,
  // unless `user` is empty, that user and its password file.
  StoreOptions ClientOptions(const std::string& user) const {
    StoreOptions opt;
    opt.ca_file = certs() + "/ca.crt";
    opt.cert_file = certs() + "/etcd-client.crt";
    opt.key_file = certs() + "/etcd-client.key";
    opt.user = user;
    if (!user.empty()) opt.password_file = PasswordFile(user);
    return opt;
  }
  std::string certs() const { return dir_ + "/certs"; }
  std::string PasswordFile(const std::string& user) const { return dir_ + "/" + user + ".password"; }
  bool tls() const { return tls_; }

  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() >= deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid_ = -1;
  }

  void RemoveDir() { scratch_.reset(); }

  int port() const { return port_; }

 private:
  bool Launch(std::string* error) {
    for (int attempt = 0; attempt < 3; ++attempt) {
      const int client = FreePort();
      const int peer = FreePort();
      if (client == 0 || peer == 0 || client == peer) continue;
      const std::string log = dir_ + "/etcd" + std::to_string(attempt) + ".log";
      if (Spawn(client, peer, dir_ + "/data" + std::to_string(attempt), log) && AwaitReady(client)) {
        port_ = client;
        return true;
      }
      *error = "etcd (attempt " + std::to_string(attempt + 1) + ", client port " + std::to_string(client) +
               ") did not answer within 15 s; its log ends:\n" + Tail(log);
      Stop();
    }
    return false;
  }

  // The auth set-up of StartTls, through the JSON gateway before auth is on.
  bool EnableAuth(std::string* error) {
    httplib::Client cli("https://127.0.0.1:" + std::to_string(port_), certs() + "/etcd-client.crt",
                        certs() + "/etcd-client.key");
    cli.enable_server_certificate_verification(true);
    cli.set_ca_cert_path(certs() + "/ca.crt");
    cli.set_read_timeout(std::chrono::seconds(10));
    // base64("elastrain/") and base64("elastrain0"): the prefix and its range end.
    const std::vector<std::pair<std::string, std::string>> calls = {
        {"/v3/auth/user/add", R"({"name":"root","password":"root-password"})"},
        {"/v3/auth/user/grant", R"({"user":"root","role":"root"})"},
        {"/v3/auth/user/add", R"({"name":"elastrain","password":"elastrain-password"})"},
        {"/v3/auth/role/add", R"({"name":"elastrain"})"},
        {"/v3/auth/role/grant",
         R"({"name":"elastrain","perm":{"permType":"READWRITE","key":"ZWxhc3RyYWluLw==","range_end":"ZWxhc3RyYWluMA=="}})"},
        {"/v3/auth/user/grant", R"({"user":"elastrain","role":"elastrain"})"},
        {"/v3/auth/enable", "{}"}};
    for (const auto& [path, body] : calls) {
      auto res = cli.Post(path.c_str(), body, "application/json");
      if (!res || res->status != 200) {
        *error = "etcd auth set-up: POST " + path + ": " +
                 (res ? std::to_string(res->status) + " " + res->body : httplib::to_string(res.error()));
        return false;
      }
    }
    return true;
  }

  bool Spawn(int client, int peer, const std::string& data_dir, const std::string& log) {
    const std::string scheme = tls_ ? "https" : "http";
    const std::string curl = scheme + "://127.0.0.1:" + std::to_string(client);
    const std::string purl = scheme + "://127.0.0.1:" + std::to_string(peer);
    // Short heartbeat and election timeout: a single member elects itself in ~0.1 s, and
    // etcd's minimum lease TTL (1.5 election timeouts, rounded up) drops to 1 s.
    std::vector<std::string> args = {kEtcdBinary, "--name", "t", "--data-dir", data_dir,
                                     "--listen-client-urls", curl, "--advertise-client-urls", curl,
                                     "--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
                                     "--initial-cluster", "t=" + purl, "--heartbeat-interval", "10",
                                     "--election-timeout", "100"};
    if (tls_) {
      const std::string c = certs();
      for (const std::string& a : std::vector<std::string>{"--cert-file", c + "/server.crt", "--key-file", c + "/server.key", "--trusted-ca-file",
                            c + "/ca.crt", "--client-cert-auth", "--peer-cert-file", c + "/server.crt",
                            "--peer-key-file", c + "/server.key", "--peer-trusted-ca-file", c + "/ca.crt",
                            "--peer-client-cert-auth", "--auth-token", "simple", "--auth-token-ttl",
                            std::to_string(token_ttl_seconds_)})
        args.push_back(a);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) return false;
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a crashed test binary
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      ::execv(kEtcdBinary, argv.data());
      ::_exit(127);
    }
    pid_ = pid;
    return true;
  }

  bool AwaitReady(int client) {
    StoreOptions opt = tls_ ? ClientOptions("") : StoreOptions();  // auth is not on yet
    opt.request_timeout = std::chrono::milliseconds(500);
    auto store = MakeEtcdStore("127.0.0.1", client, opt, tls_);
    if (!store.ok()) return false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);  // a loaded machine is slow
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {  // exited, e.g. a port was taken
        pid_ = -1;
        return false;
      }
      if ((*store)->Revision().ok()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  std::optional<ScopedTempDir> scratch_;
  std::string dir_;
  pid_t pid_ = -1;
  int port_ = 0;
  bool tls_ = false;
  int token_ttl_seconds_ = 300;
};

}  // namespace elastrain
