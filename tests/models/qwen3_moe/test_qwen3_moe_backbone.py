"""Qwen3MoeBackbone: paths, dense blocks, presets, norms, errors."""

import numpy as np
import pytest

from keras_nlp.models.qwen3_moe.qwen3_moe_backbone import Qwen3MoeBackbone

# head_dim * num_query_heads (64) differs from hidden_dim (32).
TINY = dict(
    vocabulary_size=64,
    num_layers=2,
    num_query_heads=4,
    num_key_value_heads=2,
    hidden_dim=32,
    intermediate_dim=40,
    moe_intermediate_dim=8,
    num_experts=4,
    head_dim=16,
    top_k=2,
)
INPUTS = {
    "token_ids": np.array([[5, 9, 2, 7, 1], [0, 0, 3, 4, 8]], "int32"),
    "padding_mask": np.array([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]], "int32"),
}
# keras-hub's `metadata.params`.
PRESET_PARAMS = {
    "qwen3_moe_30b_a3b_en": 30_532_122_624,
    "qwen3_moe_235b_a22b_en": 235_093_634_560,
    "qwen3_coder_instruct_30b_a3b_en": 30_532_122_624,
}


def test_every_second_block_sparse_has_keras_hubs_paths():
    model = Qwen3MoeBackbone(**TINY, decoder_sparse_step=2)
    dense = "transformer_layer_0/qwen3_moe_mlp/feedforward_"
    moe = "transformer_layer_1/qwen3_sparse_moe_block/"
    expected = {
        "token_embedding/embeddings": (64, 32),
        "token_embedding/reverse_embeddings": (32, 64),
        dense + "intermediate_dense/kernel": (32, 40),
        dense + "gate_dense/kernel": (32, 40),
        dense + "output_dense/kernel": (40, 32),
        moe + "sparse_feedforward_gate_dense/kernel": (32, 4),
        moe + "experts/expert_feedforward_gate_dense": (4, 32, 16),
        moe + "experts/expert_feedforward_output_dense": (4, 8, 32),
        "sequence_output_layernorm/scale": (32,),
    }
    for i in range(2):
        block = f"transformer_layer_{i}/"
        attention = block + "self_attention/"
        expected.update(
            {
                attention + "query/kernel": (32, 4, 16),
                attention + "query_dense_layernorm/scale": (16,),
                attention + "key/kernel": (32, 2, 16),
                attention + "key_dense_layernorm/scale": (16,),
                attention + "value/kernel": (32, 2, 16),
                attention + "attention_output/kernel": (4, 16, 32),
                block + "self_attention_layernorm/scale": (32,),
                block + "feedforward_layernorm/scale": (32,),
            }
        )
    assert {v.path: tuple(v.shape) for v in model.weights} == expected
    assert model(INPUTS).shape == (2, 5, 32)


def test_query_key_norms_keep_keras_hubs_epsilon():
    model = Qwen3MoeBackbone(**dict(TINY, layer_norm_epsilon=1e-3))
    attention = model.transformer_layers[0].attention
    assert attention.layer_norm_epsilon == 1e-6
    assert model.layer_norm.epsilon == 1e-3


@pytest.mark.parametrize("preset", list(PRESET_PARAMS))
def test_preset_parameter_count_matches_keras_hub(preset):
    plan = Qwen3MoeBackbone.plan_layout({"batch": 1, "model": 1}, preset=preset)
    assert plan.total_params == PRESET_PARAMS[preset]


def test_preset_config_builds_without_a_window():
    model = Qwen3MoeBackbone.from_preset(
        "qwen3_moe_30b_a3b_en",
        load_weights=False,
        num_layers=1,
        vocabulary_size=64,
        hidden_dim=32,
        intermediate_dim=16,
        moe_intermediate_dim=8,
        num_experts=8,
        num_query_heads=4,
        head_dim=8,
        num_key_value_heads=2,
    )
    block = model.transformer_layers[0]
    assert block.attention.sliding_window_size is None
    moe = block.feedforward
    assert (moe.top_k, moe.normalize_top_k, moe.router_aux_loss_coef) == (
        8,
        True,
        0.001,
    )


@pytest.mark.parametrize(
    "override, words",
    [
        ({"decoder_sparse_step": 1.5}, ["decoder_sparse_step=1.5"]),
        ({"mlp_only_layers": [-1]}, ["mlp_only_layers=[-1]", "[0, 2)"]),
        ({"head_dim": 7}, ["head_dim=7"]),
        ({"sliding_window_size": 0}, ["sliding_window_size=0"]),
        ({"top_k": 5}, ["top_k=5", "at most `num_experts` (4)"]),
    ],
)
def test_invalid_arguments_are_named(override, words):
    with pytest.raises(ValueError) as error:
        Qwen3MoeBackbone(**{**TINY, **override})
    for word in words:
        assert word in str(error.value)
