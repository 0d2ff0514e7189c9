"""QwenMoeBackbone: paths, dense blocks, presets, losses, errors."""

import keras
import numpy as np
import pytest

from keras_nlp.models.families.moe import sparse_blocks
from keras_nlp.models.qwen_moe.qwen_moe_backbone import QwenMoeBackbone

TINY = dict(
    vocabulary_size=64,
    num_layers=2,
    num_query_heads=4,
    num_key_value_heads=2,
    hidden_dim=32,
    intermediate_dim=40,
    moe_intermediate_dim=8,
    shared_expert_intermediate_dim=24,
    num_experts=4,
    top_k=2,
)
INPUTS = {
    "token_ids": np.array([[5, 9, 2, 7, 1], [0, 0, 3, 4, 8]], "int32"),
    "padding_mask": np.array([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]], "int32"),
}


def test_sparse_and_dense_blocks_have_keras_hubs_paths():
    # Block 1 is dense: its feed-forward is keras-hub's `qwen_moe_mlp`.
    model = QwenMoeBackbone(**TINY, mlp_only_layers=[1])
    moe = "transformer_layer_0/qwen_sparse_moe_block/"
    shared = moe + "shared_expert_dense/feedforward_"
    dense = "transformer_layer_1/qwen_moe_mlp/feedforward_"
    expected = {
        "token_embedding/embeddings": (64, 32),
        "token_embedding/reverse_embeddings": (32, 64),
        moe + "sparse_feedforward_gate_dense/kernel": (32, 4),
        moe + "experts/expert_feedforward_gate_dense": (4, 32, 16),
        moe + "experts/expert_feedforward_output_dense": (4, 8, 32),
        shared + "intermediate_dense/kernel": (32, 24),
        shared + "gate_dense/kernel": (32, 24),
        shared + "output_dense/kernel": (24, 32),
        moe + "shared_expert_gate_dense/kernel": (32, 1),
        dense + "intermediate_dense/kernel": (32, 40),
        dense + "gate_dense/kernel": (32, 40),
        dense + "output_dense/kernel": (40, 32),
        "sequence_output_layernorm/scale": (32,),
    }
    for i in range(2):
        attention = f"transformer_layer_{i}/self_attention/"
        for name, shape in [
            ("query/kernel", (32, 4, 8)),
            ("query/bias", (4, 8)),
            ("key/kernel", (32, 2, 8)),
            ("key/bias", (2, 8)),
            ("value/kernel", (32, 2, 8)),
            ("value/bias", (2, 8)),
            ("attention_output/kernel", (4, 8, 32)),
        ]:
            expected[attention + name] = shape
        for norm in ("self_attention_layernorm", "feedforward_layernorm"):
            expected[f"transformer_layer_{i}/{norm}/scale"] = (32,)
    assert {v.path: tuple(v.shape) for v in model.weights} == expected
    assert model(INPUTS).shape == (2, 5, 32)


def test_sparse_blocks_follow_the_step_and_the_dense_list():
    assert sparse_blocks(4) == [True] * 4
    assert sparse_blocks(4, decoder_sparse_step=2) == [False, True] * 2
    assert sparse_blocks(4, 1, [0, 3]) == [False, True, True, False]
    assert sparse_blocks(3, 3, [2]) == [False] * 3


def test_preset_parameter_count_matches_keras_hub():
    plan = QwenMoeBackbone.plan_layout(
        {"batch": 1, "model": 1}, preset="qwen1.5_moe_2.7b_en"
    )
    # keras-hub's `metadata.params`.
    assert plan.total_params == 14_315_784_192


def test_training_adds_one_load_balancing_loss_per_sparse_block():
    keras.utils.set_random_seed(0)
    model = QwenMoeBackbone(
        **dict(TINY, num_layers=3),
        mlp_only_layers=[1],
        router_aux_loss_coefficient=0.5,
    )
    model(INPUTS)
    assert model.losses == []
    model(INPUTS, training=True)
    losses = [float(loss) for loss in model.losses]
    # Each is coef * E * sum(share * mean probability): positive, and at
    # most coef * E as the shares sum to one and probabilities are <= 1.
    assert len(losses) == 2
    assert all(0 < loss <= 0.5 * TINY["num_experts"] for loss in losses)


@pytest.mark.parametrize(
    "override, words",
    [
        ({"decoder_sparse_step": 0}, ["decoder_sparse_step=0", "positive"]),
        ({"mlp_only_layers": [2]}, ["mlp_only_layers=[2]", "[0, 2)"]),
        ({"output_router_logits": True}, ["output_router_logits=True"]),
        ({"moe_intermediate_dim": 0}, ["moe_intermediate_dim=0"]),
        (
            {"shared_expert_intermediate_dim": None},
            ["shared_expert_intermediate_dim=None", "positive integer"],
        ),
        ({"top_k": 5}, ["top_k=5", "at most `num_experts` (4)"]),
        ({"num_key_value_heads": 3}, ["num_key_value_heads=3"]),
    ],
)
def test_invalid_arguments_are_named(override, words):
    with pytest.raises(ValueError) as error:
        QwenMoeBackbone(**{**TINY, **override})
    for word in words:
        assert word in str(error.value)


def test_unknown_argument_is_named():
    with pytest.raises(TypeError, match="use_sliding_window"):
        QwenMoeBackbone(**TINY, use_sliding_window=True)
