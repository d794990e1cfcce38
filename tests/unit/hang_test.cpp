// Naming the rank a hung generation waits for (elastic/hang.h), without processes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "elastic/hang.h"

namespace elastrain {
namespace {
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr double kNow = 1000;

HangMember M(int rank, int64_t seq, bool inside, double last_progress, bool gone = false) {
  const std::string id = std::to_string(rank);
  return {rank, std::string("w").append(id), std::string("h").append(id), seq, "allreduce", inside, last_progress, gone};
}

TEST(Hang, ASilentRankIsBehindWhileTheOthersTalk) {
  // Rank 2 was stopped inside allreduce #41 (its last tick said so); the others wait in it.
  const HangDiagnosedEvent e =
      DiagnoseHang(7, {M(0, 41, true, kNow - 0.2), M(2, 41, true, kNow - 8), M(1, 41, true, kNow - 0.3)}, kNow,
                   "silent_rank");
  EXPECT_THAT(e.behind, ElementsAre(2));
  EXPECT_THAT(e.hosts, ElementsAre("h2"));
  ASSERT_EQ(e.ranks.size(), 3u);
  EXPECT_EQ(e.ranks[1].rank, 1) << "by rank";
  EXPECT_NEAR(e.ranks[2].silent_seconds, 8, 1e-9);
  EXPECT_EQ(e.generation, 7);
  EXPECT_EQ(e.trigger, "silent_rank");
  EXPECT_THAT(e.reason, HasSubstr("rank 2 on h2 is silent for 8.0s (in collective #41 (allreduce))"));
}

TEST(Hang, AGoneRankIsBehind) {
  const HangDiagnosedEvent e =
      DiagnoseHang(1, {M(0, 9, true, kNow), M(1, 9, false, kNow - 1, /*gone=*/true)}, kNow, "silent_rank");
  EXPECT_THAT(e.behind, ElementsAre(1));
  EXPECT_THAT(e.reason, HasSubstr("is gone"));
}

TEST(Hang, ARankWhoseReportsWentWithItsHostSaysSo) {
  HangMember lost = M(1, -1, false, 0, /*gone=*/true);
  lost.reported = false;  // its host's agent lease expired, its records with it
  const HangDiagnosedEvent e = DiagnoseHang(3, {M(0, 12, true, kNow - 0.1), lost}, kNow, "silent_rank");
  EXPECT_THAT(e.behind, ElementsAre(1));
  EXPECT_THAT(e.reason, HasSubstr("rank 1 on h1 is gone (no report of it left"));
}

TEST(Hang, TheRankThatNeverEnteredTheCollectiveIsBehind) {
  // Everyone talks; ranks 0, 1, 3 wait in #12, rank 2 is still after #11 (computing).
  std::vector<HangMember> ms = {M(0, 12, true, kNow), M(1, 12, true, kNow), M(2, 11, false, kNow), M(3, 12, true, kNow)};
  const HangDiagnosedEvent e = DiagnoseHang(4, ms, kNow, "collective_timeout");
  EXPECT_THAT(e.behind, ElementsAre(2));
  EXPECT_THAT(e.reason, HasSubstr("never entered collective #12"));
}

TEST(Hang, EveryoneInTheSameCollectiveNamesNobody) {
  const HangDiagnosedEvent e = DiagnoseHang(4, {M(0, 12, true, kNow), M(1, 12, true, kNow)}, kNow, "stalled");
  EXPECT_TRUE(e.behind.empty());
  EXPECT_THAT(e.reason, HasSubstr("no rank is behind"));
}

TEST(Hang, WhenEveryoneIsSilentTheViewIsStaleNotARank) {
  const HangDiagnosedEvent e =
      DiagnoseHang(4, {M(0, 12, true, kNow - 100), M(1, 12, true, kNow - 90)}, kNow, "stalled");
  EXPECT_TRUE(e.behind.empty()) << e.reason;
}

TEST(Hang, NoCollectiveYetAndNoReportsAreHandled) {
  const HangDiagnosedEvent e = DiagnoseHang(0, {M(0, -1, false, 0), M(1, -1, false, 0)}, kNow, "stalled");
  EXPECT_TRUE(e.behind.empty());
  EXPECT_THAT(e.reason, HasSubstr("none reported entering a collective"));
  EXPECT_TRUE(DiagnoseHang(0, {}, kNow, "stalled").behind.empty());
}

}  // namespace
}  // namespace elastrain
