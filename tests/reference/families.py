#!/usr/bin/python3
"""Independent float64 PyTorch models of the decoder families elastrain trains.

Usage: families.py DIR [DIR ...]   (each DIR written by `family_check PRESET DIR`)

Each model is written from the published definitions -- Meta's Llama reference
(interleaved RoPE as complex rotations, Llama 3.1's apply_scaling), Hugging Face
transformers' Mistral (sliding window), Qwen2 (q/k/v biases), Qwen3 (per-head q/k
RMSNorm before RoPE), Gemma (GeGLU, embeddings times sqrt(hidden) with the tied head reading the unscaled
table, RMSNorm as x*(1+w)),
Gemma2 (alternating sliding/global layers, attention and final logit soft-capping,
post-attention and post-feedforward norms), OLMo 3 (norms only on the outputs of attention
and the MLP, q and k normalised over all heads, three sliding-window layers then one
global; its YaRN RoPE is not modelled: olmo3-7b-pt's default RoPE) and GPT-2/GPT-3 (LayerNorm, learned
positions, biases, tanh GELU, tied head) -- plus MaxText's options that those models
lack: normalize_embedding_logits (tied logits / sqrt(emb_dim)) and z_loss_multiplier
(z * logsumexp^2 per token, inside the reported loss). It is not a port of elastrain's
C++: it reads only the parameters (by name), the shapes and the option values.

For every DIR it loads params_before.f64, computes the mean token loss of the batch,
its gradients (autograd), one torch.optim.AdamW step with the same hyperparameters
(weight decay on tensors of 2+ dimensions), and compares loss, gradients and updated
parameters with elastrain's (relative error: max |a-b| / max |b| per tensor). Prints
the worst relative error per family; exits 1 when any exceeds 1e-6.
"""
import json
import math
import os
import sys

import torch

TOLERANCE = 1e-6
DT = torch.float64

# What each family is, by its published definition. The option values (window, caps,
# theta, eps) come from the preset; the structure comes from here, and the preset's
# flags must agree with it.
FAMILIES = {
    "tiny": dict(kind="llama", act="silu"),  # llama2 / llama3 (theta from the preset)
    "tiny-gpt2": dict(kind="gpt", tied=True),
    "tiny-llama31": dict(kind="llama", act="silu", rope="llama3.1"),
    "tiny-zloss": dict(kind="llama", act="silu"),
    "tiny-mistral": dict(kind="llama", act="silu", sliding="all"),
    "tiny-qwen2": dict(kind="llama", act="silu", attn_bias=True),
    "tiny-qwen3": dict(kind="llama", act="silu", qk_norm=True, tied=True),
    "tiny-gemma": dict(kind="llama", act="gelu_tanh", tied=True, gemma_norm=True, embed_normalizer=True),
    "tiny-gemma2": dict(kind="llama", act="gelu_tanh", tied=True, gemma_norm=True, embed_normalizer=True,
                        sliding="even", post_norms=True, softcaps=True),
    "tiny-olmo3": dict(kind="llama", act="silu", post_only=True, qk_norm_all=True, sliding="olmo3"),
    "tiny-gpt3": dict(kind="gpt", tied=True),
}


def load(d):
    with open(os.path.join(d, "model.json")) as f:
        meta = json.load(f)

    def raw(name):
        with open(os.path.join(d, name), "rb") as f:
            t = torch.frombuffer(bytearray(f.read()), dtype=DT).clone()
        if t.numel() != meta["total"]:
            raise SystemExit(f"{d}/{name}: {t.numel()} values, expected {meta['total']}")
        return t

    return meta, raw("params_before.f64"), raw("grads.f64"), raw("params_after.f64")


def split(flat, tensors):
    out = {}
    for t in tensors:
        n = math.prod(t["shape"])
        out[t["name"]] = flat[t["offset"]:t["offset"] + n].view(*t["shape"]).clone()
    return out


def rms_norm(x, w, eps, gemma):
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y * (1.0 + w) if gemma else y * w  # Gemma's RMSNorm scales by (1 + weight)


