#!/usr/bin/python3
"""Hugging Face layout, written and read without transformers (which Debian lacks).

  hf_models.py write DIR ARCH [--shards N] [--dtype F32|BF16] [--seed S]
      random weights of a small model of ARCH (gpt2, llama, llama31, qwen2, qwen3,
      mistral) in HF's tensor names and shapes (numpy), config.json as transformers
      writes it, model.safetensors or N shards with model.safetensors.index.json.
  hf_models.py check DIR LOGITS.f32 TOKEN...
      the logits of TOKEN... by an independent float64 PyTorch forward of DIR (HF's
      modelling code re-written from its published definitions: GPT-2's Conv1D layers,
      Llama's rotate_half RoPE and repeat_kv, Qwen2's q/k/v biases, Qwen3's per-head q/k
      RMSNorm, Mistral's sliding window, Llama 3.1's RoPE frequency scaling) against
      elastrain's LOGITS.f32 (T x V float32): the worst relative error max|a-b|/max|b|
      must be <= 1e-5. Prints it.
  hf_models.py same DIR_A DIR_B
      the tensors of two HF directories: same names, shapes and values (exactly).
  hf_models.py differ DIR_A DIR_B
      the same names and shapes, and some value differs (training changed them).
It is not a port of elastrain's C++ importer: it knows HF's layout only.
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch

DT = torch.float64
TOLERANCE = 1e-5

SHAPES = dict(vocab=300, hidden=64, layers=2, heads=4, kv_heads=2, inter=96, positions=64)


def config_for(arch):
    s = SHAPES
    if arch == "gpt2":
        return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": s["vocab"],
                "n_embd": s["hidden"], "n_head": s["heads"], "n_layer": s["layers"], "n_positions": s["positions"],
                "n_inner": None, "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new",
                "scale_attn_weights": True, "tie_word_embeddings": True}
    cls = {"llama": "LlamaForCausalLM", "llama31": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
           "qwen3": "Qwen3ForCausalLM", "mistral": "MistralForCausalLM"}[arch]
    c = {"architectures": [cls], "model_type": "llama" if arch == "llama31" else arch,
         "vocab_size": s["vocab"], "hidden_size": s["hidden"], "intermediate_size": s["inter"],
         "num_attention_heads": s["heads"], "num_key_value_heads": s["kv_heads"],
         "num_hidden_layers": s["layers"], "max_position_embeddings": s["positions"],
         "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "hidden_act": "silu",
         "tie_word_embeddings": arch in ("qwen3",), "torch_dtype": "bfloat16"}
    if arch == "llama31":
        c["rope_theta"] = 500000.0
        c["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                             "original_max_position_embeddings": 8192}
    if arch == "qwen3":
        c["head_dim"] = 24  # not hidden/heads: Qwen3 sets it apart
    if arch == "mistral":
        c["sliding_window"] = 5
    return c


def tensors_for(c, rng):
    """HF names and shapes, random values (std 0.1; norms around 1)."""
    t = {}

    def w(name, *shape, around=0.0):
        t[name] = (around + 0.1 * rng.standard_normal(shape)).astype(np.float32)

    if c["model_type"] == "gpt2":
        C, F, V = c["n_embd"], 4 * c["n_embd"], c["vocab_size"]
        w("wte.weight", V, C)
        w("wpe.weight", c["n_positions"], C)
        for l in range(c["n_layer"]):
            h = f"h.{l}."
            w(h + "ln_1.weight", C, around=1.0)
            w(h + "ln_1.bias", C)
            w(h + "attn.c_attn.weight", C, 3 * C)
            w(h + "attn.c_attn.bias", 3 * C)
            w(h + "attn.c_proj.weight", C, C)
            w(h + "attn.c_proj.bias", C)
            w(h + "ln_2.weight", C, around=1.0)
            w(h + "ln_2.bias", C)
            w(h + "mlp.c_fc.weight", C, F)
            w(h + "mlp.c_fc.bias", F)
            w(h + "mlp.c_proj.weight", F, C)
            w(h + "mlp.c_proj.bias", C)
            # transformers' buffers: a causal mask, skipped by importers
            t[h + "attn.bias"] = np.tril(np.ones((c["n_positions"], c["n_positions"]), np.float32))[None, None]
        w("ln_f.weight", C, around=1.0)
        w("ln_f.bias", C)
        return t
    C, F, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    hd = c.get("head_dim") or C // c["num_attention_heads"]
    QD, KD = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    w("model.embed_tokens.weight", V, C)
    for l in range(c["num_hidden_layers"]):
        h = f"model.layers.{l}."
        w(h + "input_layernorm.weight", C, around=1.0)
        w(h + "self_attn.q_proj.weight", QD, C)
        w(h + "self_attn.k_proj.weight", KD, C)
        w(h + "self_attn.v_proj.weight", KD, C)
        if c["model_type"] == "qwen2":
            w(h + "self_attn.q_proj.bias", QD)
            w(h + "self_attn.k_proj.bias", KD)
            w(h + "self_attn.v_proj.bias", KD)
        if c["model_type"] == "qwen3":
            w(h + "self_attn.q_norm.weight", hd, around=1.0)
            w(h + "self_attn.k_norm.weight", hd, around=1.0)
        w(h + "self_attn.o_proj.weight", C, QD)
        w(h + "post_attention_layernorm.weight", C, around=1.0)
        w(h + "mlp.gate_proj.weight", F, C)
        w(h + "mlp.up_proj.weight", F, C)
        w(h + "mlp.down_proj.weight", C, F)
    w("model.norm.weight", C, around=1.0)
    if not c["tie_word_embeddings"]:
        w("lm_head.weight", V, C)
    return t


def bf16_bytes(a):
    """float32 -> bfloat16 bytes, round to nearest even (what torch's .to(bfloat16) does)."""
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16).tobytes()


