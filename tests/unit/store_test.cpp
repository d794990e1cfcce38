// Store tests: one suite run against the memory store, a real etcd, and a real etcd over
// TLS with client certificates and authentication on, as its root user, with tokens that
// expire after 1 s unused (started by the fixture from /usr/bin/etcd on loopback; those
// cases are skipped when etcd is not installed), plus the Gloo adapter, a two-rank
// rendezvous through it, and OpenStore.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/store.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "comm/process_group.h"
#include "store/store.h"
#include "test_dirs.h"
#include "test_wait.h"
#include "test_etcd.h"

namespace elastrain {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;


class StoreTest : public testing::TestWithParam<std::string> {
 protected:
  static void TearDownTestSuite() {
    for (EtcdServer** server : {&etcd_, &etcds_}) {
      if (*server) {
        (*server)->Stop();
        (*server)->RemoveDir();
        delete *server;
        *server = nullptr;
      }
    }
  }

  // etcd is started by the first etcd case, so a run filtered to the memory cases
  // does not pay for it; TearDownTestSuite stops it.
  void SetUp() override {
    if (!etcd()) {
      store_ = MakeMemoryStore();
      return;
    }
    if (::access(kEtcdBinary, X_OK) != 0)
      GTEST_SKIP() << kEtcdBinary << " not installed (Debian: apt-get install etcd-server); etcd cases skipped";
    const bool tls = GetParam() == "etcds";
    EtcdServer*& server = tls ? etcds_ : etcd_;
    std::string& error = tls ? etcds_error_ : etcd_error_;
    if (!server && error.empty()) {
      server = new EtcdServer;
      if (!(tls ? server->StartTls(SourceDir(), /*token_ttl_seconds=*/1, &error) : server->Start(&error))) {
        delete server;
        server = nullptr;
      }
    }
    ASSERT_NE(server, nullptr) << error;
    if (tls) opt_ = server->ClientOptions("root");  // root: every key, like the plain etcd
    auto store = MakeEtcdStore("127.0.0.1", server->port(), opt_, tls);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = *store;
    // The etcd is shared by every case: each works under its own key prefix.
    ns_ = std::string(testing::UnitTest::GetInstance()->current_test_info()->name()) + "/";
  }

  bool etcd() const { return GetParam() != "memory"; }
  // The source tree, for scripts/make_certs.sh.
  static std::string SourceDir() {
    const char* env = std::getenv("ELASTRAIN_SOURCE_DIR");
    return env ? env : ELASTRAIN_SOURCE_DIR_DEFAULT;
  }
  std::string K(const std::string& key) const { return ns_ + key; }
  // A lease short enough for a quick test: etcd's minimum (1 s with the fixture's
  // election timeout), a few milliseconds in memory.
  milliseconds ShortTtl() const { return etcd() ? milliseconds(1000) : milliseconds(50); }

  std::shared_ptr<Store> store_;
  StoreOptions opt_;  // what store_ was made with
  std::string ns_;
  static EtcdServer* etcd_;
  static EtcdServer* etcds_;
  static std::string etcd_error_;
  static std::string etcds_error_;
};

EtcdServer* StoreTest::etcd_ = nullptr;
EtcdServer* StoreTest::etcds_ = nullptr;
std::string StoreTest::etcd_error_;
std::string StoreTest::etcds_error_;

#define ASSERT_OK(expr)                                  \
  do {                                                   \
    const ::elastrain::Status _s = (expr);               \
    ASSERT_TRUE(_s.ok()) << #expr ": " << _s.ToString(); \
  } while (0)

template <typename T>
T Must(Result<T> r) {
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) throw std::runtime_error(r.status().ToString());
  return std::move(r).value();
}

// Every byte value, so that a value is binary-safe end to end (base64 on etcd).
std::string AllBytes() {
  std::string s;
  for (int c = 0; c < 256; ++c) s += static_cast<char>(c);
  return s;
}

