"""Llama4Backbone and Llama4CausalLM against a float64 NumPy forward.

keras-hub has no Llama 4: the oracle is `numpy_reference.py`, written from
the published architecture. `generate_oracle_data` draws each case's
weights by variable path (`assign_unit_scale`), runs the reference and
stores inputs, outputs and greedy tokens as data (`tests/oracles.py`,
key `llama4`); the tests run ours in float32 against it. Each `MISTAKES`
row injects one plausible error into ours, and the comparison must catch
it.

The tiny configs exercise what sets Llama 4 apart: chunks shorter than the
sequence, NoPE blocks with temperature tuning (a tiny `floor_scale` so the
temperature moves within 12 tokens), query/key norm on and off, dense and
MoE blocks interleaved, top-1 and top-2 routing, Llama 3.1 RoPE scaling.
"""

import numpy as np
import pytest
from keras import ops

from keras_nlp.layers.rotary_embedding import RotaryEmbedding
from keras_nlp.models import Llama4Backbone
from keras_nlp.models import Llama4CausalLM
from keras_nlp.models.llama4 import llama4_layers
from tests import oracles
from tests.models.backbone_checks import assert_close_to_stored
from tests.models.backbone_checks import assign_unit_scale
from tests.models.backbone_checks import jit_forward
from tests.models.backbone_checks import random_inputs
from tests.models.llama4 import numpy_reference

DATA_PREFIX = "llama4-"
ATOL = 1e-4

_BASE = dict(
    vocabulary_size=96,
    num_layers=4,
    num_query_heads=4,
    num_key_value_heads=2,
    hidden_dim=32,
    intermediate_dim=16,
    intermediate_dim_mlp=48,
    num_experts=4,
    head_dim=8,
    rope_max_wavelength=10000.0,
    max_position_embeddings=64,
    layer_norm_epsilon=1e-5,
)
CASES = {
    # Maverick's pattern: MoE every other block, block 3 NoPE; chunks of 3
    # tokens; query/key norm; temperature from position 1 on.
    "moe_step_2-chunk_3-qk_norm": dict(
        _BASE,
        top_k=1,
        interleave_moe_layer_step=2,
        attention_chunk_size=3,
        use_qk_norm=True,
        attn_temperature_tuning=True,
        floor_scale=2,
        attn_scale=0.5,
    ),
    # Scout's pattern: MoE everywhere, no query/key norm, Llama 3.1 RoPE
    # scaling with equal frequency factors; NoPE blocks 1 and 3, top-2
    # routing, multi-query attention.
    "moe_every-chunk_5-top_2-rope_scaling": dict(
        _BASE,
        num_key_value_heads=1,
        top_k=2,
        interleave_moe_layer_step=1,
        no_rope_layers=[1, 0, 1, 0],
        attention_chunk_size=5,
        use_qk_norm=False,
        attn_temperature_tuning=True,
        floor_scale=3,
        attn_scale=0.3,
        rope_frequency_adjustment_factor=16.0,
        rope_low_freq_factor=1.0,
        rope_high_freq_factor=1.0,
        rope_pretraining_sequence_length=16,
    ),
}
GENERATION_CASE = "moe_step_2-chunk_3-qk_norm"
PROMPT = np.array([[5, 17, 3, 42, 8], [60, 2, 2, 91, 33]], "int32")
NEW_TOKENS = 6


def build(config):
    model = Llama4Backbone(**config)
    weights = assign_unit_scale(model)
    return model, weights


def outputs_of(model, inputs):
    sequence = jit_forward(model, inputs)["sequence_output"]
    logits = model.token_embedding(
        ops.convert_to_tensor(sequence), reverse=True
    )
    return {"sequence_output": sequence, "logits": ops.convert_to_numpy(logits)}


def generate_oracle_data():
    data = {}
    for name, config in CASES.items():
        _, weights = build(config)
        inputs = random_inputs(config["vocabulary_size"], batch=3, length=12)
        sequence, logits = numpy_reference.forward(weights, config, **inputs)
        arrays = {f"input/{k}": v for k, v in inputs.items()}
        arrays["output/sequence_output"] = sequence.astype("float32")
        arrays["output/logits"] = logits.astype("float32")
        if name == GENERATION_CASE:
            arrays["greedy/prompt"] = PROMPT
            arrays["greedy/tokens"] = numpy_reference.greedy(
                weights, config, PROMPT, NEW_TOKENS
            ).astype("int32")
        data[DATA_PREFIX + name] = arrays
    return data