def write_safetensors(path, tensors, dtype):
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        data = bf16_bytes(a) if dtype == "BF16" else a.astype("<f4").tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def write(d, arch, shards=1, dtype="F32", seed=0):
    os.makedirs(d, exist_ok=True)
    c = config_for(arch)
    t = tensors_for(c, np.random.default_rng(seed))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    if shards == 1:
        write_safetensors(os.path.join(d, "model.safetensors"), t, dtype)
        return
    names = list(t)
    weight_map = {}
    for s in range(shards):
        part = {n: t[n] for n in names[s::shards]}
        fn = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        write_safetensors(os.path.join(d, fn), part, dtype)
        weight_map.update({n: fn for n in part})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f)


def read_safetensors(path):
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        raw = buf[8 + n + b:8 + n + end]
        if e["dtype"] == "F32":
            a = np.frombuffer(raw, "<f4")
        elif e["dtype"] == "BF16":
            a = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise SystemExit(f"{path}: {name}: dtype {e['dtype']} not handled here")
        out[name] = a.reshape(e["shape"]).copy()
    return out


def read(d):
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    index = os.path.join(d, "model.safetensors.index.json")
    files = (sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index)
             else ["model.safetensors"])
    t = {}
    for fn in files:
        t.update(read_safetensors(os.path.join(d, fn)))
    return c, t


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def llama3_inv_freq(inv_freq, rs):
    # Meta's Llama 3.1 frequency scaling, as transformers' _compute_llama3_parameters.
    factor, low, high, old = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"], \
        rs["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > old / low, inv_freq / factor, inv_freq)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= old / high) & (wavelen <= old / low)
    return torch.where(medium, smoothed, scaled)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def attend(q, k, v, window=None):
    # q (H, T, hd), k and v (Hkv, T, hd): repeat_kv, causal softmax attention.
    H, T, hd = q.shape
    rep = H // k.shape[0]
    k = k.repeat_interleave(rep, dim=0)
    v = v.repeat_interleave(rep, dim=0)
    s = q @ k.transpose(1, 2) / math.sqrt(hd)
    i = torch.arange(T)
    allowed = i[None, :] <= i[:, None]
    if window:
        allowed &= (i[:, None] - i[None, :]) < window
    s = s.masked_fill(~allowed, float("-inf"))
    return torch.softmax(s, dim=-1) @ v  # (H, T, hd)