std::vector<std::string> Keys(const std::vector<KeyValue>& kvs) {
  std::vector<std::string> out;
  for (const auto& kv : kvs) out.push_back(kv.key);
  return out;
}

TEST_P(StoreTest, PutGetAndListSortedByPrefix) {
  EXPECT_FALSE(Must(store_->Get(K("missing"))).has_value());
  for (const char* k : {"a/2", "a/10", "b/1", "a/1", "a"}) Must(store_->Put(K(k), std::string("v") + k));
  auto a = Must(store_->Get(K("a/10")));
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->key, K("a/10"));
  EXPECT_EQ(a->value, "va/10");
  EXPECT_GT(a->create_revision, 0);
  EXPECT_EQ(a->create_revision, a->mod_revision);
  EXPECT_EQ(a->lease, 0);

  EXPECT_EQ(Keys(Must(store_->List(K("a/")))), (std::vector<std::string>{K("a/1"), K("a/10"), K("a/2")}));
  EXPECT_EQ(Keys(Must(store_->List(K("a")))), (std::vector<std::string>{K("a"), K("a/1"), K("a/10"), K("a/2")}));
  EXPECT_TRUE(Must(store_->List(K("c/"))).empty());
  const auto all = Keys(Must(store_->List("")));
  EXPECT_TRUE(std::is_sorted(all.begin(), all.end()));
  EXPECT_EQ(std::count(all.begin(), all.end(), K("b/1")), 1);

  // Binary keys and values of every length mod 3 (base64 padding), the empty value, and
  // a prefix ending in 0xff (its range end carries into the byte before).
  const std::string bytes = AllBytes();
  for (size_t n : {0, 1, 2, 3, 4, 5, 256}) {
    const std::string key = K("bin/") + std::string(1, '\xff') + std::to_string(n);
    Must(store_->Put(key, bytes.substr(0, n)));
    auto kv = Must(store_->Get(key));
    ASSERT_TRUE(kv.has_value()) << n;
    EXPECT_EQ(kv->value, bytes.substr(0, n)) << n;
  }
  EXPECT_EQ(Must(store_->List(K("bin/") + std::string(1, '\xff'))).size(), 7u);
  Must(store_->Put(K("bin0"), "after the 0xff prefix"));
  EXPECT_EQ(Must(store_->List(K("bin/\xff"))).size(), 7u);
}

TEST_P(StoreTest, RevisionsGrowWithEveryChange) {
  const int64_t r0 = Must(store_->Revision());
  EXPECT_GT(r0, 0);
  const int64_t r1 = Must(store_->Put(K("k"), "1"));
  EXPECT_GT(r1, r0);
  EXPECT_GE(Must(store_->Revision()), r1);
  const int64_t r2 = Must(store_->Put(K("k"), "2"));
  EXPECT_GT(r2, r1);
  auto kv = Must(store_->Get(K("k")));
  ASSERT_TRUE(kv.has_value());
  EXPECT_EQ(kv->create_revision, r1);
  EXPECT_EQ(kv->mod_revision, r2);
  ASSERT_OK(store_->Delete(K("k")));
  EXPECT_GT(Must(store_->Revision()), r2);
}

TEST_P(StoreTest, CompareAndSwap) {
  EXPECT_TRUE(Must(store_->CompareAndSwap(K("k"), 0, "first")));        // must not exist: ok
  EXPECT_FALSE(Must(store_->CompareAndSwap(K("k"), 0, "second")));      // exists now
  auto kv = Must(store_->Get(K("k")));
  ASSERT_TRUE(kv.has_value());
  EXPECT_EQ(kv->value, "first");
  EXPECT_TRUE(Must(store_->CompareAndSwap(K("k"), kv->mod_revision, "third")));
  EXPECT_FALSE(Must(store_->CompareAndSwap(K("k"), kv->mod_revision, "stale")));  // moved on
  EXPECT_EQ(Must(store_->Get(K("k")))->value, "third");
  EXPECT_FALSE(Must(store_->CompareAndSwap(K("absent"), kv->mod_revision, "x")));  // missing key
  EXPECT_FALSE(Must(store_->Get(K("absent"))).has_value());
}

