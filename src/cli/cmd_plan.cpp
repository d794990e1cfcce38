// `elastrain plan [CONFIG.yml] [key=value ...]`: the mesh, the sharding rules and each
// rank's memory, FLOPs and collective volume for a config, without training. The
// formulas are in docs/parallelism.md. Exit codes: 0 printed, 2 bad config or mesh.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "plan/mesh.h"
#include "plan/sharding.h"
#include "config/config.h"
#include "model/flops.h"
#include "config/derived.h"
#include "plan/mesh_for_config.h"

namespace elastrain {

namespace {

constexpr int kMaxRanksListed = 64;  // beyond this the per-rank table is cut

int Fail(const Status& st) { return FailCommand("plan", st); }

std::string Bytes(int64_t b) { return FormatBytes(b); }

std::string Count(int64_t n) {
  const double d = static_cast<double>(n);
  if (d >= 1e9) return fmt::format("{:.3f}B", d / 1e9);
  if (d >= 1e6) return fmt::format("{:.2f}M", d / 1e6);
  if (d >= 1e3) return fmt::format("{:.1f}K", d / 1e3);
  return fmt::format("{}", n);
}

std::string RankList(const std::vector<int>& r) {
  std::string s;
  const size_t shown = std::min<size_t>(r.size(), 16);
  for (size_t i = 0; i < shown; ++i) s += fmt::format("{}{}", i ? " " : "", r[i]);
  if (r.size() > shown) s += fmt::format(" ... ({} ranks)", r.size());
  return "[" + s + "]";
}

void PrintPlan(const TrainConfig& c, const Mesh& mesh, const PlanBatch& batch) {
  const ModelConfig& m = c.model;
  const RankPlan p = PlanRank(mesh, m, batch);
  const int world = mesh.world_size();
  std::string out;
  out += fmt::format("model: {} ({}), {} parameters; {} layers, {} heads ({} kv) x {}, mlp {}, vocab {}\n",
                     m.name, FamilyName(m.family), Count(m.NumParams()), m.num_layers, m.num_heads,
                     m.num_kv_heads, m.head_dim, m.mlp_dim, m.vocab_size);
  out += fmt::format(
      "batch: global {} rows x {} tokens per step; {} rows per tensor group = {} micro-batch(es) of "
      "{} (per_device_batch_size); remat_policy={}\n\n",
      batch.global_batch, batch.seq_len, p.batch_rows_per_rank, p.micro_batches, batch.micro_batch,
      RematPolicyName(c.remat_policy));
  out += mesh.LayoutTable();
  const MeshCoords c0 = mesh.Coords(0);
  out += fmt::format("  groups of rank 0 (d={} f={} t={}): tensor {}, fsdp {}, data {}, gradient {}\n\n",
                     c0.data, c0.fsdp, c0.tensor, RankList(mesh.Group(MeshGroup::kTensor, 0)),
                     RankList(mesh.Group(MeshGroup::kFsdp, 0)), RankList(mesh.Group(MeshGroup::kData, 0)),
                     RankList(mesh.Group(MeshGroup::kGradient, 0)));

  out += fmt::format("sharding over tensor={} (local model: {} heads, {} kv heads, mlp {}):\n", mesh.tensor(),
                     p.local.num_heads, p.local.num_kv_heads, p.local.mlp_dim);
  out += ShardingTableToString(ShardingTable(m, mesh.tensor()), 1);
  out += fmt::format(
      "  fsdp={}: rank f of the fsdp axis owns chunk f of every unit (embeddings, each layer, final norm and "
      "head) of the tensor-local flat buffer: about {} of its {} floats\n\n",
      mesh.fsdp(), p.params_per_rank, p.params_tp_local);

  out += "per rank (every rank alike):\n";
  out += fmt::format("  N_tp_local    {} = replicated + sharded / {}\n", Count(p.params_tp_local), mesh.tensor());
  out += fmt::format("  params/rank   {} = ceil(N_tp_local / fsdp={})\n", Count(p.params_per_rank), mesh.fsdp());
  out += fmt::format("  parameters    {:>11}  (4 B x params/rank)\n", Bytes(p.param_bytes));
  out += fmt::format("  gradients     {:>11}  (4 B x params/rank)\n", Bytes(p.grad_bytes));
  out += fmt::format("  AdamW m+v     {:>11}  (8 B x params/rank)\n", Bytes(p.optimizer_bytes));
  out += fmt::format("  activations   {:>11}  (local model, {} rows x {} tokens, remat {})\n",
                     Bytes(p.activation_bytes), batch.micro_batch, batch.seq_len, RematPolicyName(c.remat_policy));
  // A valid config keeps one rank's bytes within int64; times the world it may not.
  int64_t all_ranks = 0;
  const std::string all = __builtin_mul_overflow(p.total_bytes(), static_cast<int64_t>(world), &all_ranks)
                              ? std::string("more than 8 EiB")
                              : Bytes(all_ranks);
  out += fmt::format("  total         {:>11}   x {} ranks = {} (this machine has {} available)\n",
                     Bytes(p.total_bytes()), world, all, Bytes(AvailableMemoryBytes()));
  out += fmt::format("  FLOPs/step    {:.3e} model FLOPs of the global batch / {} ranks\n", p.model_flops_per_rank,
                     world);
  out += fmt::format("                {:.3e} computed by the rank (replicated head{})\n", p.rank_flops,
                     batch.remat_full ? ", remat recompute" : "");

  out += "collectives per step per rank (ring: allreduce sends 2(n-1)/n, gather/scatter (n-1)/n of the buffer):\n";
  if (p.collectives.empty()) out += "  none (a single rank)\n";
  for (const CollectiveVolume& v : p.collectives)
    out += fmt::format("  {:<6} {:<14} {:>5} x {:>10}  sends {:>10}  {}\n", MeshAxisName(v.axis), v.op, v.calls,
                       Bytes(v.payload_bytes), Bytes(v.sent_bytes), v.what);

  out += fmt::format("\nranks (rank: data fsdp tensor coordinates):\n");
  for (int r = 0; r < world && r < kMaxRanksListed; ++r) {
    const MeshCoords rc = mesh.Coords(r);
    out += fmt::format("  {:>4}: {} {} {}\n", r, rc.data, rc.fsdp, rc.tensor);
  }
  if (world > kMaxRanksListed) out += fmt::format("  ... ({} more)\n", world - kMaxRanksListed);
  std::fputs(out.c_str(), stdout);
}

}  // namespace

int RunPlanCommand(const std::vector<std::string>& args) {
  CLI::App app{"elastrain plan: the device mesh (num_workers, ici_*_parallelism), the sharding rules and each "
               "rank's memory, FLOPs and collective volume, without training. Formulas: docs/parallelism.md"};
  std::vector<std::string> config_args;
  AddConfigArgs(app, &config_args);
  if (int rc = ParseArgs(app, "plan", args); rc >= 0) return rc;
  auto cfg = LoadConfigFromArgs(config_args);
  if (!cfg.ok()) return Fail(cfg.status());
  const TrainConfig& c = cfg.value();
  auto mesh = ResolveMeshForConfig(c);
  if (!mesh.ok()) return Fail(mesh.status());
  PlanBatch batch;
  batch.global_batch = GlobalBatchSize(c);
  batch.micro_batch = c.per_device_batch_size;
  batch.seq_len = c.max_target_length;
  batch.remat_full = c.remat_policy == RematPolicy::kFull;
  PrintPlan(c, mesh.value(), batch);
  return 0;
}

}  // namespace elastrain
