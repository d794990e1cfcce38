"""Every config file of a MaxText checkout (tests/fixtures/maxtext/) through `elastrain plan`
and a 2-step run at a small shape (issue 34, "Done when" 1). Each file either trains the model
it describes or is refused naming one of its keys; none is silently substituted.

What "the model it describes" is, is computed here independently of elastrain, the way
MaxText's pyconfig merges configs: the base_config chain (relative to the file, else the
configs folder), then models/<model_name>.yml, then the command line. Every model key of
that merge must come out of elastrain's resolved config.yml with the same value (the shape
keys are the command line's small shape).

usage: maxtext_walk.py ELASTRAIN FIXTURES WORKDIR   (prints ok/FAIL lines, exits 1 on a FAIL)
"""
import os
import re
import subprocess
import sys

import yaml

BIN, ROOT, WORK = sys.argv[1:4]
SMALL = {"base_emb_dim": 32, "base_num_query_heads": 4, "base_num_kv_heads": 4, "head_dim": 8,
         "base_mlp_dim": 64, "base_num_decoder_layers": 2, "vocab_size": 256}
RUN = ["dataset_type=synthetic", "max_target_length=32", "per_device_batch_size=1", "steps=2",
       "gradient_accumulation_steps=1", "num_workers=1", "threads_per_worker=1", "log_period=1",
       "eval_interval=0", "enable_checkpointing=false", "hardware_peak_tflops=1", "dashboard_port=0",
       "base_output_directory=" + os.path.join(WORK, "runs"), "load_parameters_path=",
       "load_full_state_path="]
# Model keys whose value elastrain writes in its resolved config.yml, with MaxText's default
# (base.yml) where a merge lacks the key.
MODEL_KEYS = {
    "mlp_activations": ["silu", "linear"], "logits_via_embedding": False,
    "normalization_layer_epsilon": 1e-5, "rope_max_timescale": 10000, "attention_bias": False,
    "use_qk_norm": False, "attn_logits_soft_cap": 0.0, "final_logits_soft_cap": 0.0,
    "use_post_attn_norm": False, "use_post_ffw_norm": False, "z_loss_multiplier": 0.0,
}
BLOCKS = {"llama2": "llama", "llama3": "llama", "gpt3": "gpt2", "gpt": "gpt2"}

failed = 0


def report(ok, text):
    global failed
    print(("ok   - " if ok else "FAIL - ") + text)
    failed += 0 if ok else 1


def load(path):
    with open(path) as f:
        d = yaml.safe_load(f)
    return d if isinstance(d, dict) else {}


def find_base(path, name):
    if os.path.isabs(name):
        return name
    here = os.path.dirname(path)
    for cand in (os.path.join(here, name), os.path.join(ROOT, name)):
        if os.path.isfile(cand):
            return cand
    return None


def merged(path):
    """MaxText's merge of `path`: its chain, then its models/<model_name>.yml."""
    d = load(path)
    if "base_config" in d:
        base = find_base(path, d["base_config"])
        if base is None:
            return None
        m = merged_chain(base)
        m.update(d)
        d = m
    name = d.get("model_name", "default")
    own = os.path.basename(os.path.dirname(path)) == "models" and "model_name" not in d
    if own:
        name = os.path.splitext(os.path.basename(path))[0]
    model_file = os.path.join(ROOT, "models", name.replace("-Instruct", "") + ".yml")
    if name != "default" and not own and os.path.isfile(model_file):
        d.update(load(model_file))
    d["model_name"] = name
    return d


def merged_chain(path):
    d = load(path)
    if "base_config" in d:
        base = find_base(path, d["base_config"])
        m = merged_chain(base) if base else {}
        m.update(d)
        return m
    return d


def same(a, b):
    if isinstance(a, list) or isinstance(b, list):
        norm = lambda v: [str(x).strip() for x in (v if isinstance(v, list) else str(v).split(","))]
        return norm(a) == norm(b)
    if isinstance(a, bool) or isinstance(b, bool):
        return str(a).lower() == str(b).lower()
    try:
        return float(str(a).replace("_", "")) == float(str(b).replace("_", ""))
    except ValueError:
        return str(a) == str(b)


