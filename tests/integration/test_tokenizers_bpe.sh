# GPT-2 byte-level BPE and tiktoken BPE (docs/tokenizers.md) against an independent Python
# implementation (tests/reference/bpe_reference.py, written from the published algorithms):
# it learns a small vocabulary of each kind, writes the files elastrain reads, and the ids
# it encodes a test text to (accents, combining marks, CJK, emoji with ZWJ and skin tones,
# flags, whitespace runs and Unicode's other spaces, newlines, CRLF, digit runs,
# contractions), and every assigned code point in a short context. `elastrain tokenizer
# encode` must give the same ids and `decode` the same bytes back. Then hostile files get
# one-line errors naming the file and line. Runs in seconds; needs python3-regex.
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
if ! "$PY" -c "import regex" 2>/dev/null; then
  echo "skip: python3-regex is not installed (bash scripts/install_deps.sh --test)"
  exit 77
fi
REF="$WORK/ref"
"$PY" "$SRC/tests/reference/bpe_reference.py" "$REF" || { fail "the Python reference failed"; finish; exit 1; }
check() { if grep -qE -e "$2" <<<"$3"; then pass "$1"; else fail "$1: no /$2/ in: $3"; fi; }

# same_ids NAME EXPECTED_FILE -- encode ARGS: the ids elastrain prints equal the reference's.
same_ids() {
  local name=$1 want=$2 got
  shift 3
  if ! got=$("$BIN" tokenizer encode "$@" --input "$REF/text.txt" 2>"$WORK/encode.err"); then
    fail "$name: encode failed: $(cat "$WORK/encode.err")"
    return
  fi
  if [ "$got" = "$(cat "$want")" ]; then
    pass "$name: $(wc -w <<<"$got") ids equal the Python reference's"
  else
    fail "$name: ids differ from the reference's"
    diff <(tr ' ' '\n' <"$want") <(tr ' ' '\n' <<<"$got") | head -20
  fi
  printf '%s\n' "$got" >"$WORK/ids.txt"
  if "$BIN" tokenizer decode "$@" --input "$WORK/ids.txt" >"$WORK/back.txt" && cmp -s "$WORK/back.txt" "$REF/text.txt"; then
    pass "$name: decode(encode(text)) is the text, byte for byte"
  else
    fail "$name: decode(encode(text)) differs from the text"
  fi
}

same_ids "gpt2 BPE (directory, type from the path)" "$REF/expected_gpt2.txt" -- --tokenizer "$REF/gpt2"
same_ids "gpt2 BPE (vocab.json, --type huggingface)" "$REF/expected_gpt2.txt" -- \
  --tokenizer "$REF/gpt2/vocab.json" --type huggingface
same_ids "tiktoken (type sniffed from the file)" "$REF/expected_tiktoken.txt" -- --tokenizer "$REF/tiktoken.model"
same_ids "tiktoken (--type tiktoken)" "$REF/expected_tiktoken.txt" -- --tokenizer "$REF/tiktoken.model" --type tiktoken

# Every code point of Unicode (as this Python's unicodedata has it: Debian 12 and PCRE2
# 10.42 both know Unicode 14) alone, after a space, doubled and before a digit: the
# character classes \p{L}, \p{N} and \s (White_Space: PCRE2's own \s also takes U+180E).
for kind in gpt2 tiktoken; do
  tok="$REF/gpt2"
  [ $kind = tiktoken ] && tok="$REF/tiktoken.model"
  got=$("$BIN" tokenizer encode --tokenizer "$tok" --input "$REF/codepoints.txt" 2>/dev/null || true)
  if [ "$got" = "$(cat "$REF/expected_${kind}_codepoints.txt")" ]; then
    pass "$kind: every assigned code point encodes as the reference does ($(wc -w <<<"$got") ids)"
  else
    fail "$kind: code points encode differently from the reference"
  fi
done

# The special tokens: ids after the vocabulary, decoded to their names; never made from text.
n=$(wc -l <"$REF/tiktoken.model")
out=$("$BIN" tokenizer decode --tokenizer "$REF/tiktoken.model" --ids "$n $((n + 9))")
check "tiktoken specials follow the last rank" '^<\|begin_of_text\|><\|eot_id\|>$' "$out"
err=$("$BIN" tokenizer encode --tokenizer "$REF/gpt2" --text "x" 2>&1 >/dev/null)
check "encode reports throughput and the tokenizer id" "tokens in .* MB/s\), .* s of CPU .*; tokenizer gpt2bpe:[0-9a-f]{16}, vocab 557" "$err"

# Training reads them: tokenizer_path picks the type (a directory: GPT-2 BPE; a file of
# "base64 rank" lines: tiktoken), and too small a model vocabulary is refused.
for tok in "$REF/gpt2" "$REF/tiktoken.model"; do
  name=$(basename "$tok")
  if "$BIN" train model_name=tiny vocab_size=1024 dataset_type=text dataset_path=/usr/share/games/fortunes/fortunes \
      tokenizer_path="$tok" steps=3 eval_interval=-1 hardware_peak_tflops=1 run_name="bpe-$name" >"$WORK/train-$name.out" 2>&1 &&
      [ "$(losses "runs/bpe-$name/metrics.jsonl" | wc -l)" -ge 1 ]; then
    pass "trains 3 steps on fortunes with the $name tokenizer"
  else
    fail "training with the $name tokenizer: $(tail -3 "$WORK/train-$name.out")"
  fi
done
expect_error "a vocabulary larger than the model's" "vocabulary of 557 tokens does not fit vocab_size=256" -- \
  train model_name=tiny dataset_type=text dataset_path=/usr/share/games/fortunes/fortunes tokenizer_path="$REF/gpt2" steps=1

# Hostile files: one line on stderr naming the file, the line and what was expected.
mkdir -p "$WORK/bad"
cp "$REF/gpt2/vocab.json" "$WORK/bad/vocab.json"
{ cat "$REF/gpt2/merges.txt"; printf 'Ġ zzzz\n'; } >"$WORK/bad/merges.txt"
lines=$(wc -l <"$WORK/bad/merges.txt")
expect_error "gpt2: a merge naming an unknown token" \
  "merges.txt: line $lines: token \"zzzz\" of merge .* is not in .*vocab.json: expected" -- \
  tokenizer encode --tokenizer "$WORK/bad" --text x
printf '{"a": 1,' >"$WORK/bad/vocab.json"
expect_error "gpt2: malformed JSON" "vocab.json: not valid JSON .*expected a JSON object" -- \
  tokenizer encode --tokenizer "$WORK/bad" --text x
{ head -5 "$REF/tiktoken.model"; echo 'not*base64 5'; } >"$WORK/bad/tok.model"
expect_error "tiktoken: invalid base64" "tok.model: line 6: \"not\*base64\" is not a token in base64: expected" -- \
  tokenizer encode --tokenizer "$WORK/bad/tok.model" --type tiktoken --text x
{ head -5 "$REF/tiktoken.model"; echo 'aGk= 3'; } >"$WORK/bad/tok.model"
expect_error "tiktoken: a duplicate rank" "tok.model: line 6: rank 3 repeats line 4" -- \
  tokenizer encode --tokenizer "$WORK/bad/tok.model" --type tiktoken --text x
expect_error "unknown --type" "--type=gpt2: expected one of bytes, sentencepiece, tiktoken, huggingface" -- \
  tokenizer encode --tokenizer "$REF/gpt2" --type gpt2 --text x
expect_error "decode: an id out of range" "id 99999 \(token 2\): expected an integer in \[0, 557\)" -- \
  tokenizer decode --tokenizer "$REF/gpt2" --ids "5 99999"
finish
