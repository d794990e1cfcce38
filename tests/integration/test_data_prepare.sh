# Issue 35, `elastrain data prepare` (docs/datasets.md): text and JSONL tokenised into llm.c
# token files with a manifest.json, in parallel and resumable.
# - The shards' tokens (read back with numpy) equal `tokenizer encode` of each whole file
#   after the document token, for GPT-2 BPE, tiktoken and bytes, though the files were cut
#   into 2 KiB chunks: the cut rule (a line start with printable ASCII) never splits a
#   pre-tokenised piece. The corpus has lines starting with spaces, tabs, CJK, emoji and
#   Unicode spaces, where a cut would change the tokens.
# - 1 worker and 2 workers write byte-identical files; so does a run interrupted by SIGTERM
#   and one SIGKILLed, each resumed; a corrupted part file is redone, not trusted.
# - A rerun has nothing to do; another tokenizer, a non-empty directory and bad JSONL lines
#   (named by file:line, past many chunks) are refused.
# - The trainer reads the shards (dataset_type=llmc) and checks them against manifest.json:
#   another tokenizer, a stray .bin, a shard of another length and a hostile manifest are
#   refused by name.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
if ! "$PY" -c "import regex, numpy" 2>/dev/null; then
  echo "skip: python3-regex or python3-numpy is not installed (bash scripts/install_deps.sh --test)"
  exit 77
fi
REF="$WORK/ref"
"$PY" "$SRC/tests/reference/bpe_reference.py" "$REF" >/dev/null || { fail "the Python reference failed"; finish; exit 1; }
check() { if grep -qE -e "$2" <<<"$3"; then pass "$1"; else fail "$1: no /$2/ in: $3"; fi; }

# A corpus of two text files (~300 KB) whose lines start every way the cut rule cares about.
mkdir -p corpus
"$PY" - "$REF/text.txt" corpus <<'EOF'
import random, sys
ref = open(sys.argv[1], encoding="utf-8").read()
rng = random.Random(7)
words = ref.split() + ["alpha", "beta", "gamma", "delta", "über", "naïve", "東京", "🙂", "x2y3", "don't"]
starts = ["", "", "", " ", "  ", "\t", "\u00a0", "\u3000", "日本", "👍🏽 ", "\r\n", "", "'s ", "123 "]
for n, lines in (("a.txt", 4000), ("b.txt", 2500)):
    out = []
    for i in range(lines):
        line = rng.choice(starts) + " ".join(rng.choice(words) for _ in range(rng.randint(0, 12)))
        out.append(line + rng.choice(["\n", "\n", "\n\n", "  \n", ".\n"]))
    open(f"{sys.argv[2]}/{n}", "w", encoding="utf-8").write("".join(out) + ref)
EOF
# tokens DIR: every token of DIR's shards, in order, one line (numpy reads the llm.c header).
tokens() {
  "$PY" - "$1" <<'EOF'
import glob, sys, numpy as np
out = []
for f in sorted(glob.glob(sys.argv[1] + "/shard_*.bin")):
    h = np.fromfile(f, dtype="<i4", count=256)
    assert h[0] == 20240520 and h[1] in (1, 2), (f, h[:3])
    t = np.fromfile(f, dtype="<u2" if h[1] == 1 else "<u4", offset=1024)
    assert len(t) == h[2], (f, len(t), h[2])
    out.extend(t.tolist())
print(" ".join(map(str, out)))
EOF
}
same_files() { diff -r --exclude=manifest.json "$1" "$2" >/dev/null && pass "$3" || fail "$3: $(diff -rq "$1" "$2" | head -3)"; }
prep() { "$BIN" data prepare "$@" 2>"$WORK/prep.err"; }

