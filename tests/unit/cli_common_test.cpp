// The maps the CLI and the job API share: Status <-> HTTP status, job state -> exit code.
#include <gtest/gtest.h>

#include "cli/cli_common.h"
#include "common/http_status.h"
#include "wire/exit_codes.h"

namespace elastrain {
namespace {

TEST(HttpStatusTest, RoundTripsTheCodesTheApiAnswersWith) {
  for (const Status& st : {Status::InvalidArgument("bad"), Status::NotFound("gone"), Status::FailedPrecondition("no")}) {
    const Status back = StatusFromHttp(HttpStatusFor(st), st.message());
    EXPECT_EQ(back.code(), st.code()) << st.ToString();
    EXPECT_EQ(back.message(), st.message());
  }
  EXPECT_EQ(HttpStatusFor(Status::OK()), kHttpOk);
  EXPECT_TRUE(StatusFromHttp(kHttpOk, "").ok());
}

TEST(HttpStatusTest, OtherFailuresAreInternalOnTheWireAndBack) {
  EXPECT_EQ(HttpStatusFor(Status::IOError("disk")), kHttpInternalError);
  EXPECT_EQ(HttpStatusFor(Status::Unavailable("peer")), kHttpInternalError);
  const Status st = StatusFromHttp(503, "busy");
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_EQ(st.message(), "HTTP 503: busy");
  EXPECT_EQ(StatusFromHttp(kHttpUnauthorized, "token").code(), StatusCode::kInvalidArgument);
}

TEST(ExitCodeForJobStateTest, TerminalStatesAndTheRest) {
  EXPECT_EQ(ExitCodeForJobState(JobState::kSucceeded), kExitSuccess);
  EXPECT_EQ(ExitCodeForJobState(JobState::kStopped), kExitStopped);
  EXPECT_EQ(ExitCodeForJobState(JobState::kFailed), kExitFailure);
}

}  // namespace
}  // namespace elastrain