// A leader's guarded write (issue 36): the put lands only while every guard holds, in one
// transaction, and a failed guard changes nothing.
TEST_P(StoreTest, PutIfLandsOnlyWhileEveryGuardHolds) {
  const int64_t lead = Must(store_->Put(K("lead"), "me"));
  auto g = Must(store_->Get(K("lead")));
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->mod_revision, lead);
  EXPECT_TRUE(Must(store_->PutIf({{K("lead"), g->mod_revision}}, K("plan"), "1")));
  auto plan = Must(store_->Get(K("plan")));
  ASSERT_TRUE(plan.has_value());
  // Both the lead and the plan as read: lands.
  EXPECT_TRUE(Must(store_->PutIf({{K("lead"), g->mod_revision}, {K("plan"), plan->mod_revision}}, K("plan"), "2")));
  // The plan moved on: refused.
  EXPECT_FALSE(Must(store_->PutIf({{K("lead"), g->mod_revision}, {K("plan"), plan->mod_revision}}, K("plan"), "3")));
  // The lead is another's now (deleted and written again): refused, nothing written.
  ASSERT_OK(store_->Delete(K("lead")));
  Must(store_->Put(K("lead"), "other"));
  EXPECT_FALSE(Must(store_->PutIf({{K("lead"), g->mod_revision}}, K("plan"), "4")));
  EXPECT_FALSE(Must(store_->PutIf({{K("lead"), g->mod_revision}}, K("fresh"), "5")));
  EXPECT_EQ(Must(store_->Get(K("plan")))->value, "2");
  EXPECT_FALSE(Must(store_->Get(K("fresh"))).has_value());
  // A guard that the key does not exist (0).
  EXPECT_TRUE(Must(store_->PutIf({{K("nobody"), 0}}, K("fresh"), "6")));
}

TEST_P(StoreTest, DeleteAndDeletePrefix) {
  ASSERT_OK(store_->Delete(K("never")));  // missing: not an error
  for (const char* k : {"d/x/1", "d/x/2", "d/y", "e"}) Must(store_->Put(K(k), "v"));
  ASSERT_OK(store_->Delete(K("e")));
  EXPECT_FALSE(Must(store_->Get(K("e"))).has_value());
  ASSERT_OK(store_->DeletePrefix(K("d/x/")));
  EXPECT_EQ(Keys(Must(store_->List(K("")))), std::vector<std::string>{K("d/y")});
  ASSERT_OK(store_->DeletePrefix(K("nothing/")));
}

// The keep-alive test's lease: ten refreshes per TTL, each may be late by 900 ms.
constexpr milliseconds kKeepAliveTtl{1000};
// How long a call that should return at once or at a short timeout may take on a loaded
// machine before a test calls it hung. Upper bounds are hang guards, never measurements.
constexpr long long kHangGuardMs = 10000;

// Waits (bounded) until `key` is gone; returns how long it took, or -1.
long long AwaitGone(Store& store, const std::string& key, milliseconds bound) {
  const auto start = Clock::now();
  while (MsSince(start) < bound.count()) {
    auto kv = store.Get(key);
    if (kv.ok() && !kv->has_value()) return MsSince(start);
    std::this_thread::sleep_for(milliseconds(10));
  }
  return -1;
}