def rope_frequencies(hd, theta, scaling):
    freqs = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=DT) / hd))
    if scaling == "llama3.1":  # Meta's llama3 reference, apply_scaling
        factor, low, high, old = 8.0, 1.0, 4.0, 8192.0
        new = []
        for f in freqs.tolist():
            wavelen = 2 * math.pi / f
            if wavelen < old / high:
                new.append(f)
            elif wavelen > old / low:
                new.append(f / factor)
            else:
                smooth = (old / wavelen - low) / (high - low)
                new.append((1 - smooth) * f / factor + smooth * f)
        freqs = torch.tensor(new, dtype=DT)
    return freqs


def apply_rotary(x, freqs_cis):
    # x (B, T, H, hd): consecutive pairs are complex numbers rotated by t * freq.
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * freqs_cis[None, :, None, :]).flatten(3)


def attention(q, k, v, scaling, window, softcap):
    # q (B,T,Hq,hd), k and v (B,T,Hkv,hd): grouped-query attention, causal (+ window).
    B, T, Hq, hd = q.shape
    group = Hq // k.shape[2]
    k = k.repeat_interleave(group, dim=2)
    v = v.repeat_interleave(group, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) * scaling
    if softcap:
        s = torch.tanh(s / softcap) * softcap
    i = torch.arange(T)
    allowed = i[None, :] <= i[:, None]
    if window:
        allowed &= (i[:, None] - i[None, :]) < window
    s = s.masked_fill(~allowed, float("-inf"))
    p = torch.softmax(s, dim=-1)
    return torch.einsum("bhqk,bkhd->bqhd", p, v).reshape(B, T, Hq * hd)


def llama_like(P, c, fam, inputs):
    B, T = inputs.shape
    C, Hq, Hkv, hd, eps = c["emb_dim"], c["num_heads"], c["num_kv_heads"], c["head_dim"], c["norm_eps"]
    gemma = fam.get("gemma_norm", False)
    if fam.get("embed_normalizer"):
        # Gemma: inputs_embeds * sqrt(hidden), logits by the same (tied) table. MaxText
        # (and elastrain) store that table times sqrt(hidden): E = stored / sqrt(hidden).
        table = P["embed.wte"] / math.sqrt(C)
        x = table[inputs] * torch.tensor(C, dtype=DT).sqrt()
    else:
        table = P["embed.wte"]
        x = table[inputs]
    freqs = rope_frequencies(hd, c["rope_theta"], fam.get("rope", "default"))
    angles = torch.outer(torch.arange(T, dtype=DT), freqs)
    freqs_cis = torch.polar(torch.ones_like(angles), angles)
    scaling = hd ** -0.5  # Gemma2's query_pre_attn_scalar is head_dim here
    act = torch.nn.functional.silu if fam["act"] == "silu" else (
        lambda g: torch.nn.functional.gelu(g, approximate="tanh"))
    for layer in range(c["num_layers"]):
        L = lambda n: P[f"layers.{layer}.{n}"]
        pattern = fam.get("sliding")
        sliding = (pattern == "all" or (pattern == "even" and layer % 2 == 0)
                   or (pattern == "olmo3" and layer % 4 != 3))
        window = c["sliding_window"] if sliding else 0
        post_only = fam.get("post_only", False)  # OLMo 2/3: no norms before the sublayers
        h = x if post_only else rms_norm(x, L("attn_norm.w"), eps, gemma)
        q = h @ L("attn.wq").T
        k = h @ L("attn.wk").T
        v = h @ L("attn.wv").T
        if fam.get("attn_bias"):
            q, k, v = q + L("attn.bq"), k + L("attn.bk"), v + L("attn.bv")
        if fam.get("qk_norm_all"):  # OLMo: q_norm over num_heads*head_dim, k_norm likewise
            q = rms_norm(q, L("attn.q_norm_all.w"), eps, False)
            k = rms_norm(k, L("attn.k_norm_all.w"), eps, False)
        q = q.view(B, T, Hq, hd)
        k = k.view(B, T, Hkv, hd)
        v = v.view(B, T, Hkv, hd)
        if fam.get("qk_norm"):
            q = rms_norm(q, L("attn.q_norm.w"), eps, False)
            k = rms_norm(k, L("attn.k_norm.w"), eps, False)
        q, k = apply_rotary(q, freqs_cis), apply_rotary(k, freqs_cis)
        softcap = c["attn_logits_soft_cap"] if fam.get("softcaps") else 0.0
        a = attention(q, k, v, scaling, window, softcap) @ L("attn.wo").T
        if fam.get("post_norms") or post_only:
            a = rms_norm(a, L("post_attn_norm.w"), eps, gemma)
        x = x + a
        h = x if post_only else rms_norm(x, L("mlp_norm.w"), eps, gemma)
        m = (act(h @ L("mlp.w_gate").T) * (h @ L("mlp.w_up").T)) @ L("mlp.w_down").T
        if fam.get("post_norms") or post_only:
            m = rms_norm(m, L("post_ffw_norm.w"), eps, gemma)
        x = x + m
    x = rms_norm(x, P["final_norm.w"], eps, gemma)
    head = table if fam.get("tied") else P["lm_head.w"]
    logits = x @ head.T
    if fam.get("tied") and c["normalize_embedding_logits"] and not fam.get("embed_normalizer"):
        logits = logits / math.sqrt(C)  # MaxText's option, for the other tied models
    if fam.get("softcaps"):
        cap = c["final_logits_soft_cap"]
        logits = torch.tanh(logits / cap) * cap
    return logits


