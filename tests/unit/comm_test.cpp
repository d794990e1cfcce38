// Process-group tests: ranks as threads over an in-memory or file store (Gloo's own
// test style: sweep world size x element count), plus fork()ed ranks for the failure
// modes that need a real process to die or stall.
#include <gloo/rendezvous/hash_store.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/process_group.h"
#include "test_dirs.h"
#include "test_wait.h"

namespace elastrain {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;


GroupOptions Opts(milliseconds timeout) {
  GroupOptions opt;
  opt.timeout = timeout;
  return opt;
}

// Runs body(rank, group) on `size` threads, each connected to `prefix` of `store`.
void RunRanks(std::shared_ptr<gloo::rendezvous::Store> store, const std::string& prefix,
              int size, const GroupOptions& opt,
              const std::function<void(int, ProcessGroup&)>& body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      auto pg = ProcessGroup::Connect(store, prefix, r, size, opt);
      ASSERT_TRUE(pg.ok()) << pg.status().ToString();
      body(r, **pg);
    });
  }
  for (auto& t : threads) t.join();
}

// Integer-valued floats, so every sum is exact whatever order Gloo adds in.
float Val(int rank, size_t i) { return static_cast<float>(rank * 1000 + static_cast<int>(i % 997)); }

void CheckAllOps(int rank, ProcessGroup& pg, size_t n) {
  const int w = pg.size();
  const std::string where = "world " + std::to_string(w) + " rank " + std::to_string(rank) +
                            " n " + std::to_string(n);
  auto expected_sum = [&](size_t i) {
    float s = 0;
    for (int r = 0; r < w; ++r) s += Val(r, i);
    return s;
  };
  std::vector<float> a(n);
  for (size_t i = 0; i < n; ++i) a[i] = Val(rank, i);
  ASSERT_TRUE(pg.AllReduceSum(a.data(), n).ok()) << where;
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(a[i], expected_sum(i)) << where << " i " << i;

  for (size_t bucket : {size_t{1}, size_t{5}, size_t{1000}}) {
    if (n / bucket > 64) continue;  // thousands of tiny collectives: slow, no new coverage
    for (size_t i = 0; i < n; ++i) a[i] = Val(rank, i);
    ASSERT_TRUE(pg.AllReduceSumBucketed(a.data(), n, bucket).ok()) << where;
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(a[i], expected_sum(i)) << where << " bucket " << bucket;
  }

  std::vector<double> d(n);
  for (size_t i = 0; i < n; ++i) d[i] = 0.5 * Val(rank, i);
  ASSERT_TRUE(pg.AllReduceSum(d.data(), n).ok()) << where;
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(d[i], 0.5 * expected_sum(i)) << where;

  std::vector<float> gathered(n * w, -1.0f);
  for (size_t i = 0; i < n; ++i) a[i] = Val(rank, i);
  ASSERT_TRUE(pg.AllGather(a.data(), n, gathered.data()).ok()) << where;
  for (int r = 0; r < w; ++r)
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(gathered[r * n + i], Val(r, i)) << where;

  // Rank r's input chunk c holds Val(r, c*n + i); this rank keeps the sum of chunk `rank`.
  std::vector<float> in(n * w), out(n, -1.0f);
  for (size_t j = 0; j < n * w; ++j) in[j] = Val(rank, j);
  ASSERT_TRUE(pg.ReduceScatterSum(in.data(), out.data(), n).ok()) << where;
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], expected_sum(rank * n + i)) << where << " i " << i;

  const int root = w - 1;
  for (size_t i = 0; i < n; ++i) a[i] = rank == root ? Val(7, i) : -1.0f;
  ASSERT_TRUE(pg.Broadcast(a.data(), n, root).ok()) << where;
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(a[i], Val(7, i)) << where;

  // int64 values beyond float precision: the bytes must arrive untouched.
  std::vector<int64_t> v(n), vg(n * w);
  for (size_t i = 0; i < n; ++i) v[i] = (int64_t{1} << 40) + rank * 100000 + static_cast<int64_t>(i);
  ASSERT_TRUE(pg.AllGather(v.data(), n, vg.data()).ok()) << where;
  for (int r = 0; r < w; ++r)
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(vg[r * n + i], (int64_t{1} << 40) + r * 100000 + static_cast<int64_t>(i)) << where;
  for (size_t i = 0; i < n; ++i) v[i] = rank == 0 ? (int64_t{3} << 50) + static_cast<int64_t>(i) : 0;
  ASSERT_TRUE(pg.Broadcast(v.data(), n, 0).ok()) << where;
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(v[i], (int64_t{3} << 50) + static_cast<int64_t>(i)) << where;

  ASSERT_TRUE(pg.Barrier().ok()) << where;
}

