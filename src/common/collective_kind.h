// The kinds of collective a worker can be in (issue 32): the words of
// WorkerRecord::collective_kind and ProgressMessage::collective_kind. Here in common so
// that comm/ (which counts them, comm/collective_mark.h) and the agent (which checks the
// word a worker reports) name them without depending on each other.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "common/choice.h"

namespace elastrain {

enum class CollectiveKind : uint8_t {
  kNone,  // nothing entered yet ("")
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kBarrier,
  kExchange,  // point to point (ProcessGroup::Exchange)
  kConnect,   // a group's rendezvous and first barrier
};
inline constexpr std::array<Choice<CollectiveKind>, 8> kCollectiveKindChoices = {{
    {"", CollectiveKind::kNone},
    {"allreduce", CollectiveKind::kAllReduce},
    {"allgather", CollectiveKind::kAllGather},
    {"reduce_scatter", CollectiveKind::kReduceScatter},
    {"broadcast", CollectiveKind::kBroadcast},
    {"barrier", CollectiveKind::kBarrier},
    {"exchange", CollectiveKind::kExchange},
    {"connect", CollectiveKind::kConnect},
}};
constexpr std::string_view CollectiveKindName(CollectiveKind k) { return ChoiceWord(kCollectiveKindChoices, k); }

}  // namespace elastrain
