// The records of the coordination store (src/wire/protocol.h): JobSpec, AgentInfo,
// HealthRecord, AgentReport, Plan, JobControl, GenerationStop, AgentCommand, JobRecord. The input is a
// store value (JSON text), decoded as every record type (any process that can write
// the store can put any text under any key). Property of a decoded record: its ToJson
// text decodes back and encodes to the same text.
#include <string>

#include "fuzz_check.h"
#include "wire/protocol.h"

using namespace elastrain;

namespace {
// Missing fields keep their defaults (protocol.cpp), and a plan without "rendezvous"
// gets the default address, an empty directory, which ToJson writes as "file:" and
// RendezvousAddress::Parse refuses; such a plan cannot round-trip.
template <typename Record>
bool Encodable(const Record&) { return true; }
bool Encodable(const Plan& p) { return !(p.rendezvous.kind == RendezvousAddress::Kind::kFile && p.rendezvous.dir.empty()); }

template <typename Record>
void Decode(const std::string& text) {
  Record v;
  if (!FromJson(text, &v).ok()) return;
  if (!Encodable(v)) return;
  const std::string encoded = ToJson(v);
  Record again;
  FUZZ_CHECK(FromJson(encoded, &again).ok(), "ToJson's text of a decoded record decodes");
  FUZZ_CHECK(ToJson(again) == encoded, "a record survives ToJson and FromJson unchanged");
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = fuzz::AsString(data, size);
  Decode<JobSpec>(text);
  Decode<AgentInfo>(text);
  Decode<HealthRecord>(text);
  Decode<AgentReport>(text);
  Decode<Plan>(text);
  Decode<JobControl>(text);
  Decode<GenerationStop>(text);
  Decode<AgentCommand>(text);
  Decode<JobRecord>(text);
  return 0;
}
