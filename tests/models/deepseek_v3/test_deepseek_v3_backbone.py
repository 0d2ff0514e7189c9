"""DeepSeekV3Backbone against a float64 NumPy forward of the published
architecture (`numpy_reference.py`; keras-hub has no DeepSeek-V3), its
stored outputs read from `tests/oracle_data/deepseek_v3-*.npz`.

Regenerate with `python -m tests.oracles deepseek_v3`.
"""

import keras
import numpy as np
import pytest

from keras_nlp.models import DeepSeekV3Backbone
from keras_nlp.models.deepseek_v3 import deepseek_v3_layers
from tests import oracles
from tests.models.backbone_checks import assign_unit_scale
from tests.models.backbone_checks import random_inputs
from tests.models.deepseek_v3 import numpy_reference

# DeepSeek-V3's shapes at a tiny size: 4 groups of 2 routed experts (2
# kept, 2 experts per token), 2 shared experts, a dense first block, a
# query latent, YaRN with different `mscale` and `mscale_all_dim`.
_V3_LIKE = dict(
    vocabulary_size=96,
    num_layers=2,
    num_query_heads=4,
    hidden_dim=32,
    intermediate_dim=48,
    moe_intermediate_dim=16,
    n_routed_experts=8,
    n_shared_experts=2,
    num_experts_per_tok=2,
    n_group=4,
    topk_group=2,
    routed_scaling_factor=2.5,
    norm_topk_prob=True,
    first_k_dense_replace=1,
    q_lora_rank=24,
    kv_lora_rank=16,
    qk_nope_head_dim=8,
    qk_rope_head_dim=8,
    v_head_dim=6,
    rope_scaling_factor=4.0,
    rope_original_max_position_embeddings=8,
    rope_mscale=0.8,
    rope_mscale_all_dims=1.0,
)
CASES = {
    "v3_like": _V3_LIKE,
    # DeepSeek-V2-Lite's options: a plain query projection, plain RoPE, one
    # group, unnormalized weights, every block a mixture.
    "plain_query": {
        **_V3_LIKE,
        "q_lora_rank": None,
        "n_group": 1,
        "topk_group": 1,
        "n_shared_experts": 1,
        "norm_topk_prob": False,
        "routed_scaling_factor": 1.0,
        "first_k_dense_replace": 0,
        "qk_rope_head_dim": 4,
        "v_head_dim": 8,
        "rope_scaling_factor": 1.0,
        "rope_max_wavelength": 500,
    },
}
# The correction bias is of the order of the sigmoid scores' spread, so
# it changes some choices without deciding all of them.
BIAS_SCALE = 0.1
GREEDY_PROMPT = np.array([5, 17, 3, 88, 41])
GREEDY_STEPS = 6
ATOL = 1e-4


def weighted_model(name):
    """Our backbone of case `name` with deterministic weights, and them."""
    model = DeepSeekV3Backbone(**CASES[name])
    weights = assign_unit_scale(model)
    for variable in model.weights:
        if variable.path.endswith("e_score_correction_bias"):
            value = weights[variable.path] * (BIAS_SCALE / 0.5)
            variable.assign(value)
            weights[variable.path] = value
    return model, weights


def generate_oracle_data():
    data = {}
    for name, config in CASES.items():
        _, weights = weighted_model(name)
        inputs = random_inputs(config["vocabulary_size"], batch=3)
        hidden, logits = numpy_reference.forward(
            config, weights, inputs["token_ids"], inputs["padding_mask"]
        )
        data[f"deepseek_v3-{name}"] = {
            **inputs,
            "sequence_output": hidden,
            "logits": logits,
            "greedy": numpy_reference.greedy(
                config, weights, GREEDY_PROMPT, GREEDY_STEPS
            ),
        }
    return data


