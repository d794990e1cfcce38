// The typed vocabulary of wire/worker_vocab.h and the channel messages of
// wire/worker_messages.h keep the JSON that agents, workers and controllers of the
// version before them exchanged: the same keys and the same strings.
#include <gtest/gtest.h>

#include <stdexcept>

#include "wire/job_state.h"
#include "wire/protocol.h"
#include "wire/vocab_json.h"
#include "wire/worker_messages.h"
#include "wire/worker_vocab.h"

namespace elastrain {
namespace {

// Every value of the enum has exactly one word in its table (no alias on the wire), and
// word -> value -> word and value -> JSON -> value hold for each.
template <typename E, size_t N>
void ExpectRoundTrip(const std::array<Choice<E>, N>& table, std::initializer_list<E> all_values) {
  ASSERT_EQ(N, all_values.size()) << "one word per value";
  for (E v : all_values) {
    const std::string word = Name(v);
    EXPECT_EQ(word, ChoiceWord(table, v));
    EXPECT_NE(word, "?");
    auto parsed = Parse<E>(word);
    ASSERT_TRUE(parsed.ok()) << word;
    EXPECT_EQ(parsed.value(), v) << word;
    const nlohmann::json j = v;
    EXPECT_EQ(j, word);
    EXPECT_EQ(j.get<E>(), v) << word;
  }
}

TEST(WireVocab, EveryWordRoundTrips) {
  ExpectRoundTrip(kWorkerPhaseChoices, {WorkerPhase::kNone, WorkerPhase::kStarting, WorkerPhase::kIdle,
                                        WorkerPhase::kRunning, WorkerPhase::kLeaving, WorkerPhase::kExited});
  ExpectRoundTrip(kTrainPhaseChoices, {TrainPhase::kNone, TrainPhase::kSetup, TrainPhase::kRestore, TrainPhase::kTrain,
                                       TrainPhase::kEval, TrainPhase::kCheckpoint, TrainPhase::kIdle});
  ExpectRoundTrip(kGenerationOutcomeChoices,
                  {GenerationOutcome::kNone, GenerationOutcome::kCompleted, GenerationOutcome::kStopped,
                   GenerationOutcome::kFailed, GenerationOutcome::kAborted});
  ExpectRoundTrip(kExitKindChoices, {ExitKind::kNone, ExitKind::kFailure, ExitKind::kPreempted, ExitKind::kHung,
                                     ExitKind::kEnded, ExitKind::kSuccess});
  ExpectRoundTrip(kRestoreKindChoices, {RestoreKind::kCheckpoint, RestoreKind::kMemory, RestoreKind::kPeers});
  ExpectRoundTrip(kCommandActionChoices, {CommandAction::kKill, CommandAction::kHang, CommandAction::kHost,
                                          CommandAction::kTerminate, CommandAction::kHung, CommandAction::kSlow,
                                          CommandAction::kUnslow, CommandAction::kCheckHealth,
                                          CommandAction::kPreempt});
}

TEST(WireVocab, EveryJobStateRoundTrips) {
  const std::initializer_list<JobState> all = {JobState::kPending,   JobState::kRunning,
                                               JobState::kRecovering, JobState::kResizing,
                                               JobState::kWaitingForResources, JobState::kSucceeded,
                                               JobState::kFailed,    JobState::kStopped};
  ASSERT_EQ(kJobStateChoices.size(), all.size());
  for (JobState s : all) {
    const std::string word = JobStateName(s);
    EXPECT_EQ(word, ChoiceWord(kJobStateChoices, s));
    auto parsed = ParseJobState(word);
    ASSERT_TRUE(parsed.ok()) << word;
    EXPECT_EQ(parsed.value(), s);
    const nlohmann::json j = s;
    EXPECT_EQ(j, word);
    EXPECT_EQ(j.get<JobState>(), s);
  }
}

// Words come from other processes: any other string is an error naming it and listing
// the words (the empty word of "not set" is accepted but not listed).
TEST(WireVocab, EveryTableRefusesAnUnknownWordWithItsList) {
  auto msg = [](const auto& r) { return r.status().message(); };
  EXPECT_EQ(msg(Parse<WorkerPhase>("Idle")),
            "worker phase 'Idle': expected one of starting, idle, running, leaving, exited");
  EXPECT_EQ(msg(Parse<TrainPhase>("warmup")),
            "train phase 'warmup': expected one of setup, restore, train, eval, checkpoint, idle");
  EXPECT_EQ(msg(Parse<GenerationOutcome>("done")), "outcome 'done': expected one of completed, stopped, failed, aborted");
  EXPECT_EQ(msg(Parse<ExitKind>("crash")), "exit kind 'crash': expected one of failure, preempted, hung, ended, success");
  EXPECT_EQ(msg(Parse<RestoreKind>("disk")), "restore kind 'disk': expected one of checkpoint, memory, peers");
  EXPECT_EQ(msg(Parse<CommandAction>("explode")),
            "command action 'explode': expected one of kill, hang, host, terminate, hung, slow, unslow, check_health, preempt");
  auto js = ParseJobState("running");
  EXPECT_EQ(js.status().code(), StatusCode::kCorruption);
  EXPECT_EQ(msg(js), "job state 'running': expected one of PENDING, RUNNING, RECOVERING, RESIZING, "
                     "WAITING_FOR_RESOURCES, SUCCEEDED, FAILED, STOPPED");
  // From JSON: an exception that the record's Load turns into a Corruption naming it.
  EXPECT_THROW(nlohmann::json("explode").get<CommandAction>(), std::invalid_argument);
  EXPECT_THROW(nlohmann::json("running").get<JobState>(), std::invalid_argument);
}

TEST(WireVocab, NamesAreTheWireStrings) {
  EXPECT_STREQ(Name(WorkerPhase::kLeaving), "leaving");
  EXPECT_STREQ(Name(ExitKind::kEnded), "ended");
  EXPECT_STREQ(Name(GenerationOutcome::kAborted), "aborted");
  EXPECT_STREQ(Name(RestoreKind::kMemory), "memory");
  EXPECT_STREQ(Name(CommandAction::kTerminate), "terminate");
  EXPECT_STREQ(ExitEventName(ExitKind::kEnded), "worker_terminated");
  EXPECT_STREQ(ExitEventName(ExitKind::kHung), "worker_hung");
  EXPECT_STREQ(ExitEventName(ExitKind::kFailure), "worker_failed");
}

TEST(WireVocab, RecordsKeepTheirStrings) {
  AgentReport rep;
  rep.agent = "a1";
  WorkerRecord w;
  w.id = "a1-w0";
  w.phase = WorkerPhase::kExited;
  w.train_phase = TrainPhase::kCheckpoint;
  w.outcome = GenerationOutcome::kStopped;
  w.exit_kind = ExitKind::kPreempted;
  rep.workers.push_back(w);
  const std::string text = ToJson(rep);
  EXPECT_NE(text.find(R"("phase":"exited")"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("train_phase":"checkpoint")"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("outcome":"stopped")"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("exit_kind":"preempted")"), std::string::npos) << text;
  AgentReport back;
  ASSERT_TRUE(FromJson(text, &back).ok());
  ASSERT_EQ(back.workers.size(), 1u);
  EXPECT_EQ(back.workers[0].exit_kind, ExitKind::kPreempted);
  EXPECT_EQ(back.workers[0].train_phase, TrainPhase::kCheckpoint);

  // A default record carries empty strings, as before.
  EXPECT_NE(ToJson(AgentReport{"a", 0, {WorkerRecord()}}).find(R"("exit_kind":"")"), std::string::npos);
  // An unknown name fails the record, naming what is wrong.
  AgentReport bad;
  Status st = FromJson(R"({"agent":"a","workers":[{"phase":"sleeping"}]})", &bad);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("sleeping"), std::string::npos) << st.message();

  AgentCommand c{CommandAction::kHung, "a1-w0", 5, "job1"};
  EXPECT_EQ(ToJson(c),
            R"({"action":"hung","factor":0.0,"job_id":"job1","requested_at":5.0,"seconds":0.0,"worker":"a1-w0"})");
  // slow's factor and seconds (issue 32) are new: an older writer's command still loads.
  AgentCommand old_command;
  ASSERT_TRUE(FromJson(R"({"action":"kill","job_id":"job1","requested_at":5.0,"worker":"a1-w0"})", &old_command).ok());
  EXPECT_EQ(old_command.factor, 0);
  Plan p;
  p.restore.kind = RestoreKind::kMemory;
  EXPECT_NE(ToJson(p).find(R"("kind":"memory")"), std::string::npos);
}

TEST(WireMessages, JsonIsTheSameAsBefore) {
  EXPECT_EQ(ToJson(AgentMessage(StopMessage{3, kStopUser})).dump(), R"({"generation":3,"reason":"user","type":"stop"})");
  EXPECT_EQ(ToJson(AgentMessage(StopMessage{3, kStopResize})).dump(),
            R"({"generation":3,"reason":"resize","type":"stop"})");
  EXPECT_EQ(ToJson(AgentMessage(AbortMessage{7})).dump(), R"({"generation":7,"type":"abort"})");
  EXPECT_EQ(ToJson(AgentMessage(ExitMessage{})).dump(), R"({"type":"exit"})");
  // ready gained peak_flops (the host's measured SGEMM ceiling); an older reader ignores it.
  EXPECT_EQ(ToJson(WorkerMessage(ReadyMessage{42, 9, 5e10})).dump(),
            R"({"peak_flops":50000000000.0,"pid":42,"state_step":9,"type":"ready"})");
  WorkerMessage old;
  ASSERT_TRUE(FromJson(nlohmann::json::parse(R"({"pid":42,"state_step":9,"type":"ready"})"), &old).ok());
  EXPECT_EQ(std::get<ReadyMessage>(old).peak_flops, 0);
  EXPECT_EQ(ToJson(WorkerMessage(ProgressMessage{2, 5, TrainPhase::kEval, 1.5, -1, {}, false})).dump(),
            R"({"collective_kind":"","collective_seq":-1,"generation":2,"in_collective":false,"phase":"eval",)"
            R"("step":5,"time":1.5,"type":"progress"})");
  // progress gained the last collective entered (issue 32); an older writer's tick still loads.
  WorkerMessage old_tick;
  ASSERT_TRUE(FromJson(nlohmann::json::parse(R"({"generation":2,"phase":"eval","step":5,"time":1.5,"type":"progress"})"),
                       &old_tick).ok());
  EXPECT_EQ(std::get<ProgressMessage>(old_tick).collective_seq, -1);
  EndedMessage e;
  e.generation = 4;
  e.outcome = GenerationOutcome::kAborted;
  // ended gained the RAM tier's copies (issue #18) and timed_out (issue #32); an older
  // reader ignores them.
  e.copies_generation = 3;
  e.copies = {{1, 40}, {2, 39}};
  EXPECT_EQ(ToJson(WorkerMessage(e)).dump(),
            R"({"copies":[{"shard":1,"step":40},{"shard":2,"step":39}],"copies_generation":3,"error":"",)"
            R"("generation":4,"leaving":false,"outcome":"aborted","start_step":-1,"state_step":-1,)"
            R"("step":-1,"stop_reasons":0,"timed_out":false,"type":"ended"})");
  WorkerMessage old_ended;
  ASSERT_TRUE(FromJson(nlohmann::json::parse(R"({"generation":4,"outcome":"aborted","type":"ended"})"), &old_ended).ok());
  EXPECT_EQ(std::get<EndedMessage>(old_ended).copies_generation, -1);
  EXPECT_TRUE(std::get<EndedMessage>(old_ended).copies.empty());
  AssignMessage a;
  a.generation = 1;
  a.restore.kind = RestoreKind::kMemory;
  a.members.push_back({0, "h", 12});
  const std::string aj = ToJson(AgentMessage(a)).dump();
  EXPECT_NE(aj.find(R"("restore":{"kind":"memory","old_fsdp":1,"old_generation":-1,"old_tensor":1,"source_rank":0,)"
                    R"("sources":[],"step":0,"why":""})"),
            std::string::npos)
      << aj;
  EXPECT_NE(aj.find(R"("members":[{"host":"h","pid":12,"rank":0}])"), std::string::npos) << aj;
  EXPECT_NE(aj.find(R"("type":"assign")"), std::string::npos) << aj;
}

TEST(WireMessages, ParsesEachTypeAndRejectsUnknownOnes) {
  WorkerMessage m;
  ASSERT_TRUE(FromJson(nlohmann::json::parse(R"({"type":"step","generation":2,"step":7,"step_seconds":0.5})"), &m).ok());
  ASSERT_TRUE(std::holds_alternative<StepMessage>(m));
  EXPECT_EQ(std::get<StepMessage>(m).step, 7);
  EXPECT_EQ(std::get<StepMessage>(m).start_step, -1);  // missing: the default

  AgentMessage a;
  ASSERT_TRUE(FromJson(nlohmann::json::parse(R"({"type":"stop","generation":2,"reason":"user"})"), &a).ok());
  ASSERT_TRUE(std::holds_alternative<StopMessage>(a));
  EXPECT_EQ(std::get<StopMessage>(a).reason, kStopUser);

  Status st = FromJson(nlohmann::json::parse(R"({"type":"dance"})"), &m);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("dance"), std::string::npos);
  st = FromJson(nlohmann::json::parse(R"({"type":"ended","outcome":"exploded"})"), &m);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("exploded"), std::string::npos) << st.message();
  EXPECT_FALSE(FromJson(nlohmann::json::parse(R"({"type":"stop","reason":"bored"})"), &a).ok());
}

// Found by fuzz/fuzz_worker_messages.cpp: a "type" that is not a string threw out of
// FromJson (json::value's type_error), ending the agent or worker that read it.
TEST(WireMessages, TypeOfTheWrongKindIsAnErrorNotAnException) {
  for (const char* text : {R"({"type":1733300100.5})", R"({"type":null})", R"({"type":["step"]})",
                           R"({"type":{"a":1}})", R"({"type":true})"}) {
    WorkerMessage m;
    AgentMessage a;
    Status st;
    EXPECT_NO_THROW(st = FromJson(nlohmann::json::parse(text), &m)) << text;
    EXPECT_FALSE(st.ok()) << text;
    EXPECT_NE(st.message().find("\"type\" must be a string"), std::string::npos) << st.message();
    EXPECT_NO_THROW(st = FromJson(nlohmann::json::parse(text), &a)) << text;
    EXPECT_FALSE(st.ok()) << text;
  }
}

// Found by fuzz/fuzz_worker_messages.cpp: nlohmann's get<int>() static_casts a JSON float
// to the field's integer type, undefined behaviour when it is out of range (4.2e14 for
// an int rank). Integer fields take only integers, within the field's range.
TEST(WireMessages, IntegerFieldsTakeOnlyIntegersInRange) {
  WorkerMessage m;
  AgentMessage a;
  for (const char* text : {R"({"type":"started","generation":3,"rank":4.2e14})",
                           R"({"type":"started","rank":2147483648})", R"({"type":"started","rank":1.0})",
                           R"({"type":"step","generation":1e300})",
                           R"({"type":"step","generation":18446744073709551615})",
                           R"({"type":"ended","stop_reasons":"1"})"}) {
    Status st = FromJson(nlohmann::json::parse(text), &m);
    EXPECT_FALSE(st.ok()) << text;
  }
  Status st = FromJson(nlohmann::json::parse(R"({"type":"started","rank":4.2e14})"), &m);
  EXPECT_NE(st.message().find("field 'rank'"), std::string::npos) << st.message();
  EXPECT_FALSE(FromJson(nlohmann::json::parse(R"({"type":"stop","generation":1e300})"), &a).ok());
  EXPECT_FALSE(FromJson(nlohmann::json::parse(R"({"type":"assign","members":[{"rank":0.5}]})"), &a).ok());

  ASSERT_TRUE(FromJson(nlohmann::json::parse(R"({"type":"started","generation":-1,"rank":2147483647})"), &m).ok());
  EXPECT_EQ(std::get<StartedMessage>(m).rank, 2147483647);
  EXPECT_EQ(std::get<StartedMessage>(m).generation, -1);
  ASSERT_TRUE(FromJson(nlohmann::json::parse(R"({"type":"step","step":9007199254740993,"loss":2})"), &m).ok());
  EXPECT_EQ(std::get<StepMessage>(m).step, 9007199254740993);  // exact: read as an integer
  EXPECT_EQ(std::get<StepMessage>(m).loss, 2.0);                // a double field takes an integer
}

TEST(WireRecords, IntegerFieldsTakeOnlyIntegersInRange) {
  AgentInfo info;
  EXPECT_FALSE(FromJson(R"({"id":"a","slots":1e20})", &info).ok());
  JobRecord rec;
  Status st = FromJson(R"({"job_id":"j","generation":2.5})", &rec);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("job state: field 'generation'"), std::string::npos) << st.message();
  Plan plan;
  EXPECT_FALSE(FromJson(R"({"members":[{"rank":0,"pid":-3000000000}]})", &plan).ok());
  ASSERT_TRUE(FromJson(R"({"id":"a","slots":4,"pid":77,"started_at":12})", &info).ok());
  EXPECT_EQ(info.slots, 4);
  EXPECT_EQ(info.started_at, 12.0);
  EXPECT_EQ(info.host, "");  // missing: the default
}

}  // namespace
}  // namespace elastrain
