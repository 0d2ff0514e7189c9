"""MixtralBackbone: paths, shapes, presets, config round trip, errors."""

import re
import textwrap

import keras
import numpy as np
import pytest

from keras_nlp.models.mixtral.mixtral_backbone import MixtralBackbone

TINY = dict(
    vocabulary_size=64,
    num_layers=2,
    num_query_heads=4,
    num_key_value_heads=2,
    hidden_dim=32,
    intermediate_dim=24,
    num_experts=4,
    top_k=2,
)
INPUTS = {
    "token_ids": np.array([[5, 9, 2, 7, 1, 3], [0, 0, 3, 4, 8, 6]], "int32"),
    "padding_mask": np.array([[1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1]], "int32"),
}


def expected_paths(num_layers, V=64, H=32, Nq=4, Nkv=2, Dh=8, F=24, E=4):
    paths = {
        "token_embedding/embeddings": (V, H),
        "token_embedding/reverse_embeddings": (H, V),
    }
    for i in range(num_layers):
        block = f"transformer_layer_{i}/"
        attention = block + "self_attention/"
        moe = block + "mixtral_sparse_moe_block/"
        paths.update(
            {
                attention + "query/kernel": (H, Nq, Dh),
                attention + "key/kernel": (H, Nkv, Dh),
                attention + "value/kernel": (H, Nkv, Dh),
                attention + "attention_output/kernel": (Nq, Dh, H),
                block + "self_attention_layernorm/scale": (H,),
                moe + "sparse_feedforward_gate_dense/kernel": (H, E),
                moe + "experts/expert_feedforward_gate_dense": (E, H, F),
                moe + "experts/expert_feedforward_intermediate_dense": (
                    E,
                    H,
                    F,
                ),
                moe + "experts/expert_feedforward_output_dense": (E, F, H),
                block + "feedforward_layernorm/scale": (H,),
            }
        )
    paths["sequence_output_layernorm/scale"] = (H,)
    return paths


def full_params(V, L, H, Nq, Nkv, Dh, F, E):
    attention = H * Nq * Dh * 2 + H * Nkv * Dh * 2
    block = attention + H * E + 3 * E * H * F + 2 * H
    return 2 * V * H + L * block + H


def test_variable_paths_shapes_and_output():
    model = MixtralBackbone(**TINY)
    assert {v.path: tuple(v.shape) for v in model.weights} == expected_paths(2)
    assert len(model.weights) == len(expected_paths(2))
    assert model(INPUTS).shape == (2, 6, 32)
    assert set(model.input) == {"token_ids", "padding_mask"}


def test_preset_parameter_count_and_shapes():
    plan = MixtralBackbone.plan_layout(
        {"batch": 1, "model": 1}, preset="mixtral_8_7b_en"
    )
    # The reference's full-model count (it matches the preset metadata).
    assert plan.total_params == 46_702_792_704
    assert plan.total_params == full_params(
        32000, 32, 4096, 32, 8, 128, 14336, 8
    )
    shapes = {w.path: w.shape for w in plan.weights}
    reference = expected_paths(
        32, V=32000, H=4096, Nq=32, Nkv=8, Dh=128, F=14336, E=8
    )
    assert shapes == reference


def test_preset_config():
    config = MixtralBackbone.presets["mixtral_8_7b_en"]
    assert (config["num_experts"], config["top_k"]) == (8, 2)
    assert config["sliding_window"] is None
    model = MixtralBackbone.from_preset(
        "mixtral_8_7b_en",
        load_weights=False,
        num_layers=1,
        vocabulary_size=64,
        hidden_dim=32,
        intermediate_dim=16,
        num_query_heads=4,
        num_key_value_heads=1,
    )
    moe = model.transformer_layers[0].feedforward
    assert (moe.num_experts, moe.top_k, moe.normalize_top_k) == (8, 2, True)
    assert moe.router_aux_loss_coef == 0.02
    assert model.transformer_layers[0].attention.sliding_window_size is None


def test_training_adds_one_load_balancing_loss_per_block():
    keras.utils.set_random_seed(0)
    model = MixtralBackbone(**TINY)
    model(INPUTS)
    assert model.losses == []
    model(INPUTS, training=True)
    losses = [float(loss) for loss in model.losses]
    assert len(losses) == 2
    # Each loss is coef * E * sum(share * mean probability): positive, and
    # at most coef * E as the shares sum to one and probabilities are <= 1.
    assert all(0 < loss <= 0.02 * TINY["num_experts"] for loss in losses)
    model = MixtralBackbone(**TINY, router_aux_loss_coef=0)
    model(INPUTS, training=True)
    assert model.losses == []


@pytest.mark.parametrize(
    "override, words",
    [
        ({"num_query_heads": 5}, ["hidden_dim=32", "num_query_heads=5"]),
        (
            {"num_key_value_heads": 3},
            ["num_key_value_heads=3", "must divide `num_query_heads`"],
        ),
        ({"num_experts": 0}, ["num_experts=0", "positive integer"]),
        ({"top_k": 5}, ["top_k=5", "at most `num_experts` (4)"]),
        ({"router_jitter_noise": -0.1}, ["router_jitter_noise=-0.1", "[0, 1)"]),
        ({"sliding_window": 0}, ["sliding_window=0", "positive integer"]),
        ({"num_layers": 0}, ["num_layers=0", "positive integer"]),
    ],
)
def test_invalid_arguments_are_named(override, words):
    with pytest.raises(ValueError) as error:
        MixtralBackbone(**{**TINY, **override})
    for word in words:
        assert word in str(error.value)


def test_docstring_example_runs():
    """The class docstring's Example block runs as written."""
    (block,) = re.findall(
        r"```python\n(.*?)```", MixtralBackbone.__doc__, re.DOTALL
    )
    namespace = {}
    exec(textwrap.dedent(block), namespace)
    assert tuple(namespace["hidden_states"].shape) == (2, 4, 32)
