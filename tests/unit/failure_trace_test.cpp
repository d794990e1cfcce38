// Failure traces (cost/failure_trace.h): both forms parse to the same events, the CSV
// form round-trips, the generator is reproducible and follows its spec, and hostile
// files (unknown events, negative or unordered times, bad targets, huge files) are
// refused naming the file, the line or event, and what was expected.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include <cstdio>
#include <fstream>

#include "cost/failure_trace.h"
#include "test_dirs.h"

namespace elastrain {
namespace {
using ::testing::HasSubstr;

const char* kCsv =
    "# a comment line\n"
    "time_seconds,event,target,factor,seconds\n"
    "30,kill,any,,\n"
    "95.5,preempt,1,,120\n"
    "200,slow,2,4,60\n"
    "250,unslow,2,,\n"
    "260,hang,0,,\n"
    "310,host_loss,h2,,\n";

TEST(FailureTrace, CsvAndJsonGiveTheSameEvents) {
  auto csv = ParseFailureTrace(kCsv, "t.csv");
  ASSERT_TRUE(csv.ok()) << csv.status().message();
  const char* json = R"({"comment": "the same", "events": [
      {"time_seconds": 30, "event": "kill", "target": "any"},
      {"time_seconds": 95.5, "event": "preempt", "target": 1, "seconds": 120},
      {"time_seconds": 200, "event": "slow", "target": 2, "factor": 4, "seconds": 60},
      {"time_seconds": 250, "event": "unslow", "target": "2"},
      {"time_seconds": 260, "event": "hang", "target": 0},
      {"time_seconds": 310, "event": "host_loss", "target": "h2"}]})";
  auto js = ParseFailureTrace(json, "t.json");
  ASSERT_TRUE(js.ok()) << js.status().message();
  ASSERT_EQ(csv->size(), 6u);
  EXPECT_EQ(FailureTraceCsv(*csv), FailureTraceCsv(*js));
  const TraceEvent& p = (*csv)[1];
  EXPECT_EQ(p.action, TraceAction::kPreempt);
  EXPECT_EQ(p.rank, 1);
  EXPECT_DOUBLE_EQ(p.seconds, 120);
  EXPECT_EQ((*csv)[0].rank, kAnyRank);
  EXPECT_DOUBLE_EQ((*csv)[2].factor, 4);
  EXPECT_EQ((*csv)[5].host, "h2");
}

TEST(FailureTrace, TheCsvFormRoundTrips) {
  auto a = ParseFailureTrace(kCsv, "t.csv");
  ASSERT_TRUE(a.ok());
  const std::string text = FailureTraceCsv(*a);
  auto b = ParseFailureTrace(text, "again.csv");
  ASSERT_TRUE(b.ok()) << b.status().message() << "\n" << text;
  EXPECT_EQ(FailureTraceCsv(*b), text);
}

// cost simulate --trace tells the two forms apart by the first line that is not a comment.
TEST(FailureTrace, AFailureTraceIsToldFromAPreemptionTraceByItsHeader) {
  EXPECT_TRUE(IsFailureTraceText(kCsv));
  EXPECT_TRUE(IsFailureTraceText("  {\"events\": []}"));
  EXPECT_FALSE(IsFailureTraceText("# time_seconds,event: not this form\ntimestamp_seconds,hosts_lost\n10,1\n"));
  EXPECT_FALSE(IsFailureTraceText(""));
}

TEST(FailureTrace, InterruptionsForTheSimulatorLeaveOutSlowdowns) {
  auto a = ParseFailureTrace(kCsv, "t.csv");
  ASSERT_TRUE(a.ok());
  const auto in = TraceInterruptions(*a);
  ASSERT_EQ(in.size(), 4u);  // kill, preempt, hang, host_loss
  EXPECT_DOUBLE_EQ(in[0].time_seconds, 30);
  EXPECT_DOUBLE_EQ(in[3].time_seconds, 310);
  EXPECT_EQ(in[3].hosts_lost, 1);
  // A killed or hung rank's slot is taken again at once; a preemption comes with a
  // notice and its slot returns after its seconds; a lost host never comes back.
  EXPECT_EQ(in[0].return_seconds, 0);
  EXPECT_FALSE(in[0].notice);
  EXPECT_EQ(in[1].return_seconds, 120);
  EXPECT_TRUE(in[1].notice);
  EXPECT_EQ(in[2].return_seconds, 0);
  EXPECT_TRUE(std::isinf(in[3].return_seconds));
  EXPECT_FALSE(in[3].notice);
  // A host_loss with seconds: a replacement host arrives then (no notice either way).
  auto replaced = ParseFailureTrace("time_seconds,event,target,factor,seconds\n10,host_loss,any,,600\n", "r.csv");
  ASSERT_TRUE(replaced.ok()) << replaced.status().message();
  EXPECT_EQ(FailureTraceCsv(*replaced), "time_seconds,event,target,factor,seconds\n10,host_loss,any,,600\n");
  const auto r = TraceInterruptions(*replaced);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].return_seconds, 600);
  EXPECT_FALSE(r[0].notice);
  EXPECT_FALSE(ParseFailureTrace("time_seconds,event,target,factor,seconds\n10,host_loss,h1,,-1\n", "r.csv").ok());
}