def stored(name):
    arrays = oracles.load(DATA_PREFIX + name)
    inputs = {k[6:]: v for k, v in arrays.items() if k.startswith("input/")}
    outputs = {k[7:]: v for k, v in arrays.items() if k.startswith("output/")}
    return inputs, outputs


@pytest.mark.parametrize("name", sorted(CASES))
def test_equals_the_numpy_oracle(name):
    inputs, expected = stored(name)
    model, _ = build(CASES[name])
    largest = assert_close_to_stored(
        outputs_of(model, inputs), expected, inputs, ATOL, real_only=True
    )
    # fp32 against float64: the figure the closing note reports.
    assert largest < ATOL


def _rope_on_nope_block(model):
    # Block 3 is NoPE: give it block 0's rotary embedding (past Keras's
    # tracking, which a built layer locks).
    blocks = model.transformer_layers
    rope = blocks[0].attention.rotary_embedding
    object.__setattr__(blocks[3].attention, "rotary_embedding", rope)


def _unchunked(model):
    model.transformer_layers[0].attention.chunk_size = None


def _no_temperature(model):
    model.transformer_layers[3].attention.temperature_tuning = False


def _half_split_rope(model, monkeypatch):
    monkeypatch.setattr(
        llama4_layers.Llama4RotaryEmbedding, "call", RotaryEmbedding.call
    )


def _score_on_output(model, monkeypatch):
    def call(self, inputs, padding_mask=None, training=None):
        logits = ops.cast(self.router(inputs), "float32")
        top_logits, top_indices = ops.top_k(logits, self.top_k)
        return self.shared_expert(inputs) + self.experts(
            inputs, top_indices, ops.sigmoid(top_logits)
        )

    monkeypatch.setattr(llama4_layers.Llama4SparseMoE, "call", call)


def _softmax_router(model, monkeypatch):
    original = llama4_layers.Llama4SparseMoE.call

    def call(self, inputs, padding_mask=None, training=None):
        router = self.router
        self.router = lambda x: ops.log(ops.softmax(router(x), axis=-1))
        try:
            return original(self, inputs)
        finally:
            self.router = router

    monkeypatch.setattr(llama4_layers.Llama4SparseMoE, "call", call)


def _no_shared_expert(model):
    for block in model.transformer_layers:
        if block.feedforward is not None:
            block.feedforward.shared_expert.output_dense.kernel.assign(
                np.zeros(
                    block.feedforward.shared_expert.output_dense.kernel.shape
                )
            )


MISTAKES = [
    ("rope_on_nope_block", _rope_on_nope_block),
    ("unchunked_local_block", _unchunked),
    ("no_temperature_tuning", _no_temperature),
    ("half_split_rope", _half_split_rope),
    ("router_score_on_output", _score_on_output),
    ("softmax_router", _softmax_router),
    ("no_shared_expert", _no_shared_expert),
]


@pytest.mark.parametrize("name, inject", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_the_comparison_catches_the_mistake(name, inject, monkeypatch):
    case = GENERATION_CASE
    inputs, expected = stored(case)
    model, _ = build(CASES[case])
    if inject.__code__.co_argcount == 2:
        inject(model, monkeypatch)
    else:
        inject(model)
    with pytest.raises(AssertionError):
        assert_close_to_stored(
            outputs_of(model, inputs), expected, inputs, ATOL, real_only=True
        )


def test_cached_greedy_generation_equals_the_oracle_and_uncached_argmax():
    arrays = oracles.load(DATA_PREFIX + GENERATION_CASE)
    prompt, expected = arrays["greedy/prompt"], arrays["greedy/tokens"]
    backbone, _ = build(CASES[GENERATION_CASE])
    causal_lm = Llama4CausalLM(backbone)
    generated = causal_lm.generate(
        prompt, max_new_tokens=NEW_TOKENS, sampler="greedy"
    )["token_ids"]
    np.testing.assert_array_equal(np.asarray(generated), expected)
    # Uncached: one full forward pass over the generated sequence (the
    # cache holds every position and the chunk mask picks the local
    # blocks' keys; here there is no cache): each position's argmax is
    # the token greedy decoding put after it.
    logits = outputs_of(
        backbone,
        {"token_ids": expected, "padding_mask": np.ones_like(expected)},
    )["logits"]
    start = prompt.shape[1]
    np.testing.assert_array_equal(
        np.argmax(logits[:, start - 1 : -1], -1), expected[:, start:]
    )