TEST(CommProcessGroup, SweepWorldSizesAndElementCounts) {
  for (int w = 1; w <= 4; ++w) {
    auto store = std::make_shared<gloo::rendezvous::HashStore>();
    RunRanks(store, "sweep/w" + std::to_string(w), w, Opts(milliseconds(10000)),
             [](int rank, ProcessGroup& pg) {
               for (size_t n : {size_t{0}, size_t{1}, size_t{3}, size_t{7}, size_t{64}, size_t{1001},
                                size_t{70001}}) {
                 CheckAllOps(rank, pg, n);
               }
             });
  }
}

TEST(CommProcessGroup, SizeOneNeedsNoStoreOrNetwork) {
  auto pg = ProcessGroup::Connect(nullptr, "solo", 0, 1, Opts(milliseconds(100)));
  ASSERT_TRUE(pg.ok()) << pg.status().ToString();
  CheckAllOps(0, **pg, 5);
}

TEST(CommProcessGroup, RejectsBadArguments) {
  auto store = std::make_shared<gloo::rendezvous::HashStore>();
  EXPECT_EQ(ProcessGroup::Connect(store, "x", 2, 2).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ProcessGroup::Connect(store, "x", 0, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ProcessGroup::Connect(store, "", 0, 2).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ProcessGroup::Connect(store, "x", 0, 2, Opts(milliseconds(0))).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ProcessGroup::Connect(nullptr, "x", 0, 2).status().code(), StatusCode::kInvalidArgument);
  auto pg = ProcessGroup::Connect(nullptr, "solo", 0, 1);
  ASSERT_TRUE(pg.ok());
  float x = 1;
  EXPECT_EQ((*pg)->Broadcast(&x, 1, 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*pg)->AllReduceSumBucketed(&x, 1, 0).code(), StatusCode::kInvalidArgument);
}

// A worker holds a group over all ranks and one over its tensor-parallel pair at once;
// both share the process's TCP device and one file store, apart by prefix.
TEST(CommProcessGroup, SeveralGroupsPerProcessOverOneFileStore) {
  ScopedTempDir dir("comm");
  auto store = MakeFileStore(dir.path() + "/rendezvous/nested");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const int w = 4;
  std::vector<std::thread> threads;
  for (int r = 0; r < w; ++r) {
    threads.emplace_back([&, r] {
      auto all = ProcessGroup::Connect(*store, "gen/0/all", r, w, Opts(milliseconds(10000)));
      ASSERT_TRUE(all.ok()) << all.status().ToString();
      auto tp = ProcessGroup::Connect(*store, "gen/0/tp" + std::to_string(r / 2), r % 2, 2,
                                      Opts(milliseconds(10000)));
      ASSERT_TRUE(tp.ok()) << tp.status().ToString();
      for (int iter = 0; iter < 3; ++iter) {
        float x = static_cast<float>(r + 1);
        ASSERT_TRUE((*all)->AllReduceSum(&x, 1).ok());
        EXPECT_EQ(x, 10.0f);  // 1+2+3+4
        float y = static_cast<float>(r + 1);
        ASSERT_TRUE((*tp)->AllReduceSum(&y, 1).ok());
        EXPECT_EQ(y, r < 2 ? 3.0f : 7.0f);  // {1,2} and {3,4}
      }
    });
  }
  for (auto& t : threads) t.join();
}

// A peer that never shows up: over the in-memory store (rank 0 waits for rank 1's key)
// and over the file store as the last rank (Gloo first reads the lower ranks' keys with
// get(), which the file store would let block for 30 s).
TEST(CommProcessGroup, ConnectTimesOutWhenAPeerNeverShowsUp) {
  ScopedTempDir dir("comm");
  auto file_store = MakeFileStore(dir.path());
  ASSERT_TRUE(file_store.ok());
  struct Case {
    std::shared_ptr<gloo::rendezvous::Store> store;
    int rank, size;
  };
  for (const Case& c : {Case{std::make_shared<gloo::rendezvous::HashStore>(), 0, 2},
                        Case{*file_store, 2, 3}}) {
    GroupOptions opt = Opts(milliseconds(300));
    opt.describe_lost_peers = [] { return "rank 1 (pid 4242) is gone"; };
    const auto start = Clock::now();
    auto pg = ProcessGroup::Connect(c.store, "lonely", c.rank, c.size, opt);
    const long long ms = MsSince(start);
    std::cout << "[ measured ] connect as rank " << c.rank << " of " << c.size << " gave up after "
              << ms << " ms (timeout 300 ms)\n";
    ASSERT_FALSE(pg.ok());
    EXPECT_EQ(pg.status().code(), StatusCode::kDeadlineExceeded) << pg.status().ToString();
    EXPECT_NE(pg.status().message().find("'lonely'"), std::string::npos);
    EXPECT_NE(pg.status().message().find("rank 1 (pid 4242) is gone"), std::string::npos);
    EXPECT_LT(ms, 3000) << "hang guard: expected ~300 ms";
  }
}

// A store view that publishes this rank's address and then fails, as a process that
// dies between publishing and the TCP handshake would.
class DieAfterPublishStore : public gloo::rendezvous::Store {
 public:
  explicit DieAfterPublishStore(std::shared_ptr<gloo::rendezvous::Store> inner) : inner_(std::move(inner)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    inner_->set(key, data);
    if (key.find("rank_") == std::string::npos) throw std::runtime_error("simulated death");
  }
  std::vector<char> get(const std::string& key) override { return inner_->get(key); }
  void wait(const std::vector<std::string>& keys) override { inner_->wait(keys); }
  void wait(const std::vector<std::string>& keys, const milliseconds& timeout) override {
    inner_->wait(keys, timeout);
  }

 private:
  std::shared_ptr<gloo::rendezvous::Store> inner_;
};

// Whether the survivor is the connecting side (refused at once) or the listening side
// (waits for the handshake) depends on the ports drawn, so try a few times.
TEST(CommProcessGroup, ConnectFailsBoundedWhenAPeerDiesAfterPublishing) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto store = std::make_shared<gloo::rendezvous::HashStore>();
    const GroupOptions opt = Opts(milliseconds(300));
    std::thread dying([&] {
      auto dead = ProcessGroup::Connect(std::make_shared<DieAfterPublishStore>(store), "p", 1, 2, opt);
      EXPECT_FALSE(dead.ok());
    });
    const auto start = Clock::now();
    auto pg = ProcessGroup::Connect(store, "p", 0, 2, opt);
    const long long ms = MsSince(start);
    dying.join();
    std::cout << "[ measured ] connect to a peer that died after publishing gave up after " << ms
              << " ms (timeout 300 ms): " << pg.status().ToString().substr(0, 120) << "\n";
    ASSERT_FALSE(pg.ok());
    EXPECT_TRUE(pg.status().code() == StatusCode::kDeadlineExceeded ||
                pg.status().code() == StatusCode::kUnavailable) << pg.status().ToString();
    EXPECT_LT(ms, 3000) << "hang guard: expected at most ~2x 300 ms";
  }
}