# 1. Equal to the whole files' encoding, for each tokenizer.
for kind in gpt2 tiktoken bytes; do
  case $kind in
    gpt2) tok=(--tokenizer "$REF/gpt2"); enc=("${tok[@]}"); doc="<|endoftext|>" ;;
    tiktoken) tok=(--tokenizer "$REF/tiktoken.model"); enc=("${tok[@]}"); doc="<|begin_of_text|>" ;;
    bytes) tok=(); enc=(--tokenizer "" --type bytes); doc="" ;;
  esac
  if ! out=$(prep corpus/a.txt corpus/b.txt --output out_$kind "${tok[@]}" --chunk-bytes 2048 --shard-tokens 50000); then
    fail "$kind: prepare failed: $(tail -2 "$WORK/prep.err")"
    continue
  fi
  [ $kind = gpt2 ] && echo "$out" | sed 's/^/    /'
  want=""
  for f in a b; do
    ids=$("$BIN" tokenizer encode "${enc[@]}" --input corpus/$f.txt 2>/dev/null)
    docid=""
    [ -n "$doc" ] && docid=$(grep -o "\"document_token_id\": [0-9]*" out_$kind/manifest.json | grep -o '[0-9]*$')
    want+="${want:+ }${docid:+$docid }$ids"
  done
  got=$(tokens out_$kind)
  shards=$(ls out_$kind/shard_*.bin | wc -l)
  chunks=$(grep -o "tokenised [0-9]* chunks" <<<"$out" | grep -o '[0-9]*')
  if [ -n "$got" ] && [ "$got" = "$want" ]; then
    pass "$kind: $(wc -w <<<"$got") tokens in $shards shards from $chunks chunks equal the whole files' encoding${doc:+, each after $doc}"
  else
    fail "$kind: the shards' tokens differ from the whole files' encoding"
    diff <(tr ' ' '\n' <<<"$want") <(tr ' ' '\n' <<<"$got") | head -6 || true
  fi
done
[ -f out_gpt2/manifest.json ] && [ ! -e out_gpt2/.prepare ] && pass "manifest.json written, .prepare/ removed" \
  || fail "manifest.json missing or .prepare/ left: $(ls -a out_gpt2)"
check "the manifest counts tokens and names the tokenizer by its hash" '"id": "gpt2bpe:[0-9a-f]+"' \
  "$(cat out_gpt2/manifest.json)"

# 2. The same files with 1 worker as with 2.
prep corpus --output one --tokenizer "$REF/gpt2" --chunk-bytes 2048 --shard-tokens 50000 --workers 1 >/dev/null &&
  prep corpus --output two --tokenizer "$REF/gpt2" --chunk-bytes 2048 --shard-tokens 50000 --workers 2 >/dev/null &&
  same_files one two "1 worker and 2 workers write the same shards" || fail "prepare of the directory failed"

tr=(train model_name=tiny vocab_size=1024 max_target_length=32 steps=3 global_batch_size=4 per_device_batch_size=4
    eval_interval=0 log_period=1 threads_per_worker=1 dashboard_port=0 base_output_directory="$WORK/runs"
    dataset_type=llmc)
# 3. Interrupted (SIGTERM, then SIGKILL) and resumed: the same files. 40 copies of the
#    corpus (13 MB) in 4 KiB chunks, on 1 worker, so that the signal lands mid-run.
interrupt() {
  local sig=$1 dir=$2  # TERM, not INT: a shell's background job starts with SIGINT ignored
  "$BIN" data prepare big --output $dir --tokenizer "$REF/gpt2" --chunk-bytes 4096 --shard-tokens 20000 \
    --workers 1 >/dev/null 2>"$WORK/$dir.err" &
  local pid=$!
  wait_until 60 sh -c "ls $dir/.prepare/part_* 2>/dev/null | sed -n 20p | grep -q . && test -f $dir/shard_000000.bin" ||
    true
  kill -$sig $pid 2>/dev/null || true
  local rc=0
  { wait $pid; } 2>/dev/null || rc=$?
  local parts
  parts=$(ls $dir/.prepare/ 2>/dev/null | grep -c part_ || true)
  if [ "$rc" -ne 0 ] && [ "$parts" -gt 0 ] && [ ! -e $dir/manifest.json ]; then
    pass "SIG$sig mid-run: exit $rc, $parts parts kept, no manifest${3:+: $(tail -1 "$WORK/$dir.err" | cut -c1-150)}"
  else
    fail "SIG$sig: exit $rc, $parts parts, manifest $(ls $dir/manifest.json 2>&1)"
  fi
}
mkdir big && for i in $(seq -w 1 20); do cp corpus/a.txt big/a$i.txt; cp corpus/b.txt big/b$i.txt; done
big=(big --tokenizer "$REF/gpt2" --chunk-bytes 4096 --shard-tokens 20000)
prep "${big[@]}" --output whole >/dev/null
interrupt TERM int says
check "SIGTERM says how to resume" "interrupted: [0-9]+ of [0-9]+ chunks done.*run the same command again" \
  "$(tail -1 "$WORK/int.err")"
