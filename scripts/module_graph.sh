#!/usr/bin/env bash
# The module graph of src/, read from CMake itself (cmake --graphviz), so it cannot drift.
#   scripts/module_graph.sh              prints it as a Mermaid block (docs/architecture.md)
#   scripts/module_graph.sh --check DOC  fails unless DOC holds exactly that block, the graph
#                                        has no cycle, and the rules below hold
# Rules: elastic/ reaches neither kernels/ nor monitor/ (the control plane stays free of
# compute and of the HTTP side); nothing reaches cli/.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

modules=$(cd "$src/src" && ls -d */ | tr -d / | sort)
(cd "$tmp" && cmake -S "$src" -B . --graphviz=g.dot >/dev/null 2>"$tmp/err") || {
  cat "$tmp/err" >&2; echo "module_graph: cmake failed" >&2; exit 1; }
# Edges appear as comments: "node3" -> "node7" ... // from -> to
edges=$(grep -o '// [A-Za-z_:./-]* -> [A-Za-z_:./-]*$' "$tmp/g.dot" | awk -v mods="$modules" '
  BEGIN { n = split(mods, m, /[ \n]+/); for (i = 1; i <= n; i++) is[m[i]] = 1 }
  is[$2] && is[$4] && $2 != $4 { print $2 " " $4 }' | sort -u)

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
for bad in kernels monitor; do
  if grep -qx "$bad" <<<"$elastic_reaches"; then echo "module_graph: elastic links $bad"; fail=1; fi
done
for m in $modules; do
  [ "$m" = cli ] && continue
  if grep -qx cli <<<"$(reach "$m")"; then echo "module_graph: $m links cli"; fail=1; fi
done
# 3. the page shows this graph
if [ "$(awk '/^```mermaid$/,/^```$/' "$doc")" != "$(block)" ]; then
  echo "module_graph: $doc does not show the current module graph; replace its mermaid block with:"
  block; fail=1
fi
[ $fail = 0 ] && echo "module_graph: $(echo "$edges" | wc -l) edges among $(echo "$modules" | wc -w) modules, no cycle; elastic links neither kernels nor monitor; $doc is current"
exit $fail