// Rank 2 is connected but never enters the collective: the others must give up at the
// timeout (a hang fails the test), name the group, and refuse later calls.
TEST(CommProcessGroup, StalledPeerFailsAtTheTimeout) {
  auto store = std::make_shared<gloo::rendezvous::HashStore>();
  GroupOptions opt = Opts(milliseconds(300));
  opt.describe_lost_peers = [] { return "rank 2 stopped reporting"; };
  std::atomic<int> done{0};
  std::vector<Status> st(2);
  std::vector<long long> ms(2);
  RunRanks(store, "stall", 3, opt, [&](int rank, ProcessGroup& pg) {
    if (rank == 2) {
      // Stay connected but never call the collective (bounded, in case a peer failed).
      const auto start = Clock::now();
      while (done.load() < 2 && MsSince(start) < 10000) std::this_thread::sleep_for(milliseconds(5));
      return;
    }
    std::vector<float> x(1000, 1.0f);
    const auto start = Clock::now();
    st[rank] = pg.AllReduceSum(x.data(), x.size());
    ms[rank] = MsSince(start);
    EXPECT_EQ(pg.Barrier().code(), StatusCode::kFailedPrecondition);
    done.fetch_add(1);
  });
  bool any_deadline = false;
  for (int r = 0; r < 2; ++r) {
    std::cout << "[ measured ] stalled peer: rank " << r << " failed after " << ms[r]
              << " ms (timeout 300 ms): " << st[r].ToString().substr(0, 160) << "\n";
    EXPECT_FALSE(st[r].ok());
    EXPECT_NE(st[r].message().find("'stall'"), std::string::npos) << st[r].ToString();
    EXPECT_NE(st[r].message().find("rank 2 stopped reporting"), std::string::npos);
    EXPECT_LT(ms[r], 5000) << "hang guard: expected ~300 ms";
    any_deadline |= st[r].code() == StatusCode::kDeadlineExceeded;
  }
  EXPECT_TRUE(any_deadline) << "at least one rank must have hit the timeout itself";
}

