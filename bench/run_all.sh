#!/usr/bin/env bash
# Runs every benchmark binary built from bench/*.cpp and prints its output
# (`make bench` calls this). Arguments are passed to every binary.
#   BUILD=build   the build folder holding the binaries
# Exit code: 0 when every benchmark exited 0, 1 when any failed or none was found.
# Benchmarks need an idle machine: each prints how busy other processes kept the CPUs.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD:-build}"
case "$build" in /*) ;; *) build="$root/$build" ;; esac

echo "bench: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "bench: OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}"

found=0
failed=()
for src in "$root"/bench/*.cpp; do
  [ -e "$src" ] || continue
  name="$(basename "$src" .cpp)"
  bin="$build/$name"
  if [ ! -x "$bin" ]; then
    echo "bench: $bin not built (run: make build)" >&2
    failed+=("$name")
    continue
  fi
  found=$((found + 1))
  echo
  echo "===== $name ====="
  "$bin" "$@"
  rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "bench: $name exited with status $rc" >&2
    failed+=("$name")
  fi
done

if [ "$found" -eq 0 ]; then
  echo "bench: no benchmark binaries in $build (run: make build)" >&2
  exit 1
fi
if [ "${#failed[@]}" -gt 0 ]; then
  echo "bench: failed: ${failed[*]}" >&2
  exit 1
fi