def forward(c, t, tokens):
    P = {n: torch.tensor(a, dtype=DT) for n, a in t.items()}
    ids = torch.tensor(tokens)
    T = len(tokens)
    if c["model_type"] == "gpt2":
        C, H = c["n_embd"], c["n_head"]
        hd = C // H
        ln = lambda x, n: torch.nn.functional.layer_norm(x, (C,), P[n + ".weight"], P[n + ".bias"],
                                                         c["layer_norm_epsilon"])
        conv1d = lambda x, n: x @ P[n + ".weight"] + P[n + ".bias"]  # transformers' Conv1D: [in, out]
        x = P["wte.weight"][ids] + P["wpe.weight"][torch.arange(T)]
        for l in range(c["n_layer"]):
            h = f"h.{l}."
            qkv = conv1d(ln(x, h + "ln_1"), h + "attn.c_attn")
            q, k, v = (z.view(T, H, hd).transpose(0, 1) for z in qkv.split(C, dim=-1))
            a = attend(q, k, v).transpose(0, 1).reshape(T, C)
            x = x + conv1d(a, h + "attn.c_proj")
            m = torch.nn.functional.gelu(conv1d(ln(x, h + "ln_2"), h + "mlp.c_fc"), approximate="tanh")
            x = x + conv1d(m, h + "mlp.c_proj")
        return ln(x, "ln_f") @ P["wte.weight"].T
    C, H, Hkv, eps = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["rms_norm_eps"]
    hd = c.get("head_dim") or C // H
    inv_freq = 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2, dtype=DT) / hd))
    if c.get("rope_scaling"):
        inv_freq = llama3_inv_freq(inv_freq, c["rope_scaling"])
    freqs = torch.outer(torch.arange(T, dtype=DT), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    window = c.get("sliding_window") if c["model_type"] == "mistral" else None
    x = P["model.embed_tokens.weight"][ids]
    for l in range(c["num_hidden_layers"]):
        L = lambda n: P[f"model.layers.{l}.{n}"]
        lin = lambda z, n: z @ L(n + ".weight").T + (L(n + ".bias") if f"model.layers.{l}.{n}.bias" in P else 0)
        h = rms_norm(x, L("input_layernorm.weight"), eps)
        q = lin(h, "self_attn.q_proj").view(T, H, hd).transpose(0, 1)
        k = lin(h, "self_attn.k_proj").view(T, Hkv, hd).transpose(0, 1)
        v = lin(h, "self_attn.v_proj").view(T, Hkv, hd).transpose(0, 1)
        if c["model_type"] == "qwen3":
            q = rms_norm(q, L("self_attn.q_norm.weight"), eps)
            k = rms_norm(k, L("self_attn.k_norm.weight"), eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        a = attend(q, k, v, window).transpose(0, 1).reshape(T, H * hd)
        x = x + lin(a, "self_attn.o_proj")
        h = rms_norm(x, L("post_attention_layernorm.weight"), eps)
        m = torch.nn.functional.silu(lin(h, "mlp.gate_proj")) * lin(h, "mlp.up_proj")
        x = x + lin(m, "mlp.down_proj")
    x = rms_norm(x, P["model.norm.weight"], eps)
    head = P["model.embed_tokens.weight"] if c.get("tie_word_embeddings") else P["lm_head.weight"]
    return x @ head.T


def main(argv):
    if len(argv) >= 3 and argv[0] == "write":
        opts = dict(zip(argv[3::2], argv[4::2]))
        write(argv[1], argv[2], int(opts.get("--shards", 1)), opts.get("--dtype", "F32"), int(opts.get("--seed", 0)))
        return 0
    if len(argv) >= 4 and argv[0] == "check":
        c, t = read(argv[1])
        tokens = [int(a) for a in argv[3:]]
        ref = forward(c, t, tokens)
        ours = torch.tensor(np.fromfile(argv[2], "<f4").astype(np.float64)).view(len(tokens), -1)
        if ours.shape != ref.shape:
            print(f"FAIL: logits {tuple(ours.shape)}, the reference's {tuple(ref.shape)}")
            return 1
        err = ((ours - ref).abs().max() / ref.abs().max()).item()
        print(f"worst relative error {err:.2e} over {ref.numel()} logits (tolerance {TOLERANCE:g})")
        return 0 if err <= TOLERANCE else 1
    if len(argv) == 3 and argv[0] in ("same", "differ"):
        (ca, ta), (cb, tb) = read(argv[1]), read(argv[2])
        ta = {n: a for n, a in ta.items() if not n.endswith(".attn.bias")}  # buffers are not exported
        if sorted(ta) != sorted(tb):
            print(f"FAIL: names differ: {sorted(set(ta) ^ set(tb))[:5]}")
            return 1
        bad = [n for n in ta if ta[n].shape != tb[n].shape]
        if bad:
            print(f"FAIL: shapes differ: {bad[:5]}")
            return 1
        changed = [n for n in ta if not np.array_equal(ta[n], tb[n])]
        print(f"{len(ta)} tensors, {len(changed)} with other values")
        return 0 if (not changed) == (argv[0] == "same") else 1
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
