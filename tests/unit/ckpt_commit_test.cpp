// Checkpoint integrity: corruption and truncation caught, the commit protocol, the
// LATEST fallback, retention, and the fault points (crashes run in forked children).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "ckpt/checkpoint.h"
#include "common/files.h"
#include "test_dirs.h"

namespace elastrain::ckpt {
namespace {

namespace fs = std::filesystem;


// Two tensor ranks: "w" (4, 6) split along dim 1, "b" (5,) replicated, from rank 0.
std::vector<PieceSpec> RankPieces(int t) {
  std::vector<PieceSpec> p = {{"w", {4, 6}, 1, 3 * t, 3 * t + 3, 0, 12}};
  if (t == 0) p.push_back({"b", {5}, -1, 0, 5, 0, 5});
  return p;
}
float Value(int64_t step, const std::string& tensor, int64_t global) { return step * 100 + (tensor == "w" ? 0 : 50) + global; }

// A complete save by the protocol: shards, manifest, COMMITTED, LATEST.
Status Save(const std::string& run, int64_t step) {
  const std::string dir = CheckpointDir(run, step);
  Manifest m;
  m.step = step;
  m.mesh = {1, 1, 2, 2};
  for (int t = 0; t < 2; ++t) {
    std::vector<PieceSpec> pieces = RankPieces(t);
    std::vector<std::vector<float>> data;
    std::vector<const float*> ptrs;
    for (const PieceSpec& p : pieces) {
      data.emplace_back();
      for (int64_t i = p.flat_begin; i < p.flat_end; ++i) data.back().push_back(Value(step, p.tensor, GlobalIndex(p, i)));
    }
    for (const auto& d : data) ptrs.push_back(d.data());
    ELASTRAIN_ASSIGN_OR_RETURN(ShardFileInfo info, WriteShardFile(dir + "/" + ShardFileName(StateKind::kParams, t),
                                                                  StateKind::kParams, pieces, ptrs));
    ELASTRAIN_RETURN_IF_ERROR(m.AddShard(info));
  }
  ELASTRAIN_RETURN_IF_ERROR(WriteManifest(dir, m));
  ELASTRAIN_RETURN_IF_ERROR(Commit(dir));
  return SetLatest(run, step);
}

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

void FlipByte(const std::string& path, int64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  char c = 0;
  f.read(&c, 1);
  c ^= 0x5a;
  f.seekp(offset);
  f.write(&c, 1);
}

TEST(CkptIntegrity, FlippedByteIsCaughtByVerifyAndByRead) {
  ScopedTempDir run_dir("ckpt_flip");
  const std::string run = run_dir.path();
  ASSERT_TRUE(Save(run, 1).ok());
  const std::string dir = CheckpointDir(run, 1);
  ASSERT_TRUE(VerifyCheckpoint(dir).ok());
  Manifest m = ReadManifest(dir).value();
  const PieceRecord& w1 = m.Find("w")->Pieces(StateKind::kParams)[1];
  ASSERT_EQ(w1.file, "params-00001.safetensors");
  FlipByte(dir + "/" + w1.file, w1.data_offset + 5);

  const std::vector<std::string> problems = FindProblems(dir);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_TRUE(Contains(problems[0], "params-00001.safetensors") && Contains(problems[0], "'w'")) << problems[0];
  EXPECT_EQ(VerifyCheckpoint(dir).code(), StatusCode::kCorruption);
  std::vector<float> out(24);
  Status st = ReadTensorSlice(m, dir, StateKind::kParams, {"w", {4, 6}, -1, 0, 0, 0, 24}, out.data());
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_TRUE(Contains(st.message(), "params-00001.safetensors") && Contains(st.message(), "'w'")) << st.message();
  // The columns of rank 0 never touch the damaged piece, so they still read.
  EXPECT_TRUE(ReadTensorSlice(m, dir, StateKind::kParams, {"w", {4, 6}, 1, 0, 3, 0, 12}, out.data()).ok());
  EXPECT_EQ(out[4], Value(1, "w", 7));  // local (1, 1) = global (1, 1)
}

TEST(CkptIntegrity, TruncatedFileAndMissingCommitAreReported) {
  ScopedTempDir run_dir("ckpt_trunc");
  const std::string run = run_dir.path();
  ASSERT_TRUE(Save(run, 1).ok());
  ASSERT_TRUE(Save(run, 2).ok());
  const std::string dir = CheckpointDir(run, 2);
  const std::string shard = dir + "/params-00000.safetensors";
  fs::resize_file(shard, fs::file_size(shard) - 7);
  Status st = VerifyCheckpoint(dir);
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_TRUE(Contains(st.message(), "params-00000.safetensors")) << st.message();
  std::vector<float> out(5);
  st = ReadTensorSlice(ReadManifest(dir).value(), dir, StateKind::kParams, {"b", {5}, -1, 0, 5, 0, 5}, out.data());
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_TRUE(Contains(st.message(), "params-00000.safetensors") && Contains(st.message(), "'b'")) << st.message();

  fs::remove(dir + "/" + kCommittedFile);
  const std::vector<std::string> problems = FindProblems(dir);
  ASSERT_GE(problems.size(), 2u);
  EXPECT_TRUE(Contains(problems[0], "COMMITTED")) << problems[0];
  EXPECT_EQ(LatestCommitted(run).value(), CheckpointDir(run, 1));  // LATEST names an uncommitted dir
}

TEST(CkptLatest, FallsBackToNewestCommitted) {
  ScopedTempDir run_dir("ckpt_latest");
  const std::string run = run_dir.path();
  EXPECT_EQ(LatestCommitted(run).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(Save(run, 10).ok());
  ASSERT_TRUE(Save(run, 20).ok());
  EXPECT_EQ(LatestCommitted(run).value(), CheckpointDir(run, 20));
  ASSERT_TRUE(WriteFileAtomic(run + "/checkpoints/LATEST", "step_00000010\n").ok());
  EXPECT_EQ(LatestCommitted(run).value(), CheckpointDir(run, 10));  // LATEST wins while valid
  ASSERT_TRUE(WriteFileAtomic(run + "/checkpoints/LATEST", "../../etc\n").ok());
  EXPECT_EQ(LatestCommitted(run).value(), CheckpointDir(run, 20));
  fs::remove(run + "/checkpoints/LATEST");
  EXPECT_EQ(LatestCommitted(run).value(), CheckpointDir(run, 20));
  EXPECT_EQ(SetLatest(run, 30).code(), StatusCode::kFailedPrecondition);  // never an uncommitted step
  auto list = ListCheckpoints(run).value();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_TRUE(list[0].committed && list[1].committed);
  EXPECT_GT(list[0].bytes, 0);
}

TEST(CkptRetention, KeepsNewestKAndProtectedAndInProgress) {
  ScopedTempDir run_dir("ckpt_retention");
  const std::string run = run_dir.path();
  for (int64_t s : {10, 20, 30, 40, 50}) ASSERT_TRUE(Save(run, s).ok());
  fs::create_directories(CheckpointDir(run, 25));  // stale partial save
  fs::create_directories(CheckpointDir(run, 60));  // a save in progress
  ASSERT_TRUE(ApplyRetention(run, 2, 20).ok());
  std::vector<int64_t> left;
  const std::vector<CheckpointInfo> all = ListCheckpoints(run).value();
  for (const CheckpointInfo& c : all) left.push_back(c.step);
  EXPECT_EQ(left, (std::vector<int64_t>{20, 40, 50, 60}));
  EXPECT_EQ(LatestCommitted(run).value(), CheckpointDir(run, 50));
  EXPECT_EQ(RemovePartial(CheckpointDir(run, 40)).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(RemovePartial(CheckpointDir(run, 60)).ok());
  EXPECT_FALSE(fs::exists(CheckpointDir(run, 60)));
}

TEST(CkptFault, FailWriteLeavesNoTempFiles) {
  ScopedTempDir run_dir("ckpt_failwrite");
  const std::string run = run_dir.path();
  ASSERT_EQ(::setenv("ELASTRAIN_FAULT", "fail_write", 1), 0);
  Status st = Save(run, 7);
  ::unsetenv("ELASTRAIN_FAULT");
  EXPECT_EQ(st.code(), StatusCode::kIOError);
  EXPECT_TRUE(Contains(st.message(), "params-00000.safetensors")) << st.message();
  EXPECT_TRUE(ListFilesRecursive(run).value().empty());
  EXPECT_EQ(LatestCommitted(run).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(Save(run, 7).ok());  // the fault is gone once unset
}

class CkptCrash : public ::testing::TestWithParam<const char*> {};

TEST_P(CkptCrash, PreviousCheckpointSurvivesAKilledSave) {
  ScopedTempDir run_dir(std::string("ckpt_crash_") + GetParam());
  const std::string run = run_dir.path();
  ASSERT_TRUE(Save(run, 10).ok());
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setenv("ELASTRAIN_FAULT", GetParam(), 1);
    Status st = Save(run, 20);
    ::_exit(st.ok() ? 0 : 3);  // reached only if the fault did not fire
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(wstatus)) << "child exited with " << WEXITSTATUS(wstatus);
  EXPECT_EQ(WTERMSIG(wstatus), SIGKILL);
  EXPECT_EQ(LatestCommitted(run).value(), CheckpointDir(run, 10));
  EXPECT_TRUE(VerifyCheckpoint(CheckpointDir(run, 10)).ok()) << VerifyCheckpoint(CheckpointDir(run, 10)).ToString();
  // The half-written save is pruned once a newer one commits, never before.
  ASSERT_TRUE(ApplyRetention(run, 3, -1).ok());
  EXPECT_TRUE(fs::exists(CheckpointDir(run, 20)));
  ASSERT_TRUE(Save(run, 30).ok());
  ASSERT_TRUE(ApplyRetention(run, 3, -1).ok());
  const bool step20_committed = std::string(GetParam()) == "crash_before_latest";
  EXPECT_EQ(fs::exists(CheckpointDir(run, 20)), step20_committed);
}

INSTANTIATE_TEST_SUITE_P(CkptPoints, CkptCrash,
                         ::testing::Values("crash_after_shard", "crash_before_manifest", "crash_before_commit",
                                           "crash_before_latest"));

}  // namespace
}  // namespace elastrain::ckpt