def resolved(run_dir):
    with open(os.path.join(run_dir, "config.yml")) as f:
        return yaml.safe_load(f)


files = sorted(os.path.relpath(os.path.join(d, f), ROOT)
               for d, _, fs in os.walk(ROOT) for f in fs if f.endswith(".yml"))
trained = refused = 0
for i, rel in enumerate(files):
    path = os.path.join(ROOT, rel)
    want = merged(path)
    small = dict(SMALL)
    if want is not None and BLOCKS.get(str(want.get("decoder_block")), want.get("decoder_block")) == "gpt2":
        small["base_num_kv_heads"] = small["base_num_query_heads"]
    args = [f"{k}={v}" for k, v in small.items()] + RUN
    plan = subprocess.run([BIN, "plan", path] + args, capture_output=True, text=True, timeout=120)
    if plan.returncode != 0:
        err = (plan.stderr.strip().splitlines() or [""])[-1]
        named = re.search(r"unknown key '([^']+)'|([a-z_0-9]+)=", err.split("error: ", 1)[-1])
        key = (named.group(1) or named.group(2)) if named else None
        # The key is the file's (its merge's), or one elastrain derives from it (rope_type
        # from a llama3.1/3.3 model_name, as MaxText does).
        known = want is None or key in want or key in MODEL_KEYS or key in ("base_config", "model_name", "rope_type")
        report(plan.returncode == 2 and key is not None and known,
               f"{rel}: refused (exit {plan.returncode}) naming {key}: {err[-160:]}")
        refused += 1
        continue
    run_name = f"walk{i}"
    train = subprocess.run([BIN, "train", path, f"run_name={run_name}"] + args, capture_output=True, text=True,
                           timeout=300)
    run_dir = os.path.join(WORK, "runs", run_name)
    if train.returncode != 0:
        report(False, f"{rel}: plan accepted it but train exited {train.returncode}: {train.stderr[-300:]}")
        continue
    got = resolved(run_dir)
    wrong = []
    for k, default in MODEL_KEYS.items():
        w = want.get(k, default)
        if k == "logits_via_embedding" and str(got.get("decoder_block")) == "gpt2":
            w = True  # gpt2/gpt3 always tie the head
        if k == "mlp_activations" and str(got.get("decoder_block")) == "gpt2" and k not in want:
            w = ["gelu"]
        if k in ("use_post_attn_norm", "use_post_ffw_norm") and got.get("decoder_block") == "olmo3":
            w = True  # olmo3's layers norm their outputs whatever the keys say (MaxText's olmo3.py)
        if not same(w, got.get(k)):
            wrong.append(f"{k}: file {w!r}, trained {got.get(k)!r}")
    block = BLOCKS.get(str(want.get("decoder_block", "llama2")), str(want.get("decoder_block", "llama2")))
    if got.get("decoder_block") != block:
        wrong.append(f"decoder_block: file {want.get('decoder_block')!r}, trained {got.get('decoder_block')!r}")
    for k, v in small.items():
        if got.get(k) != v:
            wrong.append(f"{k}: asked {v}, trained {got.get(k)}")
    steps = sum(1 for line in open(os.path.join(run_dir, "metrics.jsonl")) if '"loss"' in line)
    report(not wrong and steps >= 2,
           f"{rel}: trained {steps} steps of model_name={got.get('model_name')} decoder_block={got.get('decoder_block')}"
           + (f"; SUBSTITUTED {'; '.join(wrong)}" if wrong else ", every model key as the file says"))
    trained += 1
print(f"    {len(files)} files: {trained} trained, {refused} refused")
report(trained > 0 and refused > 0 and trained + refused == len(files), "every file trained or refused")
sys.exit(1 if failed else 0)
