// The control API's defence against lock-out without a token (issue 33): the connection
// ledger's caps and eviction order (monitor/connection_ledger.h), the raw-request helpers
// and log escaping (monitor/request_guard.h), and the accept gate itself on loopback
// (monitor/http_gate.h): the request deadline, and a client served while the caps are
// full of idle connections.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "monitor/connection_ledger.h"
#include "monitor/http_gate.h"
#include "monitor/request_guard.h"
#include "test_dirs.h"

namespace elastrain {
namespace {

// --- log escaping and raw requests ----------------------------------------------------------

TEST(RequestLogTest, EscapesControlAndNonAsciiBytes) {
  EXPECT_EQ(EscapeForLog("GET /\x1b[2J\x07 HTTP/1.1"), "GET /\\x1b[2J\\x07 HTTP/1.1");
  EXPECT_EQ(EscapeForLog(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(EscapeForLog("\r\n\t\x7f"), "\\x0d\\x0a\\x09\\x7f");
  EXPECT_EQ(EscapeForLog("\x9b" "31m caf\xc3\xa9"), "\\x9b31m caf\\xc3\\xa9");  // 8-bit CSI, UTF-8
  // A backslash is escaped too: "\\x1b" in a log line never stands for a raw ESC.
  EXPECT_EQ(EscapeForLog("a\\x1b"), "a\\\\x1b");
  EXPECT_EQ(EscapeForLog("plain /api/v1/job?x=1"), "plain /api/v1/job?x=1");
  EXPECT_EQ(EscapeForLog("abcdef", 3), "abc...");
  EXPECT_EQ(EscapeForLog(""), "");
}

TEST(RequestLogTest, RawRequestHelpers) {
  const std::string req = "POST /api/v1/jobs HTTP/1.1\r\nHost: a:1\r\ncontent-LENGTH:  12 \r\n\r\n{\"x\": 1}";
  EXPECT_EQ(RequestHeadEnd(req), req.find("{"));
  EXPECT_EQ(RequestLine(req), "POST /api/v1/jobs HTTP/1.1");
  EXPECT_EQ(RawHeaderValue(req, "Content-Length").value_or("?"), "12");
  EXPECT_EQ(RawHeaderValue(req, "host").value_or("?"), "a:1");
  EXPECT_FALSE(RawHeaderValue(req, "Expect"));
  EXPECT_FALSE(RawHeaderValue(req, "x\": 1}"));  // nothing past the head
  EXPECT_EQ(RequestHeadEnd("GET / HTTP/1.1\r\nHost: a"), std::string::npos);
  EXPECT_EQ(RequestHeadEnd("GET / HTTP/1.1\nHost: a\n\n"), 24u);  // the whole of it
  EXPECT_EQ(RequestHeadEnd(""), std::string::npos);
  EXPECT_EQ(RequestLine("GET /\x1b HTTP/1.1"), "GET /\x1b HTTP/1.1");
}

// --- the ledger --------------------------------------------------------------------------------

TEST(ConnectionLedgerTest, PerPeerCapClosesThatPeersLeastActiveWaitingConnection) {
  ConnectionLedger l(10, 3);
  for (uint64_t id = 1; id <= 3; ++id) EXPECT_TRUE(l.Admit(id, "10.0.0.9", id).admit);
  l.Progress(1, 5);  // 1 sent a byte at t=5: 2 is now the least active
  const auto d = l.Admit(4, "10.0.0.9", 6);
  EXPECT_TRUE(d.admit);
  EXPECT_EQ(d.evict, 2u);
  EXPECT_NE(d.reason.find("10.0.0.9 holds 3 connections (the cap per address)"), std::string::npos) << d.reason;
  EXPECT_EQ(l.PeerCount("10.0.0.9"), 3u);
  // Another address is not touched by that peer's cap.
  const auto other = l.Admit(5, "10.0.0.1", 7);
  EXPECT_TRUE(other.admit);
  EXPECT_EQ(other.evict, 0u);
}

TEST(ConnectionLedgerTest, AnsweringConnectionsAreNeverClosedAndARefusalSaysWhy) {
  ConnectionLedger l(10, 2);
  ASSERT_TRUE(l.Admit(1, "p", 1).admit);
  ASSERT_TRUE(l.Admit(2, "p", 2).admit);
  l.Answering(1);
  l.Answering(2);
  const auto d = l.Admit(3, "p", 3);
  EXPECT_FALSE(d.admit);
  EXPECT_EQ(d.evict, 0u);
  EXPECT_NE(d.reason.find("all being answered"), std::string::npos) << d.reason;
  l.Closed(1);
  EXPECT_TRUE(l.Admit(3, "p", 4).admit);
}

TEST(ConnectionLedgerTest, TotalCapClosesAWaitingConnectionOfTheBusiestPeer) {
  ConnectionLedger l(4, 4);
  ASSERT_TRUE(l.Admit(1, "victim", 1).admit);   // oldest of all, but its peer holds one
  ASSERT_TRUE(l.Admit(2, "attacker", 2).admit);
  ASSERT_TRUE(l.Admit(3, "attacker", 3).admit);
  ASSERT_TRUE(l.Admit(4, "attacker", 4).admit);
  const auto d = l.Admit(5, "newcomer", 5);
  EXPECT_TRUE(d.admit);
  EXPECT_EQ(d.evict, 2u);  // the attacker's least active, not the victim's older one
  EXPECT_EQ(l.size(), 4u);
  EXPECT_EQ(l.PeerCount("attacker"), 2u);
  // The busiest peer has none waiting: any waiting one goes.
  l.Answering(3);
  l.Answering(4);
  const auto d2 = l.Admit(6, "x", 6);
  EXPECT_TRUE(d2.admit);
  EXPECT_EQ(d2.evict, 1u);
}

TEST(ConnectionLedgerTest, ExpiredAndVictim) {
  ConnectionLedger l(10, 10);
  ASSERT_TRUE(l.Admit(1, "a", 0).admit);
  ASSERT_TRUE(l.Admit(2, "a", 5).admit);
  ASSERT_TRUE(l.Admit(3, "b", 6).admit);
  l.Progress(1, 7);  // bytes do not extend the deadline: it counts from the accept
  l.Answering(3);
  EXPECT_EQ(l.Expired(10.5, 10), std::vector<uint64_t>({1}));
  EXPECT_EQ(l.Expired(100, 10), std::vector<uint64_t>({1, 2}));  // 3 is being answered
  EXPECT_EQ(l.Victim(), 2u);  // 1 was active at 7, 2 last at 5
  l.Closed(2);
  EXPECT_EQ(l.Victim(), 1u);
  EXPECT_EQ(l.PeerCount("a"), 1u);
}

// --- the gate on loopback ----------------------------------------------------------------------

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Everything the server sends until it closes (or `seconds` pass: then "TIMEOUT").
std::string ReadAll(int fd, double seconds) {
  std::string out;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (left.count() <= 0) return "TIMEOUT";
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

// A gate whose handler answers "ok <request line>" (httplib's Stream, written raw).
struct EchoGate {
  explicit EchoGate(GateLimits limits)
      : gate(limits, [this](httplib::Stream& s) {
          std::string head;
          char c;
          while (head.find("\r\n\r\n") == std::string::npos && s.read(&c, 1) == 1) head += c;
          const GateRequest* r = CurrentGateRequest();
          const std::string body = "ok " + (r ? r->first_line + " from " + r->peer : std::string("?"));
          const std::string answer =
              "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
          s.write(answer.data(), answer.size());
          ++answered;
        }) {
    auto p = gate.Listen("127.0.0.1", 0);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    port = p.ok() ? p.value() : 0;
    gate.Serve();
  }
  ~EchoGate() { gate.Stop(); }
  std::atomic<int> answered{0};
  HttpGate gate;
  int port = 0;
};

TEST(HttpGateTest, AnIncompleteRequestIsClosedAtTheDeadlineWithoutAWorker) {
  GateLimits limits;
  limits.request_seconds = 1;
  limits.workers = 1;
  EchoGate g(limits);
  const int slow = Connect(g.port);
  ASSERT_GE(slow, 0);
  ASSERT_EQ(send(slow, "GET / HT", 8, 0), 8);
  // The one worker is free meanwhile: a complete request is answered at once.
  const int fast = Connect(g.port);
  const std::string req = "GET /x HTTP/1.1\r\nHost: h\r\n\r\n";
  ASSERT_EQ(send(fast, req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
  EXPECT_NE(ReadAll(fast, 5).find("ok GET /x HTTP/1.1 from 127.0.0.1"), std::string::npos);
  close(fast);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(ReadAll(slow, 5), "");  // closed, unanswered
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(waited, 2.5);
  close(slow);
  EXPECT_EQ(g.gate.Counters().timed_out, 1u);
  EXPECT_EQ(g.answered.load(), 1);
}

TEST(HttpGateTest, AClientIsServedWhileIdleConnectionsFillTheCaps) {
  GateLimits limits;
  limits.max_connections = 16;
  limits.max_per_peer = 8;
  limits.workers = 2;
  EchoGate g(limits);
  std::vector<int> idle;
  for (int i = 0; i < 40; ++i) idle.push_back(Connect(g.port));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (int round = 0; round < 5; ++round) {
    const int c = Connect(g.port);
    ASSERT_GE(c, 0);
    const std::string req = "GET /status HTTP/1.1\r\nHost: h\r\n\r\n";
    ASSERT_EQ(send(c, req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
    EXPECT_NE(ReadAll(c, 5).find("ok GET /status"), std::string::npos) << "round " << round;
    close(c);
  }
  const GateCounters n = g.gate.Counters();
  EXPECT_GE(n.evicted, 40u - 8u);  // the idle ones over the cap per address were closed
  EXPECT_EQ(n.answered, 5u);
  for (int fd : idle) close(fd);
}

TEST(HttpGateTest, AClientThatClosesItsSideAfterTheRequestIsAnswered) {
  EchoGate g(GateLimits{});
  const int c = Connect(g.port);
  const std::string req = "GET /half HTTP/1.0\r\nHost: h\r\n\r\n";
  ASSERT_EQ(send(c, req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
  ASSERT_EQ(shutdown(c, SHUT_WR), 0);  // as `nc -N` does
  EXPECT_NE(ReadAll(c, 5).find("ok GET /half HTTP/1.0"), std::string::npos);
  close(c);
  // A partial request then EOF: closed unanswered, at once.
  const int p = Connect(g.port);
  ASSERT_EQ(send(p, "GET /pa", 7, 0), 7);
  ASSERT_EQ(shutdown(p, SHUT_WR), 0);
  EXPECT_EQ(ReadAll(p, 5), "");
  close(p);
  EXPECT_EQ(g.answered.load(), 1);
}

TEST(HttpGateTest, ABodyArrivesBeforeTheWorkerAndAnOversizedHeadIs431) {
  GateLimits limits;
  limits.max_head_bytes = 1024;
  EchoGate g(limits);
  const int c = Connect(g.port);
  const std::string head = "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n";
  ASSERT_EQ(send(c, head.data(), head.size(), 0), static_cast<ssize_t>(head.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(g.answered.load(), 0);  // waiting for its body, in the gate
  ASSERT_EQ(send(c, "hello", 5, 0), 5);
  EXPECT_NE(ReadAll(c, 5).find("ok POST /p"), std::string::npos);
  close(c);
  // A body over max_buffered_body (to be refused 413) is read and discarded by the gate:
  // no worker waits on a slow sender of it.
  const int d = Connect(g.port);
  const std::string big_head = "POST /big HTTP/1.1\r\nHost: h\r\nContent-Length: 3000000\r\n\r\n";
  ASSERT_EQ(send(d, big_head.data(), big_head.size(), 0), static_cast<ssize_t>(big_head.size()));
  const std::string half(1500000, 'x');
  for (size_t sent = 0; sent < half.size();) {
    const ssize_t n = send(d, half.data() + sent, half.size() - sent, 0);
    ASSERT_GT(n, 0);
    sent += static_cast<size_t>(n);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(g.answered.load(), 1);  // the first POST only
  for (size_t sent = 0; sent < half.size();) {
    const ssize_t n = send(d, half.data() + sent, half.size() - sent, 0);
    ASSERT_GT(n, 0);
    sent += static_cast<size_t>(n);
  }
  EXPECT_NE(ReadAll(d, 5).find("ok POST /big"), std::string::npos);
  close(d);
  const int big = Connect(g.port);
  const std::string huge = "GET /" + std::string(2000, 'a') + " HTTP/1.1\r\n";
  ASSERT_EQ(send(big, huge.data(), huge.size(), 0), static_cast<ssize_t>(huge.size()));
  EXPECT_NE(ReadAll(big, 5).find("431"), std::string::npos);
  close(big);
  EXPECT_EQ(g.gate.Counters().too_large, 1u);
}

// A self-signed certificate and its key (EC P-256) as PEM files in `dir`.
bool WriteSelfSigned(const std::string& dir, std::string* cert, std::string* key) {
  EVP_PKEY* pkey = EVP_EC_gen("P-256");
  X509* x = X509_new();
  if (!pkey || !x) return false;
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), 0);
  X509_gmtime_adj(X509_getm_notAfter(x), 3600);
  X509_set_pubkey(x, pkey);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("127.0.0.1"), -1, -1, 0);
  X509_set_issuer_name(x, name);
  bool ok = X509_sign(x, pkey, EVP_sha256()) > 0;
  *cert = dir + "/server.crt";
  *key = dir + "/server.key";
  FILE* c = std::fopen(cert->c_str(), "w");
  FILE* k = std::fopen(key->c_str(), "w");
  ok = ok && c && k && PEM_write_X509(c, x) == 1 && PEM_write_PrivateKey(k, pkey, nullptr, nullptr, 0, nullptr, nullptr) == 1;
  if (c) std::fclose(c);
  if (k) std::fclose(k);
  X509_free(x);
  EVP_PKEY_free(pkey);
  return ok;
}

TEST(HttpGateTest, TlsHandshakeIsPartOfTheDeadlineAndARequestIsAnsweredOverTls) {
  ScopedTempDir dir("gate_tls");
  std::string cert, key;
  ASSERT_TRUE(WriteSelfSigned(dir.path(), &cert, &key));
  GateLimits limits;
  limits.request_seconds = 1;
  std::atomic<int> answered{0};
  HttpGate gate(limits, [&](httplib::Stream& s) {
    std::string head;
    char ch;
    while (head.find("\r\n\r\n") == std::string::npos && s.read(&ch, 1) == 1) head += ch;
    const std::string answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    s.write(answer.data(), answer.size());
    ++answered;
  });
  EXPECT_FALSE(gate.SetTls(dir.path() + "/missing.crt", key).ok());
  ASSERT_TRUE(gate.SetTls(cert, key).ok());
  auto port = gate.Listen("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status().ToString();
  gate.Serve();
  // A connection that never starts its handshake: closed at the deadline.
  const int silent = Connect(*port);
  EXPECT_EQ(ReadAll(silent, 5), "");
  close(silent);
  EXPECT_EQ(gate.Counters().timed_out, 1u);
  // A TLS client is answered.
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx);
  const int fd = Connect(*port);
  SSL_set_fd(ssl, fd);
  ASSERT_EQ(SSL_connect(ssl), 1);  // no verification: a self-signed test certificate
  const std::string req = "GET /tls HTTP/1.1\r\nHost: h\r\n\r\n";
  ASSERT_EQ(SSL_write(ssl, req.data(), static_cast<int>(req.size())), static_cast<int>(req.size()));
  std::string got;
  char buf[256];
  for (int n; (n = SSL_read(ssl, buf, sizeof(buf))) > 0;) got.append(buf, static_cast<size_t>(n));
  EXPECT_NE(got.find("200 OK"), std::string::npos) << got;
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  close(fd);
  EXPECT_EQ(answered.load(), 1);
  gate.Stop();
}

}  // namespace
}  // namespace elastrain
