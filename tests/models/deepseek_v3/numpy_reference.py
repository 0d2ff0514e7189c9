"""A float64 NumPy forward of DeepSeek-V3, written from the published
architecture (the DeepSeek-V3 technical report and its released inference
code): the numerics oracle of `DeepSeekV3Backbone`, which keras-hub does
not have.

It shares no code with the library: RoPE rotates adjacent pairs directly
(the library permutes them into the rotate-half layout), the YaRN
frequencies and `mscale`s are computed here from their formulas, MLA
builds every head's key and value from the latent at once, and the
router is a loop over tokens. Weights are read by our variable paths
(`{path: array}`, as `assign_unit_scale` returns them).
"""

import math

import numpy as np


def rms_norm(x, scale, epsilon):
    x = np.asarray(x, np.float64)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + epsilon) * scale


def silu(x):
    return x / (1.0 + np.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def yarn_get_mscale(factor, mscale=1.0):
    if factor <= 1:
        return 1.0
    return 0.1 * mscale * math.log(factor) + 1.0


def inverse_frequencies(config):
    """`(rope_dim / 2,)` rotation speeds: RoPE's, or YaRN's blend of the
    original and the `factor`-times slower ones."""
    dim = config["qk_rope_head_dim"]
    base = config.get("rope_max_wavelength", 10000)
    extra = 1.0 / base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    factor = config.get("rope_scaling_factor", 1.0)
    if factor == 1:
        return extra
    original = config.get("rope_original_max_position_embeddings", 4096)

    def correction_dim(rotations):
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (
            2 * math.log(base)
        )

    low = max(math.floor(correction_dim(config.get("rope_beta_fast", 32))), 0)
    high = min(
        math.ceil(correction_dim(config.get("rope_beta_slow", 1))), dim - 1
    )
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2) - low) / (high - low), 0, 1)
    keep = 1.0 - ramp  # 1 where the original speed is kept
    return extra / factor * (1.0 - keep) + extra * keep


def rope_amplitude(config):
    factor = config.get("rope_scaling_factor", 1.0)
    if factor == 1:
        return 1.0
    return yarn_get_mscale(factor, config.get("rope_mscale", 1.0)) / (
        yarn_get_mscale(factor, config.get("rope_mscale_all_dims", 0.0))
    )


def rotate_pairs(x, positions, config):
    """RoPE on the last axis, pair `i` = features `(2i, 2i + 1)`.

    `x`: `(seq, ..., dim)`; `positions`: `(seq,)`.
    """
    angles = positions[:, None] * inverse_frequencies(config)[None, :]
    shape = (len(positions),) + (1,) * (x.ndim - 2) + (angles.shape[-1],)
    cos = np.cos(angles).reshape(shape) * rope_amplitude(config)
    sin = np.sin(angles).reshape(shape) * rope_amplitude(config)
    even, odd = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = odd * cos + even * sin
    return out


def attention_scale(config):
    scale = (config["qk_nope_head_dim"] + config["qk_rope_head_dim"]) ** -0.5
    factor = config.get("rope_scaling_factor", 1.0)
    mscale_all_dim = config.get("rope_mscale_all_dims", 0.0)
    if factor > 1 and mscale_all_dim:
        scale *= yarn_get_mscale(factor, mscale_all_dim) ** 2
    return scale


def mla(weights, prefix, x, mask, config):
    """Multi-head latent attention of one sequence `x` `(seq, hidden)`."""
    eps = config.get("layer_norm_epsilon", 1e-6)
    nope = config["qk_nope_head_dim"]
    rank = config["kv_lora_rank"]
    positions = np.arange(x.shape[0], dtype=np.float64)
    if config.get("q_lora_rank") is None:
        q = np.einsum("sd,dnh->snh", x, weights[prefix + "query/kernel"])
    else:
        q_latent = x @ weights[prefix + "query_a/kernel"]
        q_latent = rms_norm(
            q_latent, weights[prefix + "query_a_layernorm/scale"], eps
        )
        q = np.einsum(
            "sq,qnh->snh", q_latent, weights[prefix + "query_b/kernel"]
        )
    q_nope, q_rope = (
        q[..., :nope],
        rotate_pairs(q[..., nope:], positions, config),
    )
    compressed = x @ weights[prefix + "key_value_a/kernel"]
    latent = rms_norm(
        compressed[:, :rank],
        weights[prefix + "key_value_a_layernorm/scale"],
        eps,
    )
    k_rope = rotate_pairs(compressed[:, rank:], positions, config)  # (s, rope)
    kv = np.einsum(
        "sl,lnh->snh", latent, weights[prefix + "key_value_b/kernel"]
    )
    k_nope, value = kv[..., :nope], kv[..., nope:]
    logits = np.einsum("tnh,snh->nts", q_nope, k_nope) + np.einsum(
        "tnh,sh->nts", q_rope, k_rope
    )
    logits = logits * attention_scale(config)
    logits = np.where(mask[None], logits, -1e300)
    logits = logits - logits.max(-1, keepdims=True)
    probabilities = np.exp(logits)
    probabilities /= probabilities.sum(-1, keepdims=True)
    heads = np.einsum("nts,snh->tnh", probabilities, value)
    return np.einsum(
        "tnh,nhd->td", heads, weights[prefix + "attention_output/kernel"]
    )