// --- Ranks as processes ------------------------------------------------------------

// What a forked rank reports back: "<status code> <elapsed ms>\n<message>".
struct ChildReport {
  int code = -1;
  long long ms = -1;
  std::string message;
};

ChildReport ReadReport(const std::string& path) {
  ChildReport rep;
  std::ifstream f(path);
  f >> rep.code >> rep.ms;
  std::getline(f, rep.message);
  std::getline(f, rep.message);
  return rep;
}

// Liveness probe as a controller would answer it: a rank whose process is gone (or a
// zombie awaiting its parent) is named with its pid. Polls briefly because the peer's
// sockets close a moment before the kernel marks it a zombie.
std::string DescribeGone(const std::string& dir, int world) {
  for (int attempt = 0; attempt < 10; ++attempt) {
    std::string out;
    for (int r = 0; r < world; ++r) {
      std::ifstream pidf(dir + "/pid." + std::to_string(r));
      long pid = 0;
      if (!(pidf >> pid)) continue;
      std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
      std::string line;
      std::getline(stat, line);
      const auto close = line.rfind(')');
      if (!stat || (close != std::string::npos && line.substr(close + 2, 1) == "Z")) {
        out += (out.empty() ? "" : ", ") + ("rank " + std::to_string(r) + " (pid " + std::to_string(pid) + ") is gone");
      }
    }
    if (!out.empty()) return out;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return "";
}

// Forks `world` ranks over a file store. After one good allreduce, rank `victim` runs
// `fail` (dies or stops); the others time a second allreduce and report. Returns the
// survivors' reports; the victim is killed and reaped here.
std::vector<ChildReport> RunForkedRanks(int world, int victim, milliseconds timeout,
                                        void (*fail)(), int* victim_signal) {
  ScopedTempDir dir("comm");
  std::vector<pid_t> pids(world, -1);
  for (int r = 0; r < world; ++r) {
    pids[r] = fork();
    if (pids[r] != 0) continue;
    // Child: never return into gtest; report through files and the exit code.
    std::ofstream(dir.path() + "/pid." + std::to_string(r)) << getpid() << "\n";
    auto store = MakeFileStore(dir.path() + "/store");
    GroupOptions opt = Opts(timeout);
    const std::string d = dir.path();
    // The probe's own polling is not failure-detection time; keep it out of the report.
    static long long probe_ms = 0;
    opt.describe_lost_peers = [d, world] {
      const auto t = Clock::now();
      std::string s = DescribeGone(d, world);
      probe_ms += MsSince(t);
      return s;
    };
    if (!store.ok()) _exit(3);
    auto pg = ProcessGroup::Connect(*store, "gen/0/all", r, world, opt);
    if (!pg.ok()) _exit(4);
    std::vector<float> x(1 << 18, 1.0f);
    if (!(*pg)->AllReduceSum(x.data(), x.size()).ok() || x[0] != static_cast<float>(world)) _exit(5);
    if (r == victim) fail();
    const auto start = Clock::now();
    Status st = (*pg)->AllReduceSum(x.data(), x.size());
    const long long ms = MsSince(start) - probe_ms;
    std::ofstream(dir.path() + "/report." + std::to_string(r))
        << static_cast<int>(st.code()) << " " << ms << "\n" << st.message() << "\n";
    _exit(st.ok() ? 6 : 0);
  }
  // Parent: reap the survivors (killing all on a hang), then the victim.
  const auto deadline = Clock::now() + std::chrono::seconds(15);
  std::vector<int> exit_status(world, -1);
  int pending = world - 1;
  while (pending > 0 && Clock::now() < deadline) {
    for (int r = 0; r < world; ++r) {
      if (r == victim || exit_status[r] != -1) continue;
      int wst = 0;
      if (waitpid(pids[r], &wst, WNOHANG) == pids[r]) {
        exit_status[r] = wst;
        --pending;
      }
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  for (int r = 0; r < world; ++r) {
    if (r == victim || exit_status[r] == -1) kill(pids[r], SIGKILL);
  }
  std::vector<ChildReport> reports;
  for (int r = 0; r < world; ++r) {
    int wst = 0;
    if (r == victim || exit_status[r] == -1) waitpid(pids[r], &wst, 0);
    if (r == victim) {
      *victim_signal = WIFSIGNALED(wst) ? WTERMSIG(wst) : -1;
      continue;
    }
    EXPECT_NE(exit_status[r], -1) << "rank " << r << " hung past 15 s";
    EXPECT_TRUE(WIFEXITED(exit_status[r]) && WEXITSTATUS(exit_status[r]) == 0)
        << "rank " << r << " exit status " << exit_status[r];
    reports.push_back(ReadReport(dir.path() + "/report." + std::to_string(r)));
  }
  return reports;
}

void KillSelf() { raise(SIGKILL); }
void StopSelf() { raise(SIGSTOP); }

// A rank killed mid-job: the survivors (including rank 0, which is not a ring neighbour
// of rank 2) must fail on the closed connections, far sooner than the 10 s timeout.
// An abort reaches a collective already blocked on a peer that will never answer (a
// frozen or cut-off host): it ends within a few cancel polls, not at the 30 s timeout.
TEST(CommProcessGroup, CancelEndsABlockedCollective) {
  auto store = std::make_shared<gloo::rendezvous::HashStore>();
  std::atomic<bool> cancel{false};
  GroupOptions opt = Opts(milliseconds(30000));
  opt.cancelled = [&] { return cancel.load(); };
  std::atomic<int> done{0};
  std::vector<Status> st(2);
  std::vector<Clock::time_point> ended(2);
  std::atomic<Clock::time_point> cancel_at{Clock::time_point::max()};
  std::thread canceller([&] {
    std::this_thread::sleep_for(milliseconds(300));
    cancel_at = Clock::now();
    cancel = true;
  });
  RunRanks(store, "cancel", 3, opt, [&](int rank, ProcessGroup& pg) {
    if (rank == 2) {  // connected, then silent (bounded, in case the others hang)
      const auto start = Clock::now();
      while (done.load() < 2 && MsSince(start) < 20000) std::this_thread::sleep_for(milliseconds(5));
      return;
    }
    std::vector<float> x(1000, 1.0f);
    st[rank] = pg.AllReduceSum(x.data(), x.size());
    ended[rank] = Clock::now();
    EXPECT_EQ(pg.Barrier().code(), StatusCode::kFailedPrecondition);
    done.fetch_add(1);
  });
  canceller.join();
  // Order, not speed: each collective ended after the cancel, with the cancel's status,
  // and before the 30 s timeout could have ended it (a loaded machine may take a while).
  for (int r = 0; r < 2; ++r) {
    const long long ms = std::chrono::duration_cast<milliseconds>(ended[r] - cancel_at.load()).count();
    std::cout << "[ measured ] cancelled collective: rank " << r << " ended " << ms
              << " ms after the cancel (timeout 30000 ms): " << st[r].ToString().substr(0, 160) << "\n";
    EXPECT_EQ(st[r].code(), StatusCode::kCancelled) << st[r].ToString();
    EXPECT_NE(st[r].message().find("cancelled"), std::string::npos) << st[r].ToString();
    EXPECT_GE(ended[r], cancel_at.load()) << "the collective ended before the cancel";
    EXPECT_LT(ms, 15000) << "hang guard: the abort must end the blocked collective, not the 30 s timeout (expected ~"
                         << kCancelPoll.count() << " ms)";
  }
}

// Rank 0 blocked in each collective on rank 1, which is connected but never takes part
// (a frozen host); only rank 0 is cancelled, so nothing but its own abort can end the
// wait. The broadcast from rank 0 waits to *send*: Gloo wakes a failed pair's pending
// receives but not a send the peer never asked for, so only the abort of the waiting
// buffer ends it (before the collectives ran on registered buffers, it waited the
// whole timeout).
TEST(CommProcessGroup, CancelEndsEveryKindOfCollectiveWhetherItWaitsToSendOrToReceive) {
  struct Op {
    const char* name;
    std::function<Status(ProcessGroup&)> call;
  };
  // Larger than the sockets' buffers, so that a send cannot complete into the kernel.
  std::vector<float> buf(1 << 22, 1.0f), big(2 * buf.size());
  const std::vector<Op> ops = {
      {"Broadcast from the waiting rank", [&](ProcessGroup& pg) { return pg.Broadcast(buf.data(), buf.size(), 0); }},
      {"Broadcast to the waiting rank", [&](ProcessGroup& pg) { return pg.Broadcast(buf.data(), buf.size(), 1); }},
      {"AllReduceSum", [&](ProcessGroup& pg) { return pg.AllReduceSum(buf.data(), buf.size()); }},
      {"AllReduceSumBucketed", [&](ProcessGroup& pg) { return pg.AllReduceSumBucketed(buf.data(), buf.size(), 1000); }},
      {"AllGather", [&](ProcessGroup& pg) { return pg.AllGather(buf.data(), buf.size(), big.data()); }},
      {"ReduceScatterSum", [&](ProcessGroup& pg) { return pg.ReduceScatterSum(big.data(), buf.data(), buf.size()); }},
      {"Barrier", [&](ProcessGroup& pg) { return pg.Barrier(); }},
  };
  for (const bool cancel_first : {false, true})
  for (const Op& op : ops) {
    auto store = std::make_shared<gloo::rendezvous::HashStore>();
    std::atomic<bool> cancel{false}, rank0_done{false};
    Status st;
    long long ms_after_cancel = -1;
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        GroupOptions opt = Opts(milliseconds(20000));
        if (r == 0) opt.cancelled = [&] { return cancel.load(); };
        auto pg = ProcessGroup::Connect(store, std::string(cancel_first ? "cancelled/" : "cancel/") + op.name, r, 2, opt);
        ASSERT_TRUE(pg.ok()) << pg.status().ToString();
        if (r == 1) {  // connected, then silent (bounded, in case rank 0 hangs)
          WaitUntil([&] { return rank0_done.load(); }, milliseconds(25000));
          return;
        }
        Clock::time_point cancel_at;
        std::thread canceller([&] {
          // Before the collective starts, or while it blocks.
          if (!cancel_first) std::this_thread::sleep_for(milliseconds(200));
          cancel_at = Clock::now();
          cancel = true;
        });
        if (cancel_first) {  // the watcher has failed the pairs before the collective posts anything
          canceller.join();
          std::this_thread::sleep_for(3 * kCancelPoll);
        }
        st = op.call(**pg);
        if (!cancel_first) canceller.join();
        ms_after_cancel = MsSince(cancel_at);
        rank0_done = true;
      });
    }
    for (auto& t : threads) t.join();
    std::cout << "[ measured ] " << (cancel_first ? "after a cancel: " : "cancelled: ") << op.name << " ended " << ms_after_cancel
              << " ms after the cancel (timeout 20000 ms): " << st.ToString().substr(0, 120) << "\n";
    EXPECT_EQ(st.code(), StatusCode::kCancelled) << op.name << ": " << st.ToString();
    EXPECT_LT(ms_after_cancel, 10000) << op.name << ": the abort must end the wait, not the 20 s timeout (expected ~"
                                      << kCancelPoll.count() << " ms)";
  }
}

