"""Llama 4's text decoder in float64 NumPy, written from the published
architecture (Meta's reference code and Hugging Face's `modeling_llama4`):
the numerics oracle of `Llama4Backbone`, for which keras-hub has no class.

Weights come as `{path: array}` under our variable paths (the test draws
them with `assign_unit_scale`); nothing here calls `keras_nlp`. Conventions
it pins, as published:

- RoPE multiplies the complex numbers `x[2i] + 1j * x[2i + 1]` by
  `exp(1j * position * theta_i)` (interleaved pairs), with Llama 3.1
  frequency scaling when `rope_frequency_adjustment_factor` is set.
- RoPE blocks (`no_rope_layers[i] == 1`) attend causally within chunks of
  `attention_chunk_size` tokens; with `use_qk_norm` queries and keys are
  divided by their root mean square (`eps = layer_norm_epsilon`, no
  weight) after RoPE. NoPE blocks attend to the whole causal prefix; with
  `attn_temperature_tuning` their queries are multiplied by
  `log(floor((pos + 1) / floor_scale) + 1) * attn_scale + 1`.
- MoE blocks: `shared(x) + sum over the top-k experts e of
  expert_e(sigmoid(logit_e) * x)`; experts' fused gate/up weight holds the
  gate's columns, then the up projection's.
- Positions are the tokens' indices in the sequence (left padding included).
"""

import numpy as np

MOE = "llama4_sparse_moe_block/"


def _moe_layers(config):
    step = config.get("interleave_moe_layer_step", 1)
    if config.get("moe_layers") is not None:
        return set(config["moe_layers"])
    return set(range(step - 1, config["num_layers"], step))


def _rope_layers(config):
    given = config.get("no_rope_layers")
    if given is not None:
        return [bool(v) for v in given]
    return [(i + 1) % 4 != 0 for i in range(config["num_layers"])]


def inverse_frequencies(config, head_dim):
    theta = float(config.get("rope_max_wavelength", 500000.0))
    base = 1.0 / theta ** (
        np.arange(0, head_dim, 2, dtype=np.float64) / head_dim
    )
    factor = config.get("rope_frequency_adjustment_factor")
    if factor is None:
        return base
    low = config["rope_low_freq_factor"]
    high = config["rope_high_freq_factor"]
    original = config["rope_pretraining_sequence_length"]
    wavelength = 2 * np.pi / base
    scaled = np.where(wavelength > original / low, base / factor, base)
    medium = (wavelength <= original / low) & (wavelength >= original / high)
    if high != low:
        smooth = (original / wavelength - low) / (high - low)
        blended = (1 - smooth) * scaled / factor + smooth * scaled
        scaled = np.where(medium, blended, scaled)
    return scaled


def rope(x, positions, inverse_frequency):
    """x `(b, s, heads, d)`; pairs (2i, 2i + 1) as complex numbers."""
    angles = positions[:, None] * inverse_frequency[None, :]  # (s, d/2)
    rotation = np.exp(1j * angles)[None, :, None, :]
    pairs = x[..., 0::2] + 1j * x[..., 1::2]
    rotated = pairs * rotation
    out = np.empty_like(x)
    out[..., 0::2] = rotated.real
    out[..., 1::2] = rotated.imag
    return out


def rms(x, eps, scale=None):
    out = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return out if scale is None else out * scale