out=$(prep "${big[@]}" --output int) || fail "resume failed"
check "the resumed run kept the interrupted run's chunks" "\([1-9][0-9]* resumed\)" "$out"
same_files whole int "interrupted by SIGTERM and resumed: the same shards as one run"
interrupt KILL killed
expect_error "the trainer refuses the shards of an unfinished prepare" \
  "shard_000000.bin: its directory holds an unfinished .elastrain data prepare. \(.prepare/" -- \
  "${tr[@]}" run_name=u dataset_path="$WORK/killed/shard_000000.bin"
# A part the kill may have left half-written is never trusted: corrupt one on purpose.
parts=(killed/.prepare/part_*.bin)  # a glob, not `ls | head` (SIGPIPE under pipefail)
part=${parts[0]}
printf 'garbage' | dd of="$part" bs=1 seek=60 conv=notrunc status=none
prep "${big[@]}" --output killed >/dev/null \
  || fail "resume after SIGKILL failed: $(tail -2 "$WORK/prep.err")"
same_files whole killed "SIGKILLed, a part corrupted, resumed: the same shards as one run"

# 4. A rerun has nothing to do; other plans are refused.
out=$(prep "${big[@]}" --output whole) &&
  check "a rerun of a finished prepare has nothing to do" "already prepared.*nothing to do" "$out" ||
  fail "rerun failed: $(cat "$WORK/prep.err")"
expect_error "another tokenizer into a prepared directory is refused" \
  "manifest.json: prepared from other inputs, tokenizer or options .*choose another output directory" -- \
  data prepare big --output whole --chunk-bytes 4096 --shard-tokens 20000
mkdir -p busy && touch busy/notes.txt
expect_error "a non-empty directory is refused" "busy: not empty, and holds no prepare of these inputs" -- \
  data prepare corpus --output busy
expect_error "a missing input is named" "input nosuch.txt: no such file or directory" -- \
  data prepare nosuch.txt --output x
for bad in "--shard-tokens 0:shard tokens 0: expected 1 to" "--shard-tokens -5:shard tokens -5: expected 1 to" \
  "--shard-tokens 99999999999:shard tokens 99999999999: expected 1 to" "--chunk-bytes 0:chunk bytes 0: expected >= 1" \
  "--workers 100000:workers 100000: expected 0 \\(one per core\\) to 1024"; do
  flag=${bad%%:*}
  # shellcheck disable=SC2086  # the flag and its value, split
  expect_error "$flag is refused" "${bad#*:}" -- data prepare corpus --output x $flag
done
mkdir -p linkdir && ln -sf "$WORK/corpus/a.txt" linkdir/a.txt && ln -sf /nonexistent linkdir/dangling.txt
expect_error "a dangling symlink input is named" "dangling.txt: no such file or directory" -- \
  data prepare linkdir/dangling.txt --output x
expect_error "a bad --format is named" "--format=csv: expected text or jsonl" -- data prepare corpus --output x --format csv

# 5. JSONL: documents from the field, each after the document token; a bad line is named
#    by its line number though it lies many chunks into the file.
"$PY" - <<'EOF'
import json, random
rng = random.Random(3)
with open("docs.jsonl", "w") as f:
    for i in range(400):
        f.write(json.dumps({"id": i, "body": f"document {i}: " + " ".join(rng.choice(["a", "bb", "ccc", "é", "日"]) for _ in range(rng.randint(1, 40)))}) + "\n")