TEST(CommProcessGroup, DeadPeerProcessFailsFast) {
  int sig = 0;
  auto reports = RunForkedRanks(4, 2, milliseconds(10000), &KillSelf, &sig);
  EXPECT_EQ(sig, SIGKILL);
  ASSERT_EQ(reports.size(), 3u);
  for (const auto& rep : reports) {
    std::cout << "[ measured ] dead peer: survivor failed after " << rep.ms
              << " ms (timeout 10000 ms): " << rep.message.substr(0, 200) << "\n";
    EXPECT_EQ(rep.code, static_cast<int>(StatusCode::kUnavailable)) << rep.message;
    EXPECT_GE(rep.ms, 0);
    EXPECT_LT(rep.ms, 5000) << "should fail on the reset connection, not at the timeout";
    EXPECT_NE(rep.message.find("gen/0/all"), std::string::npos) << rep.message;
    EXPECT_NE(rep.message.find("rank 2 (pid"), std::string::npos) << rep.message;
  }
}

// Rank 1 has posted its receive of a large broadcast and then freezes mid-transfer (a
// host that stops): rank 0's send is half written, and Gloo does not wake a half-written
// send when its pair fails. The generation's abort must still end rank 0's wait within a
// few cancel polls, not at the 8 s timeout (as it did when Gloo's broadcast owned the
// buffers: the stall seen in the elastic recovery test).
TEST(CommProcessGroup, CancelEndsASendHalfWrittenToAPeerThatFroze) {
  ScopedTempDir dir("comm");
  const size_t n = size_t{1} << 25;  // 128 MB: far more than a socket holds
  const std::string cancel_file = dir.path() + "/cancel";
  std::vector<pid_t> pids(2, -1);
  for (int r = 0; r < 2; ++r) {
    pids[r] = fork();
    if (pids[r] != 0) continue;
    auto store = MakeFileStore(dir.path() + "/store");
    if (!store.ok()) _exit(3);
    GroupOptions opt = Opts(milliseconds(8000));
    if (r == 0) opt.cancelled = [cancel_file] { return std::filesystem::exists(cancel_file); };
    auto pg = ProcessGroup::Connect(*store, "gen/0/all", r, 2, opt);
    if (!pg.ok()) _exit(4);
    std::vector<float> x(n, static_cast<float>(r));
    if (r == 1) {
      std::thread freeze([] {
        std::this_thread::sleep_for(milliseconds(3));  // the receive is posted, bytes are flowing
        raise(SIGSTOP);
      });
      freeze.detach();
      (void)(*pg)->Broadcast(x.data(), n, 0);
      _exit(0);
    }
    const auto start = Clock::now();
    Status st = (*pg)->Broadcast(x.data(), n, 0);
    std::ofstream(dir.path() + "/report.0") << static_cast<int>(st.code()) << " " << MsSince(start) << "\n"
                                            << st.message() << "\n";
    _exit(0);
  }
  // Rank 1 stops itself; give rank 0 time to block on the half-written send, then abort.
  WaitUntil([&] {
    std::ifstream stat("/proc/" + std::to_string(pids[1]) + "/stat");
    std::string line;
    std::getline(stat, line);
    const auto close = line.rfind(')');
    return close != std::string::npos && line.substr(close + 2, 1) == "T";
  }, milliseconds(10000));
  std::this_thread::sleep_for(milliseconds(500));
  const auto cancel_at = Clock::now();
  std::ofstream(cancel_file) << "1\n";
  int wst = 0;
  WaitUntil([&] { return waitpid(pids[0], &wst, WNOHANG) == pids[0]; }, milliseconds(20000));
  const long long ms_after_cancel = MsSince(cancel_at);
  kill(pids[0], SIGKILL);
  kill(pids[1], SIGKILL);
  waitpid(pids[0], &wst, 0);
  waitpid(pids[1], &wst, 0);
  const ChildReport rep = ReadReport(dir.path() + "/report.0");
  std::cout << "[ measured ] send half-written to a frozen peer: ended " << ms_after_cancel
            << " ms after the cancel (timeout 8000 ms): " << rep.message.substr(0, 200) << "\n";
  EXPECT_EQ(rep.code, static_cast<int>(StatusCode::kCancelled)) << rep.message;
  EXPECT_LT(ms_after_cancel, 4000) << "the abort must end the send's wait, not the 8 s timeout (expected ~"
                                   << kCancelPoll.count() << " ms)";
}

// A rank that is alive but frozen (SIGSTOP keeps its sockets open): the others can only
// notice at the timeout.
TEST(CommProcessGroup, FrozenPeerProcessFailsAtTheTimeout) {
  int sig = 0;
  auto reports = RunForkedRanks(3, 1, milliseconds(500), &StopSelf, &sig);
  EXPECT_EQ(sig, SIGKILL);  // stopped until the parent killed it
  ASSERT_EQ(reports.size(), 2u);
  bool any_deadline = false;
  for (const auto& rep : reports) {
    std::cout << "[ measured ] frozen peer: survivor failed after " << rep.ms
              << " ms (timeout 500 ms): " << rep.message.substr(0, 200) << "\n";
    EXPECT_NE(rep.code, 0) << rep.message;
    EXPECT_GE(rep.ms, 0);
    EXPECT_LT(rep.ms, 5000) << "hang guard: expected ~500 ms";
    any_deadline |= rep.code == static_cast<int>(StatusCode::kDeadlineExceeded);
  }
  EXPECT_TRUE(any_deadline);
}

}  // namespace
}  // namespace elastrain
