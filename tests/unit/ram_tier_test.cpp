// The RAM tier's pieces (issue #18): buddy placement and the choice of a peer restore
// (plan/ram_tier.h), and a holder's double-buffered snapshot and its checksums
// (train/peer_snapshot.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "plan/ram_tier.h"
#include "train/peer_snapshot.h"

namespace elastrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(BuddyRanks, CopiesGoToOtherHostsFirstAndSpreadOverTheirRanks) {
  // hosts a, b, c with two ranks each
  const std::vector<std::string> hosts = {"a", "a", "b", "b", "c", "c"};
  auto b1 = BuddyRanks(hosts, 1);
  EXPECT_THAT(b1[0], ElementsAre(2));  // next host, same position
  EXPECT_THAT(b1[1], ElementsAre(3));
  EXPECT_THAT(b1[4], ElementsAre(0));  // the ring wraps
  auto b2 = BuddyRanks(hosts, 2);
  EXPECT_THAT(b2[0], ElementsAre(2, 4));  // copy k on the k-th next host
  EXPECT_THAT(b2[3], ElementsAre(5, 1));
  // Every rank is the buddy of exactly one rank with one replica: the sends spread.
  std::vector<int> load(6, 0);
  for (const auto& b : b1) ++load[b[0]];
  EXPECT_THAT(load, ElementsAre(1, 1, 1, 1, 1, 1));
}

TEST(BuddyRanks, NeverSelfNeverTwiceAndOwnHostOnlyWhenNeeded) {
  const std::vector<std::string> one_host = {"a", "a", "a"};
  auto b = BuddyRanks(one_host, 5);  // more replicas than other ranks
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(b[r].size(), 2u);
    std::set<int> s(b[r].begin(), b[r].end());
    EXPECT_EQ(s.size(), 2u);
    EXPECT_FALSE(s.count(r));
  }
  const std::vector<std::string> two_hosts = {"a", "a", "b"};
  auto c = BuddyRanks(two_hosts, 2);
  EXPECT_THAT(c[0], ElementsAre(2, 1));  // the other host first, then its own
  EXPECT_THAT(c[2], ElementsAre(0, 1));
  EXPECT_TRUE(BuddyRanks({"a"}, 1)[0].empty());
  EXPECT_TRUE(BuddyRanks({"a", "b"}, 0)[0].empty());
  EXPECT_TRUE(BuddyRanks({"a", "b"}, -3)[1].empty());
}

std::vector<ShardCopy> Owned(int world, int64_t step) {
  std::vector<ShardCopy> c;
  for (int r = 0; r < world; ++r) c.push_back({r, r, step});
  return c;
}

TEST(ChoosePeerRestore, ADeadRanksShardComesFromItsBuddy) {
  auto copies = Owned(4, 10);
  copies.push_back({2, 3, 10});  // rank 3 holds rank 2's copy
  copies.push_back({3, 0, 10});
  auto c = ChoosePeerRestore(4, {true, true, false, true}, copies, /*disk_step=*/0);
  ASSERT_TRUE(c.from_memory) << c.why;
  EXPECT_EQ(c.step, 10);
  EXPECT_THAT(c.source, ElementsAre(0, 1, 3, 3));  // owners serve their own shards
  EXPECT_THAT(c.why, HasSubstr("1 of 4 from a buddy"));
}

TEST(ChoosePeerRestore, TheNewestWholeStepWinsAndATornNewerOneIsIgnored) {
  auto copies = Owned(3, 11);  // survivors are at step 11 ...
  copies.push_back({1, 2, 10});  // ... but the dead rank 1's copy is of step 10 only
  for (int r : {0, 2}) copies.push_back({r, r, 10});
  auto c = ChoosePeerRestore(3, {true, false, true}, copies, 5);
  ASSERT_TRUE(c.from_memory) << c.why;
  EXPECT_EQ(c.step, 10);
  EXPECT_THAT(c.source, ElementsAre(0, 2, 2));
}

TEST(ChoosePeerRestore, AShardAndItsOnlyBuddyLostFallsBackToDiskSayingWhy) {
  auto copies = Owned(4, 10);
  copies.push_back({1, 2, 10});
  auto c = ChoosePeerRestore(4, {true, false, false, true}, copies, 0);
  EXPECT_FALSE(c.from_memory);
  EXPECT_THAT(c.why, HasSubstr("no surviving copy of shard 1"));
}