with open("bad.jsonl", "w") as f:
    for i in range(300):
        f.write(json.dumps({"body": f"fine {i}"}) + "\n")
    f.write('{"body": 12}\n')
EOF
out=$(prep docs.jsonl --output jl --tokenizer "$REF/gpt2" --text-field body --chunk-bytes 512) \
  && check "JSONL: 400 documents" "[0-9]+ tokens, 400 documents" "$out" || fail "JSONL prepare failed: $(cat "$WORK/prep.err")"
first=$("$BIN" tokenizer encode --tokenizer "$REF/gpt2" --text "$("$PY" -c 'import json;print(json.loads(open("docs.jsonl").readline())["body"], end="")')" 2>/dev/null)
eot=$(grep -o "\"document_token_id\": [0-9]*" jl/manifest.json | grep -o '[0-9]*$')
n=$(( $(wc -w <<<"$first") + 1 ))
[ "$(tokens jl | cut -d' ' -f1-$n)" = "$eot $first" ] && pass "JSONL: the first document is <|endoftext|> then its text's ids" \
  || fail "JSONL: first document's tokens differ: $(tokens jl | cut -d' ' -f1-$n) vs $eot $first"
expect_error "a bad JSONL line is named by file and line, past many chunks" \
  "bad.jsonl:301: field \"body\" is a number, expected a string" -- \
  data prepare bad.jsonl --output badjl --text-field body --chunk-bytes 256

# 6. The trainer reads the shards and checks them against the manifest.
if out=$("$BIN" "${tr[@]}" run_name=ok dataset_path="$WORK/whole" tokenizer_path="$REF/gpt2" 2>&1); then
  check "training from the prepared shards with the same tokenizer, manifest checked" \
    "manifest.json: [0-9]+ shards, [0-9]+ tokens, tokenizer gpt2bpe:[0-9a-f]+ \(the job's\)" "$out"
else
  fail "training from the prepared shards failed: $(tail -3 <<<"$out")"
fi
expect_error "training with another tokenizer than the prepare's is refused" \
  "manifest.json: these token files were prepared with tokenizer gpt2bpe:[0-9a-f]+ .*the job's tokenizer is tiktoken:" -- \
  "${tr[@]}" run_name=t dataset_path="$WORK/whole" tokenizer_path="$REF/tiktoken.model"
cp -r whole stray && cp whole/shard_000000.bin stray/extra.bin
expect_error "a .bin the manifest does not list is refused" "extra.bin: not one of the shards .*manifest.json lists" -- \
  "${tr[@]}" run_name=s dataset_path="$WORK/stray"
cp -r whole short && "$PY" - short <<'EOF'
import sys, numpy as np
f = sys.argv[1] + "/shard_000000.bin"
h = np.fromfile(f, dtype="<i4", count=256); t = np.fromfile(f, dtype="<u2", offset=1024)
h[2] -= 10; open(f, "wb").write(h.tobytes() + t[:-10].tobytes())
EOF
expect_error "a shard of another length than the manifest's is refused" "shard_000000.bin: [0-9]+ tokens, .*manifest.json says [0-9]+" -- \
  "${tr[@]}" run_name=l dataset_path="$WORK/short"
for hostile in '{"elastrain_prepare": 1}' '[1,2]' '{"elastrain_prepare": 1, "plan": "x", "format": "llm.c", "llmc_version": 1, "tokenizer": {"id": "bytes", "type": "bytes", "path": "", "vocab_size": 256, "document_token": null}, "text_field": "", "inputs": [], "shards": [{"file": "../../etc/passwd", "tokens": 1, "xxh3": "0"}], "tokens": 1, "documents": 0, "bytes": 0}'; do
  cp -r whole hostile && printf '%s' "$hostile" >hostile/manifest.json
  expect_error "a hostile manifest is refused by field: ${hostile:0:40}" "manifest.json: .*expected" -- \
    "${tr[@]}" run_name=h dataset_path="$WORK/hostile"
  rm -rf hostile
done
finish
