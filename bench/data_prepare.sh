#!/usr/bin/env bash
# `elastrain data prepare` on a 100 MB text corpus (issue 35, Done-when 3): tokens/s with 1
# worker and with one per core, how busy the cores were, and an interrupted run (SIGTERM at
# about half way) resumed, whose shards must equal the uninterrupted run's byte for byte.
#   usage: bench/data_prepare.sh PATH/TO/elastrain [MB]
# The corpus: Debian's own text on this machine (documentation, licences, changelogs,
# Python's standard library), concatenated into 10 files to MB (100) in all. Tokenizers:
# GPT-2's byte-level BPE format with the 300-merge vocabulary that the independent Python
# reference learns (tests/reference/bpe_reference.py; GPT-2's own 50k-merge files are not
# on this machine), then a 16k sentencepiece BPE. No other tokenizer (tiktoken, Hugging
# Face tokenizers) is packaged for Debian to compare against. About 3 minutes on 2 cores.
# Exit 1 only when something broke (not on a rate).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$(readlink -f "${1:?usage: bench/data_prepare.sh PATH/TO/elastrain [MB]}")
MB=${2:-100}
WORK=$(mktemp -d /tmp/elastrain_bench_prepare.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

/usr/bin/python3 "$ROOT/tests/reference/bpe_reference.py" ref >/dev/null
mkdir corpus
/usr/bin/python3 - "$MB" corpus <<'EOF'
import glob, gzip, os, sys
target, out = int(sys.argv[1]) << 20, sys.argv[2]
texts = []
for pattern in ("/usr/share/common-licenses/*", "/usr/share/doc/*/copyright", "/usr/share/doc/*/changelog*.gz",
                "/usr/share/doc/*/*.md", "/usr/share/doc/*/README*", "/usr/lib/python3*/**/*.py"):
    for f in sorted(glob.glob(pattern, recursive=True)):
        try:
            data = gzip.open(f).read() if f.endswith(".gz") else open(f, "rb").read()
            texts.append(data.decode("utf-8"))
        except (OSError, UnicodeDecodeError, EOFError):
            pass
pool = "\n".join(texts).encode()
print(f"corpus pool: {len(texts)} files, {len(pool) / 1e6:.1f} MB of distinct text", file=sys.stderr)
per = target // 10
for i in range(10):
    with open(f"{out}/part{i}.txt", "wb") as f:
        left, start = per, (i * len(pool)) // 10
        while left > 0:
            piece = pool[start:start + left]
            f.write(piece)
            left -= len(piece)
            start = 0
EOF
echo "corpus: $(du -sm corpus | cut -f1) MB in $(ls corpus | wc -l) files; tokenizer: 300-merge GPT-2-format BPE"
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

run() {  # run NAME ARGS...: one prepare, its summary lines
  local name=$1
  shift
  echo "--- $name"
  "$BIN" data prepare corpus --tokenizer ref/gpt2 "$@" 2>/dev/null | grep -E "^(wrote|tokenised|cpu)" | sed 's/^/    /'
}
run "1 worker" --output one --workers 1
run "one worker per core ($(nproc))" --output all

echo "--- interrupted at about half way (SIGTERM), then resumed"
"$BIN" data prepare corpus --tokenizer ref/gpt2 --output resumed >/dev/null 2>int.err &
pid=$!
half=$(( $(find corpus -type f -printf '%s\n' | awk '{s += int(($1 + 1048575) / 1048576)} END {print int(s / 2)}') ))
until [ "$(ls resumed/.prepare 2>/dev/null | grep -c part_ || true)" -ge "$half" ] || ! kill -0 $pid 2>/dev/null; do sleep 0.1; done
kill -TERM $pid 2>/dev/null || true
rc=0
wait $pid || rc=$?
echo "    first run: exit $rc: $(tail -1 int.err | sed 's/.*error: //')"
"$BIN" data prepare corpus --tokenizer ref/gpt2 --output resumed 2>/dev/null | grep -E "^(tokenised|cpu)" | sed 's/^/    /'
if diff -r --exclude=manifest.json all resumed >/dev/null && [ "$rc" -ne 0 ]; then
  echo "    resumed shards equal the uninterrupted run's, byte for byte ($(ls resumed/shard_* | wc -l) files)"
else
  echo "    FAIL: the resumed run's files differ from the uninterrupted run's (or the interrupt did not land)"
  exit 1
fi
diff -r --exclude=manifest.json one all >/dev/null && echo "    1 worker's shards equal $(nproc) workers' too" \
  || { echo "    FAIL: 1 worker's shards differ"; exit 1; }

# A vocabulary of a realistic size: a 16k sentencepiece BPE that `elastrain tokenizer train`
# learns on 5 MB of the corpus. A sentencepiece text file is one unit (docs/datasets.md),
# so the 10 files are the parallelism here.
head -c 5000000 corpus/part3.txt >sample.txt
"$BIN" tokenizer train --input sample.txt --vocab-size 16000 --output spm16k.model >/dev/null
echo "--- sentencepiece BPE, vocab 16000 (one unit per file: 10 units), one worker per core"
"$BIN" data prepare corpus --tokenizer spm16k.model --output spm 2>/dev/null | grep -E "^(wrote|tokenised|cpu)" | sed 's/^/    /'