// Each hostile line is refused with the file, the line and what was expected.
TEST(FailureTrace, HostileCsvLinesAreRefusedByLine) {
  const std::string head = "time_seconds,event,target,factor,seconds\n";
  struct Case {
    std::string line, says;
  } cases[] = {
      {"10,explode,any,,", "event 'explode': expected one of kill, hang, preempt, host_loss, slow, unslow"},
      {"-5,kill,any,,", "time_seconds '-5'"},
      {"nan,kill,any,,", "time_seconds 'nan'"},
      {"1e30,kill,any,,", "time_seconds '1e30'"},
      {"10,kill,-1,,", "target '-1': expected a rank"},
      {"10,kill,1.5,,", "target '1.5'"},
      {"10,kill,9999999999,,", "target '9999999999'"},
      {"10,slow,1,1,", "factor '1': slow expects a factor in (1, 100]"},
      {"10,slow,1,,", "factor ''"},
      {"10,kill,1,4,", "only slow takes a factor"},
      {"10,kill,1,,5", "only slow, preempt and host_loss take seconds"},
      {"10,preempt,1,,-3", "seconds '-3'"},
      {"10,host_loss,,,", "host_loss expects a host name"},
      {"10,host_loss,a/b,,", "target 'a/b'"},
      {"10,kill", "t.csv:3"},
  };
  for (const Case& c : cases) {
    auto r = ParseFailureTrace(head + "1,kill,any,,\n" + c.line + "\n", "t.csv");
    ASSERT_FALSE(r.ok()) << c.line;
    EXPECT_THAT(r.status().message(), HasSubstr("t.csv:3")) << c.line;
    EXPECT_THAT(r.status().message(), HasSubstr(c.says)) << c.line;
  }
  auto order = ParseFailureTrace(head + "20,kill,any,,\n10,kill,any,,\n", "t.csv");
  ASSERT_FALSE(order.ok());
  EXPECT_THAT(order.status().message(), HasSubstr("t.csv:3: time_seconds 10: expected times in order"));
  auto header = ParseFailureTrace("time,event\n1,kill\n", "t.csv");
  ASSERT_FALSE(header.ok());
  EXPECT_THAT(header.status().message(), HasSubstr("t.csv"));
}

TEST(FailureTrace, HostileJsonIsRefusedByEvent) {
  struct Case {
    std::string text, says;
  } cases[] = {
      {"{", "t.json"},
      {"[1,2]", "t.json"},
      {R"({"events": 3})", "expected an object {\"events\""},
      {R"({"events": [], "run": "rm -rf /"})", "unknown key 'run'"},
      {R"({"events": [7]})", "events[0]: expected an object"},
      {R"({"events": [{"time_seconds": 1}]})", "events[0]: expected time_seconds and event"},
      {R"({"events": [{"time_seconds": 1, "event": "kill", "shell": "x"}]})", "events[0]: unknown key 'shell'"},
      {R"({"events": [{"time_seconds": [1], "event": "kill"}]})", "events[0]: time_seconds: expected a number"},
      {R"({"events": [{"time_seconds": 1, "event": "kill"}, {"time_seconds": 0.5, "event": "kill"}]})",
       "events[1]: time_seconds 0.5: expected times in order"},
  };
  for (const Case& c : cases) {
    auto r = ParseFailureTrace(c.text, "t.json");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_THAT(r.status().message(), HasSubstr(c.says)) << c.text;
  }
}