TEST_P(StoreTest, LeaseExpiryRemovesItsKeys) {
  const LeaseId lease = Must(store_->GrantLease(ShortTtl()));
  EXPECT_NE(lease, 0);
  Must(store_->Put(K("leased"), "v", lease));
  EXPECT_TRUE(Must(store_->CompareAndSwap(K("leased2"), 0, "v", lease)));
  Must(store_->Put(K("kept"), "v"));
  auto kv = Must(store_->Get(K("leased")));
  ASSERT_TRUE(kv.has_value());
  EXPECT_EQ(kv->lease, lease);
  const int64_t before = Must(store_->Revision());

  // etcd's lessor looks for expired leases every 500 ms, so allow TTL + a few seconds.
  const long long gone_ms = AwaitGone(*store_, K("leased"), ShortTtl() + milliseconds(etcd() ? 4000 : 1000));
  ASSERT_GE(gone_ms, 0) << "key with a " << ShortTtl().count() << " ms lease still there";
  std::cout << "[ info ] " << GetParam() << ": a " << ShortTtl().count() << " ms lease expired after ~"
            << gone_ms << " ms\n";
  EXPECT_FALSE(Must(store_->Get(K("leased2"))).has_value());
  EXPECT_TRUE(Must(store_->Get(K("kept"))).has_value());
  EXPECT_GT(Must(store_->Revision()), before);
  const Status st = store_->KeepAlive(lease);
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.ToString();
  auto put = store_->Put(K("late"), "v", lease);
  EXPECT_EQ(put.status().code(), StatusCode::kNotFound) << put.status().ToString();
}

TEST_P(StoreTest, KeepAliveExtendsALease) {
  // A TTL long against the refresh period: a refresh sleep stretched by a loaded machine
  // must not let the lease lapse (a 50 ms lease refreshed every 25 ms did, under load).
  const milliseconds ttl = std::max(ShortTtl(), kKeepAliveTtl);
  const auto granted = Clock::now();
  const LeaseId lease = Must(store_->GrantLease(ttl));
  Must(store_->Put(K("leased"), "v", lease));
  // Refresh every tenth of the TTL until 1.5 TTLs have passed: the key outlives its
  // first expiry time.
  while (Clock::now() - granted < ttl * 3 / 2) {
    std::this_thread::sleep_for(ttl / 10);
    ASSERT_OK(store_->KeepAlive(lease));
  }
  EXPECT_TRUE(Must(store_->Get(K("leased"))).has_value());
  ASSERT_OK(store_->RevokeLease(lease));
}

TEST_P(StoreTest, RevokeRemovesKeysAtOnce) {
  const LeaseId lease = Must(store_->GrantLease(milliseconds(60000)));
  Must(store_->Put(K("leased"), "v", lease));
  ASSERT_OK(store_->RevokeLease(lease));
  EXPECT_FALSE(Must(store_->Get(K("leased"))).has_value());
  EXPECT_EQ(store_->KeepAlive(lease).code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->Put(K("again"), "v", lease).status().code(), StatusCode::kNotFound);
  ASSERT_OK(store_->RevokeLease(lease));  // already gone: not an error
}

TEST_P(StoreTest, WaitForChangeWakesOnAPutFromAnotherThread) {
  const int64_t rev = Must(store_->Revision());
  const auto start = Clock::now();
  std::thread writer([&] {
    std::this_thread::sleep_for(milliseconds(100));
    EXPECT_TRUE(store_->Put(K("k"), "v").ok());
  });
  // A newer revision is the proof that the put woke it; the timeout only bounds a hang.
  const int64_t woke = Must(store_->WaitForChange(rev, milliseconds(kHangGuardMs)));
  const long long ms = MsSince(start);
  writer.join();
  EXPECT_GT(woke, rev);
  EXPECT_GE(ms, 90);
}

TEST_P(StoreTest, WaitForChangeReturnsAtTheTimeout) {
  const int64_t rev = Must(store_->Revision());
  const auto start = Clock::now();
  EXPECT_EQ(Must(store_->WaitForChange(rev, milliseconds(200))), rev);
  const long long ms = MsSince(start);
  EXPECT_GE(ms, 190);
  EXPECT_LT(ms, kHangGuardMs);
}

TEST_P(StoreTest, OpenStoreByUrl) {
  auto opened = OpenStore(store_->url(), opt_);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ((*opened)->url(), store_->url());
}