def gpt(P, c, fam, inputs):
    B, T = inputs.shape
    C, H, hd, eps = c["emb_dim"], c["num_heads"], c["head_dim"], c["norm_eps"]
    ln = lambda x, n: torch.nn.functional.layer_norm(x, (C,), P[n + ".w"], P[n + ".b"], eps)
    x = P["embed.wte"][inputs] + P["embed.wpe"][torch.arange(T)][None]
    for layer in range(c["num_layers"]):
        L = lambda n: P[f"layers.{layer}.{n}"]
        h = ln(x, f"layers.{layer}.attn_norm")
        q = (h @ L("attn.wq").T + L("attn.bq")).view(B, T, H, hd)
        k = (h @ L("attn.wk").T + L("attn.bk")).view(B, T, H, hd)
        v = (h @ L("attn.wv").T + L("attn.bv")).view(B, T, H, hd)
        x = x + attention(q, k, v, hd ** -0.5, 0, 0.0) @ L("attn.wo").T + L("attn.bo")
        h = ln(x, f"layers.{layer}.mlp_norm")
        u = torch.nn.functional.gelu(h @ L("mlp.w_up").T + L("mlp.b_up"), approximate="tanh")
        x = x + u @ L("mlp.w_down").T + L("mlp.b_down")
    x = ln(x, "final_norm")
    return x @ P["embed.wte"].T


def check_flags(preset, c, fam):
    """The preset's options must be the family's definition (a dropped option fails here)."""
    want = {
        "attention_bias": fam.get("attn_bias", False) if fam["kind"] == "llama" else c["attention_bias"],
        "qk_norm": fam.get("qk_norm", False) or fam.get("qk_norm_all", False),
        "qk_norm_global": fam.get("qk_norm_all", False),
        "pre_norm": not fam.get("post_only", False),
        "tie_embeddings": fam.get("tied", False),
        "post_attn_norm": fam.get("post_norms", False) or fam.get("post_only", False),
        "post_ffw_norm": fam.get("post_norms", False) or fam.get("post_only", False),
        "rope_scaling": fam.get("rope", "none"),
        "attention_layout": {"all": "all_local", "even": "alternating", "olmo3": "olmo3"}.get(fam.get("sliding"),
                                                                                             "global"),
        "mlp_activation": {"silu": "swiglu", "gelu_tanh": "geglu"}.get(fam.get("act"), "gelu"),
        "embedding_scale": 1.0,
    }
    bad = [f"{k}={c[k]!r} (expected {v!r})" for k, v in want.items() if c[k] != v]
    if fam.get("embed_normalizer") and not c["normalize_embedding_logits"]:
        bad.append("normalize_embedding_logits=False: Gemma's stored table is E*sqrt(hidden)")
    if fam.get("softcaps") and not (c["attn_logits_soft_cap"] > 0 and c["final_logits_soft_cap"] > 0):
        bad.append("soft caps missing")
    if not fam.get("softcaps") and (c["attn_logits_soft_cap"] or c["final_logits_soft_cap"]):
        bad.append("unexpected soft caps")
    if fam.get("sliding") and not 0 < c["sliding_window"]:
        bad.append("no sliding window")
    if preset == "tiny-zloss" and not c["z_loss"] > 0:
        bad.append("z_loss is 0")
    return bad


