# `elastrain cost interval|plan|simulate` (docs/cost.md): the numbers the issue fixes,
# the planner's choice and its fall-back, the simulator against Daly's closed form, and
# one-line errors with exit code 2 for bad input. No training; runs in seconds.
source "$(dirname "$0")/lib.sh"

# expect_error2 NAME PATTERN -- ARGS...: expect_error, and the exit code must be 2.
expect_error2() {
  local name=$1 pattern=$2 rc=0
  shift 3
  "$BIN" "$@" >/dev/null 2>&1 || rc=$?
  if [ "$rc" -ne 2 ]; then fail "$name: exit code $rc, expected 2"; return; fi
  expect_error "$name" "$pattern" -- "$@"
}
# check NAME PATTERN TEXT: TEXT matches PATTERN (grep -E).
check() { if grep -qE -e "$2" <<<"$3"; then pass "$1"; else fail "$1: no /$2/ in: $3"; fi; }

# --- interval ---------------------------------------------------------------------
out=$("$BIN" cost interval --checkpoint-seconds 300 --mtti-seconds 86400)
check "Daly at D=300 s, M=1 day is 117 +- 1 min" "^Daly .*= +11(6|7|8)\.[0-9]+ min" "$out"
check "Young at D=300 s, M=1 day is 120 min" "^Young .*= +120\.00 min" "$out"
out=$("$BIN" cost interval --checkpoint-seconds 300 --mtti-seconds 21600)
check "Daly at M=6 h is 57 min" "^Daly .*= +56\.71 min" "$out"
out=$("$BIN" cost interval --checkpoint-seconds 300 --mtti-seconds 900 --restart-seconds 600 --work-seconds 36000)
check "Daly at M=15 min is 9.1 min" "^Daly .*= +9\.14 min" "$out"
check "expected wall time printed" "expected wall time of 36000 s of work at Daly tau: [0-9.]+ s" "$out"
expect_error2 "interval: non-numeric MTTI" "^elastrain cost: error: --mtti-seconds=abc: expected a number > 0$" -- \
  cost interval --checkpoint-seconds 300 --mtti-seconds abc
expect_error2 "interval: missing checkpoint" "--checkpoint-seconds: missing" -- cost interval --mtti-seconds 10
expect_error2 "interval: negative restart" "--restart-seconds=-1: expected a number >= 0" -- \
  cost interval --checkpoint-seconds 1 --mtti-seconds 10 --restart-seconds -1
expect_error2 "interval: unknown flag" "unknown flag --mtti " -- cost interval --mtti 10
expect_error2 "unknown cost subcommand" "unknown subcommand 'budget'" -- cost budget

# --- plan -------------------------------------------------------------------------
out=$("$BIN" cost plan model_name=llama3-8b tokens=1e11 --deadline 72h)
best=$(grep '^best:' <<<"$out")
echo "    $best"
check "llama3-8b, 1e11 tokens, 72 h: spot v6e is the best plan" \
  "^best: gcp-tpu-v6e spot x 9 hosts \(72 chips .*\): \\\$3223 expected, 69\.1 h" "$best"
check "the MFU assumption is printed" "^assumed MFU 0\.40" "$out"
check "why the plan is best" "^why: the cheapest of the [0-9]+ plans that meet the 72 h deadline" "$out"
check "v5e is rejected for memory" "^rejected gcp-tpu-v5e: does not fit: needs [0-9.]+ GiB per chip" "$out"
printf '{"step":1,"loss":3.2,"mfu":0.49}\n{"step":2,"loss":3.1,"mfu":0.51}\n{"event":"x"}\n{"step":3,"mfu":0.52}\n' > metrics.jsonl
out=$("$BIN" cost plan model_name=llama3-8b tokens=1e11 --deadline 72h --metrics metrics.jsonl)
check "the measured MFU is used" "^measured MFU 0\.51 from metrics\.jsonl" "$out"
cat > v6e.csv <<'CSV'
name,accelerator,chips_per_host,memory_gib,peak_bf16_tflops,on_demand_usd_per_chip_hour,spot_usd_per_chip_hour,region,source,price_date
my-v6e,TPU v6e,8,32,918,2.70,0.648,us-east5,https://cloud.google.com/tpu/pricing,2025-01
CSV
out=$("$BIN" cost plan model_name=llama3-8b tokens=1e11 --deadline 50h --workers 1:12 --catalog v6e.csv)
check "spot cannot make 50 h on 12 hosts: falls back to on-demand" "^best: my-v6e on-demand x 11 hosts" "$out"
check "the fall-back is said" "^spot cannot meet the deadline \(its fastest plan takes 53\.[0-9] h\)" "$out"
expect_error2 "plan: deadline nobody meets" "no plan meets --deadline 1h: the fastest takes [0-9.]+ h" -- \
  cost plan model_name=llama3-8b tokens=1e11 --deadline 1h
expect_error2 "plan: budget nobody meets" "no plan meets --budget 100: the cheapest within the deadline costs \\\$[0-9]+" -- \
  cost plan model_name=llama3-8b tokens=1e11 --deadline 72h --budget 100