TEST_P(StoreTest, GlooStoreSetGetWaitWithBinaryData) {
  auto gloo = MakeGlooStore(store_, K("rdv"));
  const std::string bytes = AllBytes();
  const std::vector<char> data(bytes.begin(), bytes.end());
  gloo->set("addr", data);
  EXPECT_EQ(gloo->get("addr"), data);
  auto raw = Must(store_->Get(K("rdv/addr")));  // prefix + "/" + key
  ASSERT_TRUE(raw.has_value());
  EXPECT_EQ(raw->value, bytes);
  gloo->wait({"addr"});
  gloo->set("addr", {'x'});  // overwriting is allowed
  EXPECT_EQ(gloo->get("addr"), std::vector<char>{'x'});

  auto slashed = MakeGlooStore(store_, K("rdv/"));  // no double slash
  EXPECT_EQ(slashed->get("addr"), std::vector<char>{'x'});

  // get() and wait() block until another thread sets the keys.
  std::thread late([&] {
    std::this_thread::sleep_for(milliseconds(50));
    gloo->set("late1", {'1'});
    gloo->set("late2", {'\0', '2'});
  });
  const auto start = Clock::now();
  gloo->wait({"late1", "late2"}, milliseconds(5000));
  EXPECT_EQ(gloo->get("late2"), (std::vector<char>{'\0', '2'}));
  EXPECT_GE(MsSince(start), 40);
  late.join();
}

TEST_P(StoreTest, GlooStoreWaitThrowsAtTheTimeout) {
  auto gloo = MakeGlooStore(store_, K("rdv"));
  gloo->set("here", {'1'});
  const auto start = Clock::now();
  try {
    gloo->wait({"here", "missing"}, milliseconds(150));
    FAIL() << "wait for a missing key returned";
  } catch (const gloo::IoException& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(K("rdv/missing")), std::string::npos) << what;
    EXPECT_EQ(what.find(K("rdv/here")), std::string::npos) << what;
    EXPECT_NE(what.find(store_->url()), std::string::npos) << what;
    EXPECT_NE(what.find("timeout"), std::string::npos) << what;  // ProcessGroup reads it as a deadline
  }
  const long long ms = MsSince(start);
  EXPECT_GE(ms, 140);
  EXPECT_LT(ms, kHangGuardMs);
}

TEST_P(StoreTest, TwoProcessGroupsRendezvousThroughTheGlooStore) {
  auto gloo = MakeGlooStore(store_, K("gloo"));
  GroupOptions opt;
  opt.timeout = milliseconds(10000);
  std::vector<std::vector<float>> results(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      auto pg = ProcessGroup::Connect(gloo, "gen/1/all", r, 2, opt);
      ASSERT_TRUE(pg.ok()) << pg.status().ToString();
      std::vector<float> v = {float(r + 1), float(10 * r), -1.0f};
      ASSERT_TRUE((*pg)->AllReduceSum(v.data(), v.size()).ok());
      results[r] = v;
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) EXPECT_EQ(results[r], (std::vector<float>{3.0f, 10.0f, -2.0f})) << "rank " << r;
  // Gloo's keys landed under the adapter's prefix.
  EXPECT_FALSE(Must(store_->List(K("gloo/gen/1/all/"))).empty());
}

// etcds only: a token unused for longer than etcd's --auth-token-ttl (1 s here) is
// refused, and the store authenticates again, for requests and for watches.
TEST_P(StoreTest, AnExpiredTokenIsRenewed) {
  if (GetParam() != "etcds") GTEST_SKIP() << "etcds only";
  const int64_t rev = Must(store_->Put(K("k"), "1"));
  std::this_thread::sleep_for(milliseconds(2500));  // etcd checks token expiry each second
  auto kv = Must(store_->Get(K("k")));
  ASSERT_TRUE(kv.has_value());
  EXPECT_EQ(kv->value, "1");
  std::this_thread::sleep_for(milliseconds(2500));
  std::thread writer([&] {
    std::this_thread::sleep_for(milliseconds(100));
    EXPECT_TRUE(store_->Put(K("k"), "2").ok());
  });
  EXPECT_GT(Must(store_->WaitForChange(rev, milliseconds(kHangGuardMs))), rev);
  writer.join();
}