def run(d):
    meta, before, grads_ref, after_ref = load(d)
    preset, c = meta["preset"], meta["config"]
    if preset not in FAMILIES:
        raise SystemExit(f"{d}: preset {preset} has no reference model here")
    fam = FAMILIES[preset]
    bad = check_flags(preset, c, fam)
    if bad:
        print(f"{preset}: FAIL: the preset is not the family: " + "; ".join(bad))
        return False

    gemma = fam.get("gemma_norm", False)
    # Gemma's published norms scale by (1 + w); elastrain (and MaxText) keep the gain
    # itself: load gain - 1 and add 1 back to compare. Neither is decayed.
    is_norm = lambda n: gemma and (n.endswith("norm.w"))
    P = {}
    for n, t in split(before, meta["tensors"]).items():
        P[n] = torch.nn.Parameter(t - 1.0 if is_norm(n) else t)
    decay = {t["name"]: t["decay"] for t in meta["tensors"]}
    for n, p in P.items():
        assert decay[n] == (p.dim() >= 2), n

    b = meta["batch"]
    inputs = torch.tensor(b["inputs"]).view(b["rows"], b["seq_len"])
    targets = torch.tensor(b["targets"]).view(b["rows"], b["seq_len"])
    logits = (gpt if fam["kind"] == "gpt" else llama_like)(P, c, fam, inputs)
    flat, tgt = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
    mask = tgt >= 0
    loss = torch.nn.functional.cross_entropy(flat[mask], tgt[mask])
    if c["z_loss"]:
        loss = loss + c["z_loss"] * (torch.logsumexp(flat[mask], dim=-1) ** 2).mean()
    loss.backward()

    a = meta["adamw"]
    opt = torch.optim.AdamW(
        [{"params": [p for n, p in P.items() if decay[n]], "weight_decay": a["weight_decay"]},
         {"params": [p for n, p in P.items() if not decay[n]], "weight_decay": 0.0}],
        lr=a["lr"], betas=(a["b1"], a["b2"]), eps=a["eps"])
    grads = {n: p.grad.detach().clone() for n, p in P.items()}
    opt.step()

    def rel(x, y, floor=1e-300):
        return ((x - y).abs().max() / y.abs().max().clamp_min(floor)).item()

    loss_err = abs(loss.item() - meta["loss"]) / abs(loss.item())
    g_ref, a_ref = split(grads_ref, meta["tensors"]), split(after_ref, meta["tensors"])
    # Some gradients are zero by symmetry, e.g. a key bias adds the same score to every
    # key of a query (softmax cancels it): compared against 1e-9, not their rounding noise.
    worst_g = max(((rel(g_ref[n], grads[n], 1e-9), n) for n in P), key=lambda e: e[0])
    worst_p = max(((rel(a_ref[n], P[n].detach() + (1.0 if is_norm(n) else 0.0)), n) for n in P),
                  key=lambda e: e[0])
    # The step must move every tensor, or a zero gradient would compare equal trivially.
    frozen = [n for n in P if grads[n].abs().max().item() == 0.0]
    ok = max(loss_err, worst_g[0], worst_p[0]) <= TOLERANCE and not frozen
    print(f"{preset}: loss {loss.item():.12f} (rel err {loss_err:.2e}); worst grad rel err {worst_g[0]:.2e} "
          f"({worst_g[1]}); worst updated-param rel err {worst_p[0]:.2e} ({worst_p[1]})"
          + ("" if ok else f"  FAIL (tolerance {TOLERANCE:g}" + (f"; zero gradients: {frozen}" if frozen else "")
                                + ")"))
    return ok


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    torch.manual_seed(0)
    results = [run(d) for d in sys.argv[1:]]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
