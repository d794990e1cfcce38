# Every decoder family elastrain implements against an independent PyTorch model
# (tests/reference/families.py, written from the published definitions): for each
# family's tiny preset, family_check runs one float64 step (loss, gradients, one AdamW
# update) and the reference repeats it; loss, every gradient and every updated
# parameter must agree within 1e-6 relative. Skips (77) only when torch is missing.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3 || true)
if [ -z "$PY" ] || ! "$PY" -c 'import torch' 2>/dev/null; then
  echo "SKIP: PyTorch is not installed for ${PY:-python3} (apt-get install python3-torch)"
  exit 77
fi
CHECK="$TOOLS/family_check"
[ -x "$CHECK" ] || { fail "no $CHECK (make build builds it beside elastrain)"; finish; }
families=(tiny tiny-gpt2 tiny-llama31 tiny-mistral tiny-qwen2 tiny-qwen3 tiny-gemma tiny-gemma2 tiny-zloss tiny-gpt3 tiny-olmo3)
dirs=()
for f in "${families[@]}"; do
  if "$CHECK" "$f" "$WORK/$f" >"$WORK/$f.out" 2>&1; then
    dirs+=("$WORK/$f")
  else
    fail "$f: family_check failed: $(tail -2 "$WORK/$f.out")"
  fi
done
if "$PY" "$SRC/tests/reference/families.py" "${dirs[@]}" >"$WORK/reference.out" 2>&1; then
  while read -r line; do pass "$line"; done <"$WORK/reference.out"
else
  while read -r line; do
    case "$line" in *FAIL*) fail "$line" ;; *) echo "     $line" ;; esac
  done <"$WORK/reference.out"
  grep -q FAIL "$WORK/reference.out" || fail "the reference failed: $(tail -3 "$WORK/reference.out")"
fi
# The comparison can fail: the largest gradient changed by one part in 10^5 must be caught.
"$PY" - "$WORK/tiny-qwen3/grads.f64" <<'PY' || fail "could not perturb the gradients"
import struct, sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
values = struct.unpack(f"<{len(data) // 8}d", data)
i = max(range(len(values)), key=lambda j: abs(values[j]))
struct.pack_into("<d", data, 8 * i, values[i] * (1 + 1e-5))
open(path, "wb").write(data)
PY
if "$PY" "$SRC/tests/reference/families.py" "$WORK/tiny-qwen3" >"$WORK/broken.out" 2>&1; then
  fail "a perturbed gradient passed the reference check: $(cat "$WORK/broken.out")"
else
  grep -q "FAIL" "$WORK/broken.out" && pass "a perturbed gradient fails the check" \
    || fail "the perturbed check failed without a comparison: $(tail -2 "$WORK/broken.out")"
fi
finish
