#!/usr/bin/env bash
# Runs every benchmark in bench/ and prints its output (`make bench` calls this):
# each bench/NAME.cpp as the binary $BUILD/NAME (arguments of this script are passed
# to it), then each other bench/NAME.sh with $BUILD/elastrain as its argument.
#   BUILD=build             the build folder holding the binaries
#   BENCH_ONLY="a b"        run only the benchmarks of these names (e.g. throughput)
# Exit code: 0 when every benchmark exited 0, 1 when any failed or none was found.
# Benchmarks need an idle machine: throughput prints how busy other processes kept
# the CPUs while it measured.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD:-build}"
case "$build" in /*) ;; *) build="$root/$build" ;; esac
only=" ${BENCH_ONLY:-} "

echo "bench: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "bench: OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}"

found=0
failed=()
# Runs one benchmark: name, then the command.
run() {
  local name=$1
  shift
  found=$((found + 1))
  echo
  echo "===== $name ====="
  "$@"
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "bench: $name exited with status $rc" >&2
    failed+=("$name")
  fi
}
selected() { [ "$only" = "  " ] || [[ "$only" == *" $1 "* ]]; }

for src in "$root"/bench/*.cpp; do
  [ -e "$src" ] || continue
  name="$(basename "$src" .cpp)"
  selected "$name" || continue
  if [ ! -x "$build/$name" ]; then
    echo "bench: $build/$name not built (run: make build)" >&2
    failed+=("$name")
    continue
  fi
  run "$name" "$build/$name" "$@"
done
for script in "$root"/bench/*.sh; do
  name="$(basename "$script" .sh)"
  # before_after compares two binaries (bench/before_after.sh OLD NEW): run it by hand.
  [ "$name" = run_all ] || [ "$name" = bench_lib ] || [ "$name" = before_after ] && continue
  selected "$name" || continue
  run "$name" bash "$script" "$build/elastrain"
done

if [ "$found" -eq 0 ]; then
  echo "bench: no benchmark ran (built in $build? BENCH_ONLY='${BENCH_ONLY:-}')" >&2
  exit 1
fi
if [ "${#failed[@]}" -gt 0 ]; then
  echo "bench: failed: ${failed[*]}" >&2
  exit 1
fi