expect_error2 "plan: unknown model" "model_name=gpt5: unknown model" -- cost plan model_name=gpt5 tokens=1e9
expect_error2 "plan: missing tokens" "tokens=: expected the number of training tokens" -- cost plan model_name=llama3-8b
expect_error2 "plan: bad MFU" "--mfu=1.5: expected a number in \(0, 1\]" -- cost plan model_name=tiny tokens=1e9 --mfu 1.5
expect_error2 "plan: bad deadline" "--deadline=soon: expected a duration" -- cost plan model_name=tiny tokens=1e9 --deadline soon
expect_error2 "plan: bad worker range" "--workers=8:2: expected N or MIN:MAX" -- cost plan model_name=tiny tokens=1e9 --workers 8:2
expect_error2 "plan: missing metrics" "--metrics $WORK/none.jsonl: no such file" -- \
  cost plan model_name=tiny tokens=1e9 --metrics "$WORK/none.jsonl"
expect_error2 "plan: missing catalog" "--catalog $WORK/none.csv: no such file or directory" -- \
  cost plan model_name=tiny tokens=1e9 --catalog "$WORK/none.csv"
sed 's/,32,918,/,lots,918,/' v6e.csv > bad.csv
expect_error2 "plan: bad catalog CSV names file, line, column" "bad\.csv:2:4: memory_gib='lots': expected a number" -- \
  cost plan model_name=tiny tokens=1e9 --catalog bad.csv
expect_error2 "plan: bad loss sizes" "--spot-loss-sizes '1:0.5': probabilities sum to 0.5" -- \
  cost plan model_name=tiny tokens=1e9 --spot-loss-sizes 1:0.5
expect_error2 "plan: nothing fits" "model_name=llama3-8b fits no catalog offer at 1\.\.1 hosts" -- \
  cost plan model_name=llama3-8b tokens=1e11 --workers 1 --catalog v6e.csv

# --- simulate ---------------------------------------------------------------------
# A constant hazard (one host, replaced at once, one host per event): the simulated
# mean must agree with Daly's closed form (the daly_h column) within 2%.
out=$("$BIN" cost simulate --work-hours 20 --host-mtti 1h --checkpoint-seconds 300 --restart-seconds 600 \
  --detection-seconds 0 --trials 4000 --seed 3)
row=$(grep '^20 h of work' <<<"$out")
if awk '{ m = $3; d = $6; r = (m - d) / d; if (r < 0) r = -r; printf "    mean %s h, Daly %s h: %.2f%%\n", m, d, 100 * r; exit !(r < 0.02) }' \
  <<<"${row#20 h of work x1 hosts}" ; then pass "simulated mean within 2% of Daly"; else fail "simulation vs Daly: $row"; fi
out=$("$BIN" cost simulate model_name=llama3-8b tokens=1e11 --deadline 72h --trials 300 --svg plot.svg)
check "simulates the best plan's three capacities" "^gcp-tpu-v6e spot x9 +446 " "$out"
check "on-demand row" "^gcp-tpu-v6e on-demand x9 " "$out"
if grep -q '^<svg' plot.svg && [ "$(grep -c '<circle' plot.svg)" -ge 900 ]; then pass "SVG plot written"; else fail "plot.svg"; fi
printf 'timestamp_seconds,hosts_lost\n3600,1\n7200,2\n' > trace.csv
out=$("$BIN" cost simulate --work-hours 3 --hosts 2 --checkpoint-seconds 60 --interval-seconds 1800 \
  --restart-seconds 100 --detection-seconds 20 --trace trace.csv --trials 1)
check "a trace is replayed" "replayed from trace\.csv \(2 events\)" "$out"
# 0-1800 work, save to 1860; lost at 3600 (1740 s of work redone), 120 s recovery...:
# two interruptions, each redoing work since the last save.
check "the trace's two interruptions happen" "^3 h of work x2 hosts .* 2\.0 +0$" "$out"
printf 'timestamp_seconds,hosts_lost\n3600,1\n100,1\n' > badtrace.csv
expect_error2 "simulate: trace out of order" "badtrace\.csv:3:1: timestamp_seconds=100" -- \
  cost simulate --work-hours 1 --checkpoint-seconds 10 --trace badtrace.csv
expect_error2 "simulate: missing trace" "--trace $WORK/no.csv: no such file" -- \
  cost simulate --work-hours 1 --checkpoint-seconds 10 --trace "$WORK/no.csv"
expect_error2 "simulate: bad trials" "--trials=0: expected an integer in \[1, " -- \
  cost simulate --work-hours 1 --checkpoint-seconds 10 --trials 0
expect_error2 "simulate: negative horizon" "--horizon-seconds=-5: expected a number > 0" -- \
  cost simulate --horizon-seconds -5 --checkpoint-seconds 10
expect_error2 "simulate: horizon not a number" "--horizon-seconds=abc: expected a number > 0" -- \
  cost simulate --horizon-seconds abc --checkpoint-seconds 10