def swiglu(x, gate, up, down):
    return (silu(x @ gate) * (x @ up)) @ down


def route(scores, bias, config):
    """One token's chosen experts and their weights (noaux_tc)."""
    experts = len(scores)
    groups = config.get("n_group", 1)
    per_group = experts // groups
    biased = scores + bias
    group_scores = [
        sum(sorted(biased[g * per_group : (g + 1) * per_group])[-2:])
        for g in range(groups)
    ]
    kept = np.argsort(group_scores, kind="stable")[::-1][
        : config.get("topk_group", 1)
    ]
    candidates = [e for e in range(experts) if e // per_group in kept]
    chosen = sorted(candidates, key=lambda e: -biased[e])[
        : config["num_experts_per_tok"]
    ]
    weights = scores[chosen]
    if config.get("norm_topk_prob", True):
        weights = weights / (weights.sum() + 1e-20)
    return chosen, weights * config.get("routed_scaling_factor", 1.0)


def moe(weights, prefix, x, config):
    scores = sigmoid(
        x @ weights[prefix + "sparse_feedforward_gate_dense/kernel"]
    )
    bias = weights[prefix + "e_score_correction_bias"]
    gate = weights[prefix + "experts/expert_feedforward_gate_dense"]
    up = weights[prefix + "experts/expert_feedforward_intermediate_dense"]
    down = weights[prefix + "experts/expert_feedforward_output_dense"]
    shared = prefix + "shared_expert_dense/feedforward_"
    out = swiglu(
        x,
        weights[shared + "gate_dense/kernel"],
        weights[shared + "intermediate_dense/kernel"],
        weights[shared + "output_dense/kernel"],
    )
    for t in range(x.shape[0]):
        chosen, expert_weights = route(scores[t], bias, config)
        for e, w in zip(chosen, expert_weights, strict=True):
            out[t] += w * swiglu(x[t], gate[e], up[e], down[e])
    return out


def forward(config, weights, token_ids, padding_mask):
    """Final-normalized hidden states `(batch, seq, hidden)` and logits
    `(batch, seq, vocab)`, float64."""
    weights = {k: np.asarray(v, np.float64) for k, v in weights.items()}
    eps = config.get("layer_norm_epsilon", 1e-6)
    hidden, logits = [], []
    for ids, real in zip(token_ids, padding_mask, strict=True):
        length = len(ids)
        mask = (
            np.tril(np.ones((length, length), bool)) & real.astype(bool)[None]
        )
        x = weights["token_embedding/embeddings"][ids]
        for i in range(config["num_layers"]):
            block = f"transformer_layer_{i}/"
            normed = rms_norm(
                x, weights[block + "self_attention_layernorm/scale"], eps
            )
            x = x + mla(
                weights, block + "self_attention/", normed, mask, config
            )
            normed = rms_norm(
                x, weights[block + "feedforward_layernorm/scale"], eps
            )
            if i < config.get("first_k_dense_replace", 0):
                x = x + swiglu(
                    normed,
                    weights[block + "feedforward_gate_dense/kernel"],
                    weights[block + "feedforward_intermediate_dense/kernel"],
                    weights[block + "feedforward_output_dense/kernel"],
                )
            else:
                x = x + moe(
                    weights, block + "sparse_moe_block/", normed, config
                )
        x = rms_norm(x, weights["sequence_output_layernorm/scale"], eps)
        hidden.append(x)
        logits.append(x @ weights["token_embedding/reverse_embeddings"])
    return np.stack(hidden), np.stack(logits)


def greedy(config, weights, prompt, steps):
    """`steps` argmax tokens after `prompt` (1-D, no padding), recomputing
    the whole forward each step."""
    tokens = list(prompt)
    for _ in range(steps):
        ids = np.array([tokens])
        _, logits = forward(config, weights, ids, np.ones_like(ids))
        tokens.append(int(np.argmax(logits[0, -1])))
    return np.array(tokens[len(prompt) :])