TEST(ChoosePeerRestore, DiskWinsWhenNewer) {
  auto c = ChoosePeerRestore(2, {true, true}, Owned(2, 10), 20);
  EXPECT_FALSE(c.from_memory);
  EXPECT_THAT(c.why, HasSubstr("older than the disk checkpoint of step 20"));
  EXPECT_TRUE(ChoosePeerRestore(2, {true, true}, Owned(2, 20), 20).from_memory);
}

TEST(ChoosePeerRestore, HostileReportsAreIgnored) {
  // Copies naming ranks out of range, dead holders or negative steps count for nothing.
  std::vector<ShardCopy> copies = {{0, 0, 5}, {1, 7, 5}, {1, -1, 5}, {9, 0, 5}, {1, 0, -3}};
  auto c = ChoosePeerRestore(2, {true, false}, copies, -1);
  EXPECT_FALSE(c.from_memory);
  EXPECT_FALSE(ChoosePeerRestore(0, {}, {}, -1).from_memory);
  EXPECT_FALSE(ChoosePeerRestore(-4, {}, {{0, 0, 1}}, -1).from_memory);
  EXPECT_FALSE(ChoosePeerRestore(3, {true}, Owned(3, 1), -1).from_memory);  // short survivors list
}

TEST(ChoosePeerRestore, SendsSpreadOverHolders) {
  // Ranks 0 and 1 dead; both survivors hold both dead shards: one each.
  std::vector<ShardCopy> copies = {{2, 2, 4}, {3, 3, 4}, {0, 2, 4}, {0, 3, 4}, {1, 2, 4}, {1, 3, 4}};
  auto c = ChoosePeerRestore(4, {false, false, true, true}, copies, 0);
  ASSERT_TRUE(c.from_memory) << c.why;
  EXPECT_NE(c.source[0], c.source[1]);
}

std::vector<float> Shard(size_t n, float base) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = base + static_cast<float>(i);
  return v;
}

TEST(SnapshotSlot, ACommittedSnapshotBecomesCompleteOnlyIfItHashesRight) {
  SnapshotSlot slot;
  EXPECT_FALSE(slot.Complete().has_value());
  const auto a = Shard(1000, 1);
  std::copy(a.begin(), a.end(), slot.Begin(7, a.size()));
  ASSERT_TRUE(slot.Commit(SnapshotChecksum(a.data(), a.size())).ok());
  auto c = slot.Complete();
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->step, 7);
  EXPECT_EQ(std::vector<float>(c->data, c->data + c->size), a);

  // A wrong checksum: discarded, step 7 stays.
  const auto b = Shard(1000, 2);
  std::copy(b.begin(), b.end(), slot.Begin(8, b.size()));
  Status st = slot.Commit(SnapshotChecksum(a.data(), a.size()));
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_THAT(st.message(), HasSubstr("step 8"));
  EXPECT_EQ(slot.Complete()->step, 7);
  EXPECT_EQ(std::vector<float>(slot.Complete()->data, slot.Complete()->data + 1000), a);
}

TEST(SnapshotSlot, ATornCopyNeverReplacesTheCompleteOne) {
  SnapshotSlot slot;
  const auto a = Shard(64, 1);
  std::copy(a.begin(), a.end(), slot.Begin(3, a.size()));
  ASSERT_TRUE(slot.Commit(SnapshotChecksum(a.data(), a.size())).ok());
  // The sender dies half-way through step 4's copy: half the floats written, no Commit.
  float* half = slot.Begin(4, 64);
  for (int i = 0; i < 32; ++i) half[i] = -1;
  EXPECT_TRUE(slot.in_flight());
  EXPECT_EQ(slot.Complete()->step, 3);
  slot.Abandon();
  EXPECT_FALSE(slot.Commit(0).ok());  // nothing in flight
  EXPECT_EQ(std::vector<float>(slot.Complete()->data, slot.Complete()->data + 64), a);
  // The next snapshot alternates buffers and flips cleanly.
  const auto b = Shard(64, 9);
  std::copy(b.begin(), b.end(), slot.Begin(5, b.size()));
  ASSERT_TRUE(slot.Commit(SnapshotChecksum(b.data(), b.size())).ok());
  EXPECT_EQ(slot.Complete()->step, 5);
  const auto c = Shard(64, 11);
  std::copy(c.begin(), c.end(), slot.Begin(6, c.size()));
  EXPECT_EQ(slot.Complete()->step, 5);  // in flight: step 5 readable, untouched
  EXPECT_EQ(std::vector<float>(slot.Complete()->data, slot.Complete()->data + 64), b);
  ASSERT_TRUE(slot.Commit(SnapshotChecksum(c.data(), c.size())).ok());
  EXPECT_EQ(slot.Complete()->step, 6);
}