# memory_snapshot_period=auto and the copy's cost (issue 37).
expect_error2 "simulate: negative copy cost" "--snapshot-copy-seconds=-1: expected a number in \[0, " -- \
  cost simulate --horizon-seconds 60 --checkpoint-seconds 1 --ram-tier-coverage 0.9 --snapshot-copy-seconds -1
expect_error2 "simulate: infinite copy cost" "--snapshot-copy-seconds=inf: expected a number in \[0, " -- \
  cost simulate --horizon-seconds 60 --checkpoint-seconds 1 --ram-tier-coverage 0.9 --snapshot-period-seconds 1 \
  --snapshot-copy-seconds inf
expect_error2 "simulate: a costly copy at every instant" "--snapshot-copy-seconds=1: a copy that costs time needs --snapshot-period-seconds S > 0 \(or auto\)" -- \
  cost simulate --horizon-seconds 60 --checkpoint-seconds 1 --ram-tier-coverage 0.9 --snapshot-copy-seconds 1
expect_error2 "simulate: copy cost without the tier" "--snapshot-copy-seconds=1: the RAM tier is off" -- \
  cost simulate --horizon-seconds 60 --checkpoint-seconds 1 --snapshot-copy-seconds 1
expect_error2 "simulate: a period that is no number nor auto" "--snapshot-period-seconds=autox: expected a number >= 0, or auto" -- \
  cost simulate --horizon-seconds 60 --checkpoint-seconds 1 --ram-tier-coverage 0.9 --snapshot-period-seconds autox
expect_error2 "plan: a period that is no number nor auto" "--memory-snapshot-period=sometimes: expected an integer in \[1, [0-9]*\], or auto" -- \
  cost plan model_name=llama3-8b tokens=1e11 --memory-snapshot-replicas 1 --memory-snapshot-period sometimes
# auto in the simulator: on when Young's interval for the copy is under half the disk
# interval (covered interruptions every 26.7 s, a copy of 0.045 s: 1.55 s against 6.25),
# off when failures are rare (a day per host).
raw_auto=(cost simulate --horizon-seconds 600 --hosts 4 --min-hosts 2 --checkpoint-seconds 0.3 --interval-seconds 12.5
          --ram-tier-coverage 0.9 --snapshot-period-seconds auto --snapshot-copy-seconds 0.045 --peer-restore-seconds 2
          --detection-seconds 0 --restart-seconds 2 --trials 50)
out=$("$BIN" "${raw_auto[@]}" --host-mtti 96s 2>&1)
check "simulate auto: on at frequent failures" "memory_snapshot_period=auto: .*Young's interval for the copy 1.55 s is under half of it, so the RAM tier is on" "$out"
check "simulate auto: copies are booked as checkpoint time" "RAM tier covers 0.90 .*each adding 0.045 s" "$out"
out=$("$BIN" "${raw_auto[@]}" --host-mtti 24h 2>&1)
check "simulate auto: off at rare failures" "memory_snapshot_period=auto: .*is not under half of it, so the RAM tier is off" "$out"
if grep -q "RAM tier covers" <<<"$out"; then fail "simulate auto off still simulates the tier: $out"; else pass "simulate auto off: a disk-only job"; fi
out=$("$BIN" cost plan model_name=llama3-8b tokens=1e11 --deadline 72h --memory-snapshot-replicas 1 --memory-snapshot-period auto --snapshot-copy-seconds 0.05 2>&1)
check "plan auto: the chosen period is named" "^ram tier: a copy every [0-9]+ step\(s\) \(chosen: memory_snapshot_period=auto\)" "$out"
out=$("$BIN" cost plan model_name=llama3-8b tokens=1e11 --deadline 72h --memory-snapshot-replicas 1 --memory-snapshot-period auto --snapshot-copy-seconds 300 2>&1)
check "plan auto: a dear copy turns the tier off" "^ram tier: off \(memory_snapshot_period=auto" "$out"
expect_error2 "simulate: nothing to simulate" "expected tokens=N \(simulate a plan\) or --work-hours H" -- cost simulate
expect_error2 "simulate: unknown offer" "--offer tpu-v9: not in the catalog" -- \
  cost simulate model_name=llama3-8b tokens=1e11 --offer tpu-v9
expect_error2 "simulate: config keys without tokens" "unexpected argument 'model_name=tiny': .*needs tokens=N" -- \
  cost simulate model_name=tiny --work-hours 1 --checkpoint-seconds 10
expect_error2 "simulate: hosts without offer" "--hosts 4: expected --offer NAME" -- \
  cost simulate model_name=llama3-8b tokens=1e11 --hosts 4
out=$("$BIN" cost simulate model_name=llama3-8b tokens=1e11 --offer gcp-a3-h100 --hosts 10 --capacity spot --min-hosts 6 --trials 50)
check "a pinned, elastic plan is simulated" "^gcp-a3-h100 spot x10 " "$out"
expect_error2 "simulate: unwritable svg" "--svg $WORK/no/dir/p.svg: cannot write" -- \
  cost simulate --work-hours 1 --checkpoint-seconds 10 --trials 2 --svg "$WORK/no/dir/p.svg"
finish
