# Issue 35, "Done when" 1: Hugging Face weights in and out. Weights written in HF's names
# and shapes by numpy (tests/reference/hf_models.py: GPT-2, a GQA Llama in BF16 shards,
# Llama 3.1's RoPE scaling, Qwen2's biases, Qwen3's q/k norms and tied head, Mistral's
# window) are imported; elastrain's logits on the imported checkpoint equal an independent
# float64 PyTorch forward of the HF weights within 1e-5 (relative); exported back, the
# tensors are the originals exactly. Then GPT-2 and the Llama train a few steps on 2
# workers with FSDP, are exported in HF layout, and the trained HF weights' reference
# logits equal elastrain's on the trained checkpoint. Hostile directories are refused by name.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
"$PY" -c "import torch, numpy" 2>/dev/null || { fail "python3-torch and python3-numpy are needed (scripts/install_deps.sh --test)"; finish; exit 1; }
REF="$SRC/tests/reference/hf_models.py"
LOGITS="$(dirname "$BIN")/ckpt_logits"
TOKENS="5 17 200 3 99 42 7 250 1 128 64 33"

# compare NAME CKPT HF_DIR: elastrain's logits on CKPT against the reference on HF_DIR.
compare() {
  local out
  "$LOGITS" "$2" "$WORK/$1.f32" $TOKENS || { fail "$1: ckpt_logits failed"; return; }
  out=$("$PY" "$REF" check "$3" "$WORK/$1.f32" $TOKENS 2>&1) && pass "$1: logits: $out" || fail "$1: logits: $out"
}

for spec in "gpt2 1 F32" "llama 3 BF16" "llama31 1 F32" "qwen2 2 F32" "qwen3 1 BF16" "mistral 1 F32"; do
  set -- $spec
  arch=$1 hf="$WORK/hf_$1"
  "$PY" "$REF" write "$hf" "$arch" --shards "$2" --dtype "$3" --seed 7
  out=$("$BIN" checkpoint import "$hf" "$WORK/ck_$arch" 2>&1) && pass "import $arch ($2 file(s), $3): $(head -1 <<<"$out")" \
    || { fail "import $arch: $out"; continue; }
  compare "$arch" "$WORK/ck_$arch" "$hf"
  out=$("$BIN" checkpoint export "$WORK/ck_$arch" "$WORK/exp_$arch" --format hf --max-shard-size 40KB 2>&1) \
    || { fail "export $arch: $out"; continue; }
  same=$("$PY" "$REF" same "$hf" "$WORK/exp_$arch" 2>&1) && pass "export $arch: $out; the original tensors: $same" \
    || fail "export $arch: not the original tensors: $same"
done
n=$(ls "$WORK"/exp_llama/model-*-of-*.safetensors 2>/dev/null | wc -l)
[ "$n" -gt 1 ] && [ -s "$WORK/exp_llama/model.safetensors.index.json" ] && pass "--max-shard-size 40KB: $n shards and the index" \
  || fail "export llama: $n shard files"

# Fine-tune on 2 workers with FSDP, then hand the result back in HF layout.
for arch in gpt2 llama; do
  run="$WORK/runs/ft_$arch"
  if "$BIN" train "$WORK/ck_$arch/model.yml" load_parameters_path="$WORK/ck_$arch" num_workers=2 ici_fsdp_parallelism=2 \
       steps=4 checkpoint_period=4 max_target_length=16 global_batch_size=4 threads_per_worker=1 \
       dashboard_port=0 base_output_directory="$WORK/runs" run_name="ft_$arch" >"$WORK/ft_$arch.log" 2>&1; then
    pass "$arch: trained 4 steps from the imported weights on 2 workers (FSDP)"
  else
    fail "$arch: training failed: $(tail -3 "$WORK/ft_$arch.log")"; continue
  fi
  ck=$(ls -d "$run"/checkpoints/step_* | tail -1)
  out=$("$BIN" checkpoint export "$ck" "$WORK/tuned_$arch" --format hf 2>&1) || { fail "export tuned $arch: $out"; continue; }
  compare "tuned_$arch" "$ck" "$WORK/tuned_$arch"
  d=$("$PY" "$REF" differ "$WORK/hf_$arch" "$WORK/tuned_$arch" 2>&1) && pass "tuned $arch: $d" || fail "tuned $arch: $d"
done

# Hostile and unsupported directories: refused naming the problem, nothing written.
expect_refusal() {  # NAME PATTERN HF_DIR
  local out rc=0
  out=$("$BIN" checkpoint import "$3" "$WORK/refused_$1" 2>&1) || rc=$?
  if [ "$rc" -ne 0 ] && grep -q -- "$2" <<<"$out" && [ ! -e "$WORK/refused_$1" ]; then
    pass "$1: refused: $(cut -c1-160 <<<"$out")"
  else
    fail "$1: exit $rc, expected '$2' and no output directory: $out"
  fi
}
bad="$WORK/bad"
mk() { rm -rf "$bad"; cp -r "$WORK/hf_$1" "$bad"; }
mk llama; sed -i 's/LlamaForCausalLM/GemmaForCausalLM/; s/"model_type": "llama"/"model_type": "gemma"/' "$bad/config.json"
expect_refusal architecture "GemmaForCausalLM.*cannot be imported" "$bad"
mk llama31; sed -i 's/"llama3"/"yarn"/' "$bad/config.json"
expect_refusal rope_scaling "rope_scaling.*yarn.*not implemented" "$bad"
mk gpt2; sed -i 's/"num_hidden_layers": 2/"num_hidden_layers": 3/; s/"n_layer": 2/"n_layer": 3/' "$bad/config.json"
expect_refusal missing "tensor h.2.ln_1.weight is missing" "$bad"
mk llama; sed -i 's/"intermediate_size": 96/"intermediate_size": 97/' "$bad/config.json"
expect_refusal shape "mlp.gate_proj.weight is \[96, 64\], config.json implies \[97, 64\]" "$bad"
mk llama; sed -i 's/"model-00001-of-00003.safetensors"/"..\/model-00001-of-00003.safetensors"/' "$bad/model.safetensors.index.json"
expect_refusal weight_map "expected a .safetensors file name in the same directory" "$bad"
mk gpt2; head -c 300 "$WORK/hf_gpt2/model.safetensors" >"$bad/model.safetensors"
expect_refusal truncated "model.safetensors" "$bad"
mkdir -p "$WORK/full" && touch "$WORK/full/x"
out=$("$BIN" checkpoint import "$WORK/hf_llama" "$WORK/full" 2>&1) && fail "a non-empty output directory was written" \
  || { grep -q "not an empty directory" <<<"$out" && [ "$(ls "$WORK/full")" = x ] && pass "a non-empty output directory is refused, left as it was" || fail "non-empty out: $out"; }
"$BIN" train model_name=tiny-gemma steps=1 dashboard_port=0 base_output_directory="$WORK/runs" run_name=gemma >/dev/null 2>&1 || true
ck=$(ls -d "$WORK"/runs/gemma/checkpoints/step_* 2>/dev/null | tail -1)
if [ -n "$ck" ]; then
  out=$("$BIN" checkpoint export "$ck" "$WORK/exp_gemma" --format hf 2>&1) && fail "gemma exported" \
    || { grep -q "decoder_block=gemma.*no Hugging Face form" <<<"$out" && [ ! -e "$WORK/exp_gemma" ] \
         && pass "export of gemma refused: $(cut -c1-140 <<<"$out")" || fail "gemma export: $out"; }
else
  fail "no checkpoint of tiny-gemma to export"
fi
finish
