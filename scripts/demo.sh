#!/usr/bin/env bash
# `make demo`: trains a BPE tokenizer on the fortunes corpus (once), then the `small`
# llama model on it, prints the run's summary, and ends with a sample of what the model
# learned (`elastrain generate` on the run's last checkpoint). Extra key=value arguments
# are passed to `elastrain train`, e.g. `make demo ARGS="steps=50"`.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/elastrain
TOKENIZER=runs/tokenizers/fortunes-4096.model
if [ ! -f "$TOKENIZER" ]; then
  "$BIN" tokenizer train --input /usr/share/games/fortunes --vocab-size 4096 --output "$TOKENIZER"
fi
"$BIN" train configs/demo.yml "$@"
# The run's directory, as the arguments may have moved it.
OUT=runs NAME=demo
for a in "$@"; do
  case "$a" in
    base_output_directory=*) OUT=${a#*=} ;;
    run_name=*) NAME=${a#*=} ;;
  esac
done
echo
echo "A sample of what the model learned (elastrain generate --run-dir $OUT/$NAME):"
exec "$BIN" generate --run-dir "$OUT/$NAME" --prompt "The " --max-new-tokens 100 --temperature 0.8 --top-k 40
