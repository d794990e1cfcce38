// JSON of the records that travel both in the store (wire/protocol.h) and between an agent
// and its workers (wire/worker_messages.h): one definition for both.
#pragma once

#include "common/json.h"
#include "wire/protocol.h"
#include "wire/vocab_json.h"

namespace elastrain {

ELASTRAIN_JSON_RECORD(HeldCopy, shard, step)
ELASTRAIN_JSON_RECORD(RestorePlan, kind, source_rank, step, old_generation, old_fsdp, old_tensor, sources, why)

}  // namespace elastrain