def max_diff(model, stored):
    """max |ours - oracle| over the real positions, hidden and logits."""
    inputs = {k: stored[k] for k in ("token_ids", "padding_mask")}
    hidden = keras.ops.convert_to_numpy(model(inputs))
    logits = keras.ops.convert_to_numpy(
        model.token_embedding(keras.ops.convert_to_tensor(hidden), reverse=True)
    )
    real = stored["padding_mask"].astype(bool)
    return max(
        np.abs(hidden - stored["sequence_output"])[real].max(),
        np.abs(logits - stored["logits"])[real].max(),
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_numpy_oracle(name):
    model, _ = weighted_model(name)
    stored = oracles.load(f"deepseek_v3-{name}")
    diff = max_diff(model, stored)
    print(f"deepseek_v3-{name}: max |ours - numpy float64| = {diff:.2e}")
    assert diff < ATOL


def _no_group_limit(model, monkeypatch):
    for block in model.transformer_layers:
        if block.feedforward is not None:
            block.feedforward.topk_group = block.feedforward.n_group


def _bias_in_weights(model, monkeypatch):
    def routing(self, inputs):
        scores, indices, _ = original(self, inputs)
        biased = scores + keras.ops.cast(
            self.e_score_correction_bias, "float32"
        )
        weights = keras.ops.take_along_axis(biased, indices, axis=-1)
        weights = weights / keras.ops.sum(weights, axis=-1, keepdims=True)
        return scores, indices, weights * self.routed_scaling_factor

    original = deepseek_v3_layers.DeepSeekV3MoE._routing
    monkeypatch.setattr(deepseek_v3_layers.DeepSeekV3MoE, "_routing", routing)


def _rotate_half_pairs(model, monkeypatch):
    # RoPE on pairs (i, i + d/2) instead of DeepSeek's (2i, 2i + 1).
    monkeypatch.setattr(deepseek_v3_layers, "deinterleave", lambda x: x)


def _rope_on_latent(model, monkeypatch):
    # The RoPE key taken from the latent's first features, not the last.
    original = deepseek_v3_layers.MultiHeadLatentAttention.call

    def call(self, inputs, *args, **kwargs):
        dense = self.key_value_a
        kernel = dense.kernel
        rolled = keras.ops.roll(kernel, self.qk_rope_head_dim, axis=-1)
        dense._kernel.assign(rolled)
        try:
            return original(self, inputs, *args, **kwargs)
        finally:
            dense._kernel.assign(kernel)

    monkeypatch.setattr(
        deepseek_v3_layers.MultiHeadLatentAttention, "call", call
    )


MISTAKES = {
    "no_group_limit": _no_group_limit,
    "bias_in_weights": _bias_in_weights,
    "rotate_half_pairs": _rotate_half_pairs,
    "rope_on_latent_part": _rope_on_latent,
}


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_oracle_catches_injected_mistake(mistake, monkeypatch):
    model, _ = weighted_model("v3_like")
    MISTAKES[mistake](model, monkeypatch)
    diff = max_diff(model, oracles.load("deepseek_v3-v3_like"))
    print(f"{mistake}: max diff {diff:.2e}")
    assert diff > 100 * ATOL, (mistake, diff)


def test_no_yarn_mscale_is_caught():
    config = {**CASES["v3_like"], "rope_mscale_all_dims": 0.0}
    model = DeepSeekV3Backbone(**config)
    reference, weights = weighted_model("v3_like")
    model.set_weights(reference.get_weights())
    assert max_diff(model, oracles.load("deepseek_v3-v3_like")) > 100 * ATOL


def test_cached_greedy_generation_equals_uncached_argmax_and_the_oracle():
    from keras_nlp.models import DeepSeekV3CausalLM

    backbone, _ = weighted_model("v3_like")
    causal_lm = DeepSeekV3CausalLM(backbone)
    # A batch of the prompt alone and the prompt left-padded by 3.
    prompt = GREEDY_PROMPT
    padded = np.concatenate([[0, 0, 0], prompt])
    token_ids = np.stack([np.concatenate([prompt, [0, 0, 0]]), padded])
    padding_mask = np.stack(
        [np.arange(8) < len(prompt), np.arange(8) >= 3]
    ).astype("int32")
    generated = causal_lm.generate(
        {"token_ids": token_ids, "padding_mask": padding_mask},
        max_new_tokens=GREEDY_STEPS,
        sampler="greedy",
        stop_token_ids=None,
        strip_prompt=True,
    )["token_ids"]
    expected = oracles.load("deepseek_v3-v3_like")["greedy"]
    np.testing.assert_array_equal(generated[0][:GREEDY_STEPS], expected)
    np.testing.assert_array_equal(generated[1][:GREEDY_STEPS], expected)
    # Without a cache: one causal forward pass over the prompt and the
    # generated tokens, whose argmax at each position is the next token.
    ids = np.concatenate([prompt, expected])[None].astype("int32")
    logits = causal_lm({"token_ids": ids, "padding_mask": np.ones_like(ids)})
    argmax = np.argmax(keras.ops.convert_to_numpy(logits)[0], axis=-1)
    np.testing.assert_array_equal(argmax[len(prompt) - 1 : -1], expected)