// Writes `v` as the snapshot of `step` and commits it with its right checksum.
void Put(SnapshotSlot& slot, int64_t step, const std::vector<float>& v) {
  std::copy(v.begin(), v.end(), slot.Begin(step, v.size()));
  ASSERT_TRUE(slot.Commit(SnapshotChecksum(v.data(), v.size())).ok());
}

std::vector<float> Contents(const SnapshotSlot::View& v) { return std::vector<float>(v.data, v.data + v.size); }

TEST(SnapshotSlot, AfterTwoCommitsPreviousIsTheOlderOne) {
  SnapshotSlot slot;
  const auto a = Shard(100, 1), b = Shard(100, 2);
  Put(slot, 3, a);
  EXPECT_FALSE(slot.Previous().has_value()) << "one commit: nothing before it";
  Put(slot, 4, b);
  ASSERT_TRUE(slot.Previous().has_value());
  EXPECT_EQ(slot.Previous()->step, 3);
  EXPECT_EQ(Contents(*slot.Previous()), a);
  EXPECT_EQ(slot.Previous()->checksum, SnapshotChecksum(a.data(), a.size()));
  EXPECT_EQ(slot.Complete()->step, 4);
  EXPECT_EQ(Contents(*slot.Complete()), b);
}

TEST(SnapshotSlot, BeginInvalidatesPreviousAndKeepsComplete) {
  SnapshotSlot slot;
  const auto a = Shard(100, 1), b = Shard(100, 2), c = Shard(100, 3);
  Put(slot, 3, a);
  Put(slot, 4, b);
  // Step 5's copy is written over step 3's buffer.
  float* spare = slot.Begin(5, c.size());
  EXPECT_FALSE(slot.Previous().has_value()) << "its buffer is being overwritten";
  spare[0] = -1;
  EXPECT_EQ(slot.Complete()->step, 4);
  EXPECT_EQ(Contents(*slot.Complete()), b);
  // Abandoned half-way: still no Previous (the buffer holds neither step 3 nor step 5).
  slot.Abandon();
  EXPECT_FALSE(slot.Previous().has_value());
  EXPECT_EQ(slot.Complete()->step, 4);
  // The next good commit makes step 4 the previous one again.
  Put(slot, 6, c);
  ASSERT_TRUE(slot.Previous().has_value());
  EXPECT_EQ(slot.Previous()->step, 4);
  EXPECT_EQ(Contents(*slot.Previous()), b);
}

TEST(SnapshotSlot, AFailedCommitKeepsCompleteAndLeavesNoPrevious) {
  SnapshotSlot slot;
  const auto a = Shard(100, 1), b = Shard(100, 2), c = Shard(100, 3);
  Put(slot, 3, a);
  Put(slot, 4, b);
  std::copy(c.begin(), c.end(), slot.Begin(5, c.size()));
  EXPECT_EQ(slot.Commit(SnapshotChecksum(a.data(), a.size())).code(), StatusCode::kCorruption);
  EXPECT_EQ(slot.Complete()->step, 4);
  EXPECT_EQ(Contents(*slot.Complete()), b);
  EXPECT_FALSE(slot.Previous().has_value()) << "the torn step 5 must not pass for a verified snapshot";
}

TEST(SnapshotChecksum3, EqualsTheChecksumOfTheConcatenation) {
  const size_t n = 1001;
  const auto a = Shard(n, 1), b = Shard(n, 5000), c = Shard(n, -7000);
  std::vector<float> all(a);
  all.insert(all.end(), b.begin(), b.end());
  all.insert(all.end(), c.begin(), c.end());
  EXPECT_EQ(SnapshotChecksum3(a.data(), b.data(), c.data(), n), SnapshotChecksum(all.data(), all.size()));
  EXPECT_NE(SnapshotChecksum3(b.data(), a.data(), c.data(), n), SnapshotChecksum(all.data(), all.size()))
      << "the order of the buffers counts";
  EXPECT_EQ(SnapshotChecksum3(a.data(), b.data(), c.data(), 0), SnapshotChecksum(all.data(), 0));
  // What a holder does with a sender's three buffers: stores them back to back and
  // verifies them against the sender's SnapshotChecksum3.
  SnapshotSlot slot;
  std::copy(all.begin(), all.end(), slot.Begin(9, all.size()));
  EXPECT_TRUE(slot.Commit(SnapshotChecksum3(a.data(), b.data(), c.data(), n)).ok());
  EXPECT_EQ(slot.Complete()->step, 9);
}

}  // namespace
}  // namespace elastrain