def silu(x):
    return x / (1.0 + np.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def attention(w, prefix, x, padding, config, use_rope):
    eps = config.get("layer_norm_epsilon", 1e-5)
    q = np.einsum("bsd,dnh->bsnh", x, w[prefix + "query/kernel"])
    k = np.einsum("bsd,dkh->bskh", x, w[prefix + "key/kernel"])
    v = np.einsum("bsd,dkh->bskh", x, w[prefix + "value/kernel"])
    batch, length, heads, head_dim = q.shape
    positions = np.arange(length, dtype=np.float64)
    if use_rope:
        frequency = inverse_frequencies(config, head_dim)
        q, k = rope(q, positions, frequency), rope(k, positions, frequency)
        if config.get("use_qk_norm", True):
            q, k = rms(q, eps), rms(k, eps)
    elif config.get("attn_temperature_tuning", True):
        floor_scale = config.get("floor_scale", 8192)
        attn_scale = config.get("attn_scale", 0.1)
        temperature = (
            np.log(np.floor((positions + 1) / floor_scale) + 1) * attn_scale + 1
        )
        q = q * temperature[None, :, None, None]
    groups = heads // k.shape[2]
    k = np.repeat(k, groups, axis=2)
    v = np.repeat(v, groups, axis=2)
    logits = np.einsum("bqnh,bknh->bnqk", q, k) * head_dim**-0.5
    index = np.arange(length)
    allowed = index[:, None] >= index[None, :]
    chunk = config.get("attention_chunk_size")
    if use_rope and chunk is not None:
        allowed &= (index[:, None] // chunk) == (index[None, :] // chunk)
    allowed = allowed[None] & padding[:, None, :].astype(bool)  # (b, q, k)
    logits = np.where(allowed[:, None], logits, -np.inf)
    top = np.max(logits, axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    weights = np.exp(logits - top)
    weights = weights / np.maximum(weights.sum(-1, keepdims=True), 1e-300)
    out = np.einsum("bnqk,bknh->bqnh", weights, v)
    return np.einsum(
        "bqnh,nhd->bqd", out, w[prefix + "attention_output/kernel"]
    )


def swiglu(w, prefix, x):
    gate = x @ w[prefix + "feedforward_gate_dense/kernel"]
    up = x @ w[prefix + "feedforward_intermediate_dense/kernel"]
    return (silu(gate) * up) @ w[prefix + "feedforward_output_dense/kernel"]


def mixture(w, prefix, x, config):
    top_k = config.get("top_k", 1)
    logits = x @ w[prefix + "sparse_feedforward_gate_dense/kernel"]
    gate_up = w[prefix + "experts/expert_feedforward_gate_dense"]
    down = w[prefix + "experts/expert_feedforward_output_dense"]
    width = down.shape[1]
    out = swiglu(w, prefix + "shared_expert_dense/", x)
    order = np.argsort(-logits, axis=-1, kind="stable")[..., :top_k]
    for b, s in np.ndindex(*x.shape[:2]):
        for e in order[b, s]:
            routed = sigmoid(logits[b, s, e]) * x[b, s]
            fused = routed @ gate_up[e]
            hidden = silu(fused[:width]) * fused[width:]
            out[b, s] += hidden @ down[e]
    return out


def forward(weights, config, token_ids, padding_mask=None):
    """Sequence output and logits `(b, s, hidden)`, `(b, s, vocab)`."""
    w = {k: np.asarray(v, np.float64) for k, v in weights.items()}
    token_ids = np.asarray(token_ids)
    if padding_mask is None:
        padding_mask = np.ones(token_ids.shape, "int32")
    eps = config.get("layer_norm_epsilon", 1e-5)
    x = w["token_embedding/embeddings"][token_ids]
    moe = _moe_layers(config)
    rope_layers = _rope_layers(config)
    for index in range(config["num_layers"]):
        p = f"transformer_layer_{index}/"
        normed = rms(x, eps, w[p + "self_attention_layernorm/scale"])
        x = x + attention(
            w,
            p + "self_attention/",
            normed,
            padding_mask,
            config,
            rope_layers[index],
        )
        normed = rms(x, eps, w[p + "feedforward_layernorm/scale"])
        if index in moe:
            x = x + mixture(w, p + MOE, normed, config)
        else:
            x = x + swiglu(w, p, normed)
    sequence = rms(x, eps, w["sequence_output_layernorm/scale"])
    head = w.get("token_embedding/reverse_embeddings")
    if head is None:
        head = w["token_embedding/embeddings"].T
    return sequence, sequence @ head


def greedy(weights, config, prompt, new_tokens):
    """Greedy continuation of the unpadded `prompt` `(b, s)`, by full
    forward passes (no cache): `(b, s + new_tokens)`."""
    tokens = np.asarray(prompt)
    for _ in range(new_tokens):
        _, logits = forward(weights, config, tokens)
        tokens = np.concatenate(
            [tokens, np.argmax(logits[:, -1], axis=-1)[:, None]], axis=1
        )
    return tokens
