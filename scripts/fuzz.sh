#!/usr/bin/env bash
# Builds the libFuzzer harnesses of fuzz/ (clang, ASan + UBSan, in build-fuzz/) and runs
# each for a bounded time, one after another (fuzz/README.md).
#   scripts/fuzz.sh [--seconds N] [--build-dir DIR] [--jobs J] [--build-only|--no-build] [HARNESS...]
# N: seconds per harness (default 5; `make fuzz` gives 600). HARNESS: names from
# fuzz/CMakeLists.txt (default: all). --build-only configures and builds DIR, then exits
# (`make test` does it in its build step); --no-build runs the harnesses DIR has, without
# looking at the sources (the `fuzz_short` test: its time is fuzzing, not compiling).
# Each harness first replays its reproducers in fuzz/regressions/<harness>/ (files named
# open-* are bugs not fixed yet: skipped), then
# fuzzes a writable copy of fuzz/corpus/<harness>/ in DIR/fuzz-runs/<harness>/corpus
# (kept between runs; the repository's corpus is never written). Crash inputs go to
# DIR/fuzz-runs/<harness>/artifacts/. Prints per harness the executions and whether it
# crashed; exits 1 if any harness crashed or a reproducer failed.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=5
build=build-fuzz
jobs=$(nproc)
step=all  # all | build | run
only=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --build-only) step=build; shift ;;
    --no-build) step=run; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) only+=("$1"); shift ;;
  esac
done
if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ not found; the harnesses need clang and libFuzzer: bash scripts/install_deps.sh --test" >&2
  exit 1
fi

t0=$(date +%s)
if [ "$step" != run ]; then
  if [ ! -f "$build/CMakeCache.txt" ]; then
    launcher=()
    command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    cmake -S . -B "$build" -DELASTRAIN_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ "${launcher[@]}" >/dev/null
  fi
  cmake --build "$build" -j "$jobs" >"$build/build.log" 2>&1 || { tail -50 "$build/build.log"; exit 1; }
  echo "fuzz.sh: built $build in $(( $(date +%s) - t0 )) s"
  [ "$step" = build ] && exit 0
elif [ ! -f "$build/fuzz/harnesses.tsv" ]; then
  echo "fuzz.sh: --no-build, but $build/fuzz/harnesses.tsv is missing: build the harnesses first" \
       "(bash scripts/fuzz.sh --build-only, or make test)" >&2
  exit 1
fi
echo "fuzz.sh: ${seconds} s per harness"

# UB already aborts (-fno-sanitize-recover); ask for its stack too.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
failed=0
while IFS=$'\t' read -r name max_len; do
  [ -n "$name" ] || continue
  if [ ${#only[@]} -gt 0 ] && [[ ! " ${only[*]} " == *" $name "* ]]; then continue; fi
  bin="$build/fuzz/fuzz_$name"
  run="$build/fuzz-runs/$name"
  if [ ! -x "$bin" ]; then
    echo "fuzz_$name: $bin is missing (bash scripts/fuzz.sh --build-only)"; failed=1; continue
  fi
  mkdir -p "$run/corpus" "$run/artifacts"
  if [ -d "fuzz/corpus/$name" ]; then cp -n "fuzz/corpus/$name"/* "$run/corpus/" 2>/dev/null || true; fi

  # Reproducers of bugs found before: each must now run clean.
  for f in fuzz/regressions/"$name"/*; do
    [ -f "$f" ] || continue
    case "$(basename "$f")" in
      open-*) echo "fuzz_$name: skipping $f (an open bug, fuzz/regressions/README.md)"; continue ;;
    esac
    if ! "$bin" "$f" >"$run/regression.log" 2>&1; then
      echo "fuzz_$name: REPRODUCER FAILS: $f"; tail -30 "$run/regression.log"; failed=1
    fi
  done

  set +e
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len="$max_len" -print_final_stats=1 \
    -artifact_prefix="$run/artifacts/" "$run/corpus" >"$run/log.txt" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$run/log.txt" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$run/log.txt" | tail -1)
  units=$(ls "$run/corpus" | wc -l)
  if [ $rc -eq 0 ]; then
    printf 'fuzz_%-16s %10s execs %7s/s  corpus %5s  ok\n' "$name" "${execs:-?}" "${rate:-?}" "$units"
  else
    artifact=$(grep -o "Test unit written to [^ ]*" "$run/log.txt" | tail -1 | sed 's/Test unit written to //')
    printf 'fuzz_%-16s %10s execs %7s/s  corpus %5s  CRASHED (exit %d): %s\n' "$name" "${execs:-?}" "${rate:-?}" \
      "$units" "$rc" "${artifact:-see $run/log.txt}"
    grep -E -m1 -A12 "^==[0-9]+==ERROR|runtime error|FUZZ_CHECK failed|uncaught exception|deadly signal|ERROR: libFuzzer" \
      "$run/log.txt" || tail -20 "$run/log.txt"
    failed=1
  fi
done <"$build/fuzz/harnesses.tsv"
echo "fuzz.sh: $(( $(date +%s) - t0 )) s in all"
exit $failed