TEST(FailureTrace, AHugeFileIsRefusedBeforeItIsParsed) {
  std::string big = "time_seconds,event,target,factor,seconds\n";
  while (big.size() <= kMaxTraceBytes) big += "1,kill,any,,\n";
  auto r = ParseFailureTrace(big, "big.csv");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("big.csv: "));
  EXPECT_THAT(r.status().message(), HasSubstr("expected a trace of at most"));
  ScopedTempDir dir("failure_trace");
  const std::string path = dir.path() + "/big.csv";
  std::ofstream(path) << big;
  auto l = LoadFailureTrace(path);
  ASSERT_FALSE(l.ok());
  EXPECT_THAT(l.status().message(), HasSubstr("expected a trace of at most"));
  auto missing = LoadFailureTrace(dir.path() + "/none.csv");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("none.csv: cannot open it"));
}

TEST(FailureTrace, GeneratedHostLossesAreReplacedAfterTheReturnSeconds) {
  TraceSpec s;
  s.duration_seconds = 3600;
  s.rate_per_hour = 20;
  s.mix = {{TraceAction::kHostLoss, 1}};
  s.return_seconds = 45;
  auto a = GenerateFailureTrace(s);
  ASSERT_TRUE(a.ok());
  ASSERT_FALSE(a->empty());
  for (const TraceEvent& e : *a) {
    EXPECT_EQ(e.host, "any");
    EXPECT_DOUBLE_EQ(e.seconds, 45);
  }
  for (const PreemptionEvent& p : TraceInterruptions(*a)) EXPECT_EQ(p.return_seconds, 45);
}

TEST(FailureTrace, APoissonTraceIsReproducibleAndHasItsRate) {
  TraceSpec s;
  s.duration_seconds = 100 * 3600;
  s.rate_per_hour = 6;
  s.mix = {{TraceAction::kKill, 3}, {TraceAction::kPreempt, 1}};
  s.seed = 7;
  auto a = GenerateFailureTrace(s), b = GenerateFailureTrace(s);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(FailureTraceCsv(*a), FailureTraceCsv(*b));
  EXPECT_NEAR(static_cast<double>(a->size()), 600, 75);  // 600 expected, sd ~24.5
  int kills = 0;
  for (const TraceEvent& e : *a) {
    EXPECT_LT(e.time_seconds, s.duration_seconds);
    kills += e.action == TraceAction::kKill;
    if (e.action == TraceAction::kPreempt) {
      EXPECT_DOUBLE_EQ(e.seconds, s.return_seconds);
    }
  }
  EXPECT_NEAR(kills / static_cast<double>(a->size()), 0.75, 0.07);
  s.seed = 8;
  auto c = GenerateFailureTrace(s);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(FailureTraceCsv(c.value()), FailureTraceCsv(a.value()));
  auto back = ParseFailureTrace(FailureTraceCsv(*a), "gen.csv");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->size(), a->size());
}

TEST(FailureTrace, ABurstyTraceClustersItsEvents) {
  TraceSpec s;
  s.duration_seconds = 100 * 3600;
  s.rate_per_hour = 2;
  s.bursty = true;
  s.burst_extra = 3;
  s.burst_seconds = 60;
  auto a = GenerateFailureTrace(s);
  ASSERT_TRUE(a.ok());
  EXPECT_NEAR(static_cast<double>(a->size()), 200 * 4, 150);
  int close = 0;  // events within a burst's window of the one before
  for (size_t i = 1; i < a->size(); ++i) close += (*a)[i].time_seconds - (*a)[i - 1].time_seconds <= 60;
  EXPECT_GT(close, static_cast<int>(a->size()) / 2);
}

TEST(FailureTrace, BadSpecsAndMixesAreRefused) {
  TraceSpec s;
  s.rate_per_hour = 0;
  EXPECT_FALSE(GenerateFailureTrace(s).ok());
  s.rate_per_hour = 1;
  s.duration_seconds = -1;
  EXPECT_FALSE(GenerateFailureTrace(s).ok());
  auto m = ParseTraceMix("kill:2,preempt:1,slow");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->size(), 3u);
  for (const char* bad : {"", "kill:0", "kill:-1", "explode", "unslow", "kill:x"}) {
    auto r = ParseTraceMix(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
  EXPECT_THAT(ParseTraceMix("explode").status().message(), HasSubstr("bad entry 'explode'"));
}

}  // namespace
}  // namespace elastrain