// etcds only: the user elastrain, whose role may read and write "elastrain/" and nothing
// else, can do everything the controller, agents and workers do there once the store's
// scope is that prefix; outside it, etcd refuses and the error says what role is needed.
TEST_P(StoreTest, ARoleLimitedToThePrefixIsEnoughWithinIt) {
  if (GetParam() != "etcds") GTEST_SKIP() << "etcds only";
  StoreOptions opt = etcds_->ClientOptions("elastrain");
  opt.key_scope = "elastrain/";
  auto opened = OpenStore(store_->url(), opt);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Store& s = **opened;
  const std::string k = "elastrain/" + ns_;
  const int64_t rev = Must(s.Revision());
  EXPECT_TRUE(Must(s.CompareAndSwap(k + "head", 0, "me")));
  const LeaseId lease = Must(s.GrantLease(milliseconds(5000)));
  Must(s.Put(k + "agent", "a", lease));
  ASSERT_OK(s.KeepAlive(lease));
  EXPECT_EQ(Must(s.List(k)).size(), 2u);
  ASSERT_OK(s.RevokeLease(lease));
  ASSERT_OK(s.DeletePrefix(k));
  EXPECT_GT(Must(s.WaitForChange(rev, milliseconds(kHangGuardMs))), rev);
  auto gloo = MakeGlooStore(*opened, k + "rdzv");
  gloo->set("addr", {'x'});
  EXPECT_EQ(gloo->get("addr"), std::vector<char>{'x'});

  const auto outside = s.Put(ns_ + "outside", "v");
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(outside.status().message().find("permission denied"), std::string::npos) << outside.status().ToString();
  EXPECT_NE(outside.status().message().find("needs a role with readwrite on the prefix 'elastrain/'"),
            std::string::npos)
      << outside.status().ToString();
  // Without a scope, the revision read covers the whole keyspace: refused for this role.
  opt.key_scope.clear();
  EXPECT_FALSE(OpenStore(store_->url(), opt).ok());
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreTest, testing::Values("memory", "etcd", "etcds"),
                         [](const testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(OpenStoreTest, RejectsBadUrls) {
  for (const std::string url : {"", "xyz", "memory:/", "memory://x", "http://127.0.0.1:2379", "etcd://",
                                "etcd://host", "etcd://host:", "etcd://:2379", "etcd://host:0",
                                "etcd://host:65536", "etcd://host:12ab", "etcd://host:-1", "etcds://",
                                "etcds://host", "etcd+tls://host:2379", "https://127.0.0.1:2379"}) {
    auto store = OpenStore(url);
    ASSERT_FALSE(store.ok()) << url;
    EXPECT_EQ(store.status().code(), StatusCode::kInvalidArgument) << url;
    const std::string msg = store.status().message();
    EXPECT_NE(msg.find("--store '" + url + "': expected memory://, etcd://HOST:PORT or etcds://HOST:PORT"),
              std::string::npos)
        << msg;
  }
}

TEST(OpenStoreTest, UnreachableEtcdIsUnavailableWithinTheRequestTimeout) {
  const int port = FreePort();  // nothing listens there
  const std::string url = "etcd://127.0.0.1:" + std::to_string(port);
  StoreOptions opt;
  opt.request_timeout = milliseconds(kHangGuardMs);
  const auto start = Clock::now();
  auto store = OpenStore(url, opt);
  EXPECT_LT(MsSince(start), kHangGuardMs);  // a refused connection, not the timeout
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kUnavailable) << store.status().ToString();
  EXPECT_NE(store.status().message().find(url + ": cannot reach etcd"), std::string::npos) << store.status().ToString();
  EXPECT_NE(store.status().message().find("is etcd running?"), std::string::npos);

  // Through the Gloo adapter the same error becomes a gloo::IoException.
  auto etcd = MakeEtcdStore("127.0.0.1", port, opt);
  ASSERT_TRUE(etcd.ok());
  auto gloo = MakeGlooStore(*etcd, "rdv");
  try {
    gloo->set("k", {'1'});
    FAIL() << "set on an unreachable etcd returned";
  } catch (const gloo::IoException& e) {
    EXPECT_NE(std::string(e.what()).find("cannot reach etcd"), std::string::npos) << e.what();
  }
  EXPECT_THROW(gloo->wait({"k"}, milliseconds(100)), gloo::IoException);
}

// An HTTP server on a free loopback port that is not etcd: every POST gets `handler`.
class FakeServer {
 public:
  explicit FakeServer(httplib::Server::Handler handler) {
    server_.Post(".*", std::move(handler));
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~FakeServer() {
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

TEST(OpenStoreTest, AServerThatIsNotEtcdIsFailedPrecondition) {
  FakeServer fake([](const httplib::Request&, httplib::Response& res) {
    res.status = 404;
    res.set_content("404 page not found", "text/plain");
  });
  const std::string url = "etcd://127.0.0.1:" + std::to_string(fake.port());
  auto store = OpenStore(url);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition) << store.status().ToString();
  EXPECT_NE(store.status().message().find(url), std::string::npos) << store.status().ToString();
  EXPECT_NE(store.status().message().find("HTTP 404"), std::string::npos) << store.status().ToString();
}

TEST(OpenStoreTest, AnAnswerWithoutEndIsCutNotBuffered) {
  // A hostile endpoint streams far more than any etcd answer (64 MiB); the client stops
  // reading at its limit instead of buffering it all.
  std::atomic<size_t> sent{0};
  FakeServer fake([&](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("application/json", [&](size_t, httplib::DataSink& sink) {
      static const std::string chunk(1 << 20, ' ');
      if (sent >= (size_t{256} << 20)) {
        sink.done();
        return true;
      }
      sent += chunk.size();
      return sink.write(chunk.data(), chunk.size());
    });
  });
  auto store = OpenStore("etcd://127.0.0.1:" + std::to_string(fake.port()));
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("exceeds 64 MiB"), std::string::npos) << store.status().ToString();
  EXPECT_LT(sent.load(), size_t{256} << 20);
}

TEST(OpenStoreTest, AHungEtcdIsDeadlineExceededAtTheRequestTimeout) {
  // The server answers only once the client has given up (or after the hang guard), so
  // only the request timeout can end the call: no race between the two.
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  FakeServer fake([&](const httplib::Request&, httplib::Response& res) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, milliseconds(kHangGuardMs), [&] { return released; });
    res.set_content("{}", "application/json");
  });
  StoreOptions opt;
  opt.request_timeout = milliseconds(150);
  const auto start = Clock::now();
  auto store = OpenStore("etcd://127.0.0.1:" + std::to_string(fake.port()), opt);
  const long long ms = MsSince(start);
  {
    std::lock_guard<std::mutex> lock(mu);
    released = true;
  }
  cv.notify_all();
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kDeadlineExceeded) << store.status().ToString();
  EXPECT_GE(ms, 140);
  EXPECT_LT(ms, kHangGuardMs);
}

TEST(OpenStoreTest, MakeEtcdStoreChecksItsArguments) {
  EXPECT_EQ(MakeEtcdStore("", 2379).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeEtcdStore("h", 0).status().code(), StatusCode::kInvalidArgument);
  StoreOptions opt;
  opt.request_timeout = milliseconds(0);
  EXPECT_EQ(MakeEtcdStore("h", 2379, opt).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace elastrain
