#!/usr/bin/env bash
# `make demo`: trains a BPE tokenizer on the fortunes corpus (once), then the `small`
# llama model on it, and prints the run's summary. Extra key=value arguments are passed
# to `elastrain train`, e.g. `make demo ARGS="steps=50"`.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/elastrain
TOKENIZER=runs/tokenizers/fortunes-4096.model
if [ ! -f "$TOKENIZER" ]; then
  "$BIN" tokenizer train --input /usr/share/games/fortunes --vocab-size 4096 --output "$TOKENIZER"
fi
exec "$BIN" train configs/demo.yml "$@"
