// The checkpoint manifest (ManifestFromJson, src/ckpt/checkpoint.h) and the shard list
// ranks send to the manifest writer (ShardFileInfoFromJson, src/ckpt/format.h); the
// input is JSON text. Properties of an accepted manifest: it survives a round trip
// through ManifestToJson unchanged, and every piece maps to global runs that cover
// exactly its flat range (what a restore copies).
#include <string>

#include "ckpt/checkpoint.h"
#include "ckpt/format.h"
#include "fuzz_check.h"

using namespace elastrain;
using namespace elastrain::ckpt;

namespace {
void CheckPiece(const PieceRecord& p) {
  FUZZ_CHECK(ValidatePiece(p.spec).ok(), "an accepted piece is valid");
  int64_t covered = 0, next_local = p.spec.flat_begin;
  for (const GlobalRun& run : GlobalRuns(p.spec)) {
    FUZZ_CHECK(run.local == next_local && run.n > 0, "runs are consecutive in the local view");
    FUZZ_CHECK(GlobalIndex(p.spec, run.local) == run.global, "GlobalIndex agrees with GlobalRuns");
    next_local += run.n;
    covered += run.n;
  }
  FUZZ_CHECK(covered == p.spec.size(), "the runs cover the piece");
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = fuzz::AsString(data, size);
  Result<Manifest> m = ManifestFromJson(text, "fuzz/manifest.json");
  if (m.ok()) {
    const std::string again = ManifestToJson(*m);
    Result<Manifest> m2 = ManifestFromJson(again, "round trip");
    FUZZ_CHECK(m2.ok(), "ManifestToJson's output loads");
    FUZZ_CHECK(ManifestToJson(*m2) == again, "a manifest survives a round trip");
    for (const TensorRecord& t : m->tensors)
      for (StateKind k : kAllKinds)
        for (const PieceRecord& p : t.Pieces(k)) CheckPiece(p);
  }
  Result<std::vector<ShardFileInfo>> shards = ShardFileInfoFromJson(text);
  if (shards.ok()) {
    Result<std::vector<ShardFileInfo>> again = ShardFileInfoFromJson(ShardFileInfoToJson(*shards));
    FUZZ_CHECK(again.ok(), "ShardFileInfoToJson's output loads");
    for (const ShardFileInfo& s : *shards)
      for (const PieceRecord& p : s.pieces) CheckPiece(p);
  }
  return 0;
}
