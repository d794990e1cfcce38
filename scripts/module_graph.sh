#!/usr/bin/env bash
# The module graph of src/, read from CMake itself (cmake --graphviz), so it cannot drift.
#   scripts/module_graph.sh              prints it as a Mermaid block (docs/architecture.md)
#   scripts/module_graph.sh --check DOC  fails unless DOC holds exactly that block, the graph
#                                        has no cycle, and the rules below hold
# Rules (docs/architecture.md, "Modules"):
#   - elastic/ reaches neither kernels/ nor monitor/ (the control plane stays free of
#     compute and of the HTTP side), nor comm/ (nor Gloo: the controller and the agents
#     plan meshes with plan/, they never join a collective);
#   - nothing reaches cli/;
#   - config/ reaches only common/ and model/ (what follows from a config and needs a mesh
#     or a dataset lives with its users: plan/mesh_for_config.h, train/dataset_for_config.h);
#   - comm/, the Gloo runtime, is the one module that links Gloo; plan/ (the pure planning:
#     mesh, sharding, RAM tier), store/, wire/ and config/ neither link it nor reach comm/;
#   - every Gloo rendezvous store (a class deriving from gloo::rendezvous::Store) is in comm/;
#   - a pure machine header (src/*/*_machine.h: Step(input, now) -> actions) includes, even
#     through other headers, no executor header (EXECUTORS below: the classes that run
#     processes, threads, sockets or the store).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Headers of the executors, which a pure machine must not include. A new executor's header
# belongs here.
EXECUTORS="elastic/agent.h elastic/controller.h elastic/lease_keeper.h launch/launched_worker.h
launch/master_address.h comm/process_group.h comm/rendezvous_store.h train/worker.h train/trainer.h"
# Modules that must not link Gloo nor reach a module that does.
GLOO_FREE="plan config store wire elastic"

modules=$(cd "$src/src" && ls -d */ | tr -d / | sort)
(cd "$tmp" && cmake -S "$src" -B . --graphviz=g.dot >/dev/null 2>"$tmp/err") || {
  cat "$tmp/err" >&2; echo "module_graph: cmake failed" >&2; exit 1; }
# Edges appear as comments: "node3" -> "node7" ... // from -> to
edges=$(grep -o '// [A-Za-z_:./-]* -> [A-Za-z_:./-]*$' "$tmp/g.dot" | awk -v mods="$modules" '
  BEGIN { n = split(mods, m, /[ \n]+/); for (i = 1; i <= n; i++) is[m[i]] = 1 }
  is[$2] && is[$4] && $2 != $4 { print $2 " " $4 }' | sort -u)
# The modules that link the Gloo library themselves (an edge to a library named *gloo*).
gloo_linkers=$(grep -o '// [A-Za-z_]* -> [^ ]*$' "$tmp/g.dot" | awk '$4 ~ /gloo/ { print $2 }' | sort -u)

block() {
  echo '```mermaid'
  echo 'graph BT'
  echo "$edges" | awk '{ print "  " $1 " --> " $2 }'
  echo '```'
}

if [ "${1:-}" != "--check" ]; then block; exit 0; fi
doc=${2:?usage: module_graph.sh --check DOC}
fail=0
# 1. no cycle (tsort names one if there is)
if ! echo "$edges" | tsort >/dev/null 2>"$tmp/tsort"; then
  echo "module_graph: the module graph has a cycle:"; cat "$tmp/tsort"; fail=1
fi
# 2. what each module reaches (transitive closure)
reach() {  # reach MODULE: every module it links, directly or not
  local todo=("$1") seen=" $1 " m n
  while [ ${#todo[@]} -gt 0 ]; do
    m=${todo[0]}; todo=("${todo[@]:1}")
    for n in $(echo "$edges" | awk -v m="$m" '$1 == m { print $2 }'); do
      case "$seen" in *" $n "*) ;; *) seen="$seen$n "; todo+=("$n"); echo "$n" ;; esac
    done
  done
}
elastic_reaches=$(reach elastic)  # (captured: grep -q would cut the pipe under pipefail)
for bad in kernels monitor; do  # (and not comm: GLOO_FREE below)
  if grep -qx "$bad" <<<"$elastic_reaches"; then echo "module_graph: elastic links $bad"; fail=1; fi
done
for m in $modules; do
  [ "$m" = cli ] && continue
  if grep -qx cli <<<"$(reach "$m")"; then echo "module_graph: $m links cli"; fail=1; fi
done
config_extra=$(reach config | grep -vx 'common\|model' || true)
if [ -n "$config_extra" ]; then
  echo "module_graph: config links $(echo $config_extra) (it may link only common and model)"; fail=1
fi
# 3. Gloo: comm alone links it; the Gloo-free modules reach no module that does
if [ "$gloo_linkers" != comm ]; then
  echo "module_graph: the modules linking Gloo are '$(echo $gloo_linkers)'; only comm may"; fail=1
fi
for m in $GLOO_FREE; do
  for n in $m $(reach "$m"); do
    if [ "$n" = comm ] || grep -qx "$n" <<<"$gloo_linkers"; then
      if [ "$n" = "$m" ]; then what=Gloo; elif [ "$n" = comm ]; then what=comm; else what="$n, which links Gloo"; fi
      echo "module_graph: $m links $what; $m must stay free of the Gloo runtime"
      fail=1; break
    fi
  done
done
stores=$(cd "$src" && grep -rlE 'public +gloo::rendezvous::[A-Za-z]*Store' src | grep -v '^src/comm/' || true)
if [ -n "$stores" ]; then
  echo "module_graph: Gloo rendezvous stores outside comm/: $(echo $stores)"; fail=1
fi
# 4. pure machine headers include no executor header, directly or through another header
include_closure() {  # include_closure HEADER (relative to src/): the project headers it pulls in
  local todo=("$1") seen=" $1 " h n
  while [ ${#todo[@]} -gt 0 ]; do
    h=${todo[0]}; todo=("${todo[@]:1}")
    [ -f "$src/src/$h" ] || continue
    for n in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$src/src/$h"); do
      case "$seen" in *" $n "*) ;; *) seen="$seen$n "; todo+=("$n"); echo "$n" ;; esac
    done
  done
}
machines=$(cd "$src/src" && ls */*_machine.h 2>/dev/null || true)
for h in $machines; do
  pulled=$(include_closure "$h")
  for e in $EXECUTORS; do
    if grep -qx "$e" <<<"$pulled"; then echo "module_graph: the pure machine $h includes the executor header $e"; fail=1; fi
  done
done
# 5. the page shows this graph
if [ "$(awk '/^```mermaid$/,/^```$/' "$doc")" != "$(block)" ]; then
  echo "module_graph: $doc does not show the current module graph; replace its mermaid block with:"
  block; fail=1
fi
[ $fail = 0 ] && echo "module_graph: $(echo "$edges" | wc -l) edges among $(echo "$modules" | wc -w) modules, no cycle;" \
  "elastic links neither kernels nor monitor; config links only common and model; only comm links Gloo" \
  "and holds every Gloo store ($(echo $GLOO_FREE) stay free of it); the machine headers ($(echo $machines)) include no executor header;" \
  "$doc is current"
exit $fail
