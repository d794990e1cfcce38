#!/usr/bin/env bash
# The real training loop against the benchmark's step (docs/performance.md): for each
# shape, `build/throughput` times its bare step (zero, forward/backward, norm, AdamW) and
# `elastrain train` (synthetic data, no checkpoints, no eval) runs the same shape in the
# same minute; prints both medians and their ratio (goal: the loop within 5%), and the
# loop's model GFLOP/s as a share of the SGEMM ceiling the benchmark measured in that run
# (the best square of dnnl_sgemm and oneDNN's matmul primitive).
#   bench/train_loop.sh [PATH/TO/elastrain]
#   SHAPES="small:64 gpt2-124m:64 gpt2-124m:256"  preset:T pairs (B = 4)
#   DTYPE=float32|bfloat16                        the GEMMs' compute type (dtype)
#   STEPS=12                                      steps of each train run (the first 2 are warm-up)
set -euo pipefail
BIN=$(readlink -f "${1:-build/elastrain}")
BUILD=$(dirname "$BIN")
SHAPES=${SHAPES:-"small:64 gpt2-124m:64 gpt2-124m:256"}
DTYPE=${DTYPE:-float32}
STEPS=${STEPS:-12}
WORK=$(mktemp -d /tmp/elastrain_loop.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
echo "train_loop: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg), dtype=$DTYPE"
printf '%-10s %4s %14s %14s %8s %13s %9s %7s\n' preset T "bench ms/step" "train ms/step" ratio \
  "train GFLOP/s" "ceiling" "%ceil"
for shape in $SHAPES; do
  preset=${shape%:*} T=${shape#*:}
  read -r bench flops_per_step ceiling < <("$BUILD/throughput" --no-child --backends=onednn --presets="$preset" \
    --seqs="$T" --dtypes="$DTYPE" --step-budget=4 | sed -n 's/^JSON //p' | /usr/bin/python3 -c '
import json, sys
r = json.load(sys.stdin); s = r["steps"][0]
print(s["ms_step"], s["flops_per_token"] * s["B"] * s["T"], r["ceiling_gflops"])')
  "$BIN" train model_name="$preset" per_device_batch_size=4 max_target_length="$T" dataset_type=synthetic \
    steps="$STEPS" enable_checkpointing=false eval_interval=0 log_period=1 dtype="$DTYPE" dashboard_port=0 \
    base_output_directory="$WORK/runs" run_name="$preset-$T" >"$WORK/train.out" 2>&1 \
    || { echo "train failed: $(tail -3 "$WORK/train.out")"; exit 1; }
  train=$(/usr/bin/python3 - "$WORK/runs/$preset-$T/metrics.jsonl" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"step_time"' in l]
print(1e3 * statistics.median(r["step_time"] for r in rows[2:]))
EOF
)
  awk -v p="$preset" -v t="$T" -v b="$bench" -v r="$train" -v f="$flops_per_step" -v c="$ceiling" \
    'BEGIN { g = f / (r / 1e3) / 1e9
             printf "%-10s %4d %14.1f %14.1f %7.2fx %13.1f %9.1f %6.1f%%\n", p, t, b, r, r / b, g, c, 100 * g / c }'
done
