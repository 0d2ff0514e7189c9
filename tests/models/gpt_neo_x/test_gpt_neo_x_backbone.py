import numpy as np
import pytest
from keras import ops

from keras_nlp.layers.decoder_layer import DecoderLayer
from keras_nlp.models.gpt_neo_x.gpt_neo_x_attention import GPTNeoXAttention
from keras_nlp.models.gpt_neo_x.gpt_neo_x_backbone import GPTNeoXBackbone

TINY = dict(
    vocabulary_size=64,
    num_layers=2,
    num_heads=4,
    hidden_dim=32,
    intermediate_dim=48,
)
INPUTS = {
    "token_ids": np.array([[5, 9, 2, 7, 1], [0, 0, 3, 4, 8]], "int32"),
    "padding_mask": np.array([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]], "int32"),
}


def expected_paths(num_layers, V=64, H=32, N=4, F=48):
    paths = {"token_embedding/embeddings": (V, H)}
    for i in range(num_layers):
        block = f"transformer_layer_{i}"
        attention = f"{block}/self_attention"
        paths[f"{block}/self_attention_layer_norm/gamma"] = (H,)
        paths[f"{block}/self_attention_layer_norm/beta"] = (H,)
        paths[f"{attention}/query_key_value/kernel"] = (H, N, 3 * H // N)
        paths[f"{attention}/query_key_value/bias"] = (N, 3 * H // N)
        paths[f"{attention}/attention_output/kernel"] = (H, H)
        paths[f"{attention}/attention_output/bias"] = (H,)
        paths[f"{block}/feedforward_layer_norm/gamma"] = (H,)
        paths[f"{block}/feedforward_layer_norm/beta"] = (H,)
        paths[f"{block}/feedforward_intermediate_dense/kernel"] = (H, F)
        paths[f"{block}/feedforward_intermediate_dense/bias"] = (F,)
        paths[f"{block}/feedforward_output_dense/kernel"] = (F, H)
        paths[f"{block}/feedforward_output_dense/bias"] = (H,)
    paths["layer_norm/gamma"] = (H,)
    paths["layer_norm/beta"] = (H,)
    return paths


def block_params(H, F):
    """Parameters of one block, read off the variable shapes above."""
    qkv = H * 3 * H + 3 * H  # (H, N, 3 * Dh) kernel and (N, 3 * Dh) bias
    attention_output = H * H + H
    layer_norms = 2 * 2 * H  # two layer norms, gamma and beta
    mlp = H * F + F + F * H + H
    return qkv + attention_output + layer_norms + mlp


def full_params(V, L, H, F):
    # Token embedding, blocks, final layer norm; no position embedding.
    return V * H + L * block_params(H, F) + 2 * H


def test_variable_paths_and_shapes():
    model = GPTNeoXBackbone(**TINY)
    actual = {v.path: tuple(v.shape) for v in model.weights}
    assert actual == expected_paths(2)
    assert len(model.weights) == len(actual)  # no duplicate paths
    assert model.count_params() == full_params(64, 2, 32, 48)


def test_pythia_410m_paths_without_allocating():
    plan = GPTNeoXBackbone.plan_layout(
        {"batch": 1, "model": 1}, preset="pythia_410m_en"
    )
    actual = {w.path: w.shape for w in plan.weights}
    assert actual == expected_paths(24, V=50304, H=1024, N=16, F=4096)


@pytest.mark.parametrize(
    "preset, expected",
    [
        # The reference's full-model count for this config.
        ("pythia_410m_en", 353_822_720),
        # V=50304, L=24, H=2048, F=8192: 50304*2048 + 24*(2048*6144 + 6144
        # + 2048*2048 + 2048 + 4*2048 + 2048*8192 + 8192 + 8192*2048 + 2048)
        # + 2*2048.
        ("pythia_1.4b_en", full_params(V=50304, L=24, H=2048, F=8192)),
    ],
)
def test_preset_parameter_counts(preset, expected):
    plan = GPTNeoXBackbone.plan_layout({"batch": 1, "model": 1}, preset=preset)
    assert plan.total_params == expected


def test_parameter_count_formula_matches_the_reference():
    assert block_params(1024, 4096) == 12_596_224
    assert full_params(50304, 24, 1024, 4096) == 353_822_720
    assert full_params(50304, 24, 2048, 8192) == 1_311_625_216


def test_preset_configs():
    presets = GPTNeoXBackbone.presets
    assert set(presets) == {"pythia_410m_en", "pythia_1.4b_en"}
    for config in presets.values():
        assert config["vocabulary_size"] == 50304
        assert config["num_layers"] == 24
        assert config["num_heads"] == 16
        assert config["max_sequence_length"] == 2048
        assert config["rotary_percentage"] == 0.25
    assert presets["pythia_410m_en"]["hidden_dim"] == 1024
    assert presets["pythia_1.4b_en"]["hidden_dim"] == 2048
    model = GPTNeoXBackbone.from_preset(
        "pythia_410m_en",
        load_weights=False,
        num_layers=1,
        vocabulary_size=128,
        hidden_dim=128,  # 16 heads of 8: 2 rotated features each
        intermediate_dim=64,
    )
    assert model.num_heads == 16
    assert model.max_sequence_length == 2048


@pytest.mark.parametrize(
    "override, words",
    [
        (
            {"num_heads": 5},
            ["hidden_dim=32", "num_heads=5", "divisible"],
        ),
        (
            {"rotary_percentage": 1.5},
            ["rotary_percentage=1.5", "[0, 1]"],
        ),
        (
            # head_dim 8 * 0.375 = 3 rotated features: not pairs.
            {"rotary_percentage": 0.375},
            ["rotary_percentage=0.375", "head_dim=8", "even", "giving 3"],
        ),
        ({"num_layers": 0}, ["num_layers=0", "positive integer"]),
        ({"vocabulary_size": 12.5}, ["vocabulary_size=12.5", "positive"]),
        (
            {"hidden_activation": "relu"},
            ["hidden_activation='relu'", "'gelu_approximate', 'gelu'"],
        ),
    ],
)
def test_invalid_arguments(override, words):
    with pytest.raises(ValueError) as error:
        GPTNeoXBackbone(**{**TINY, **override})
    for word in words:
        assert word in str(error.value)


def test_training_with_dropout():
    model = GPTNeoXBackbone(**TINY, dropout=0.3)
    train = ops.convert_to_numpy(model(INPUTS, training=True))
    infer = ops.convert_to_numpy(model(INPUTS, training=False))
    assert train.shape == infer.shape == (2, 5, 32)
    assert np.all(np.isfinite(train))
    assert not np.allclose(train, infer)  # dropout is active in training
    np.testing.assert_array_equal(
        infer, ops.convert_to_numpy(model(INPUTS, training=False))
    )


def test_layers_config_round_trip():
    attention = GPTNeoXAttention(
        num_heads=4,
        rotary_percentage=0.5,
        rotary_max_wavelength=77,
        dropout=0.1,
    )
    config = attention.get_config()
    assert GPTNeoXAttention.from_config(config).get_config() == config

    model = GPTNeoXBackbone(**TINY, rotary_percentage=0.5)
    block = model.get_layer("transformer_layer_1")
    assert isinstance(block, DecoderLayer)
    assert block.parallel_residual
    config = block.get_config()
    clone = DecoderLayer.from_config(config)
    assert clone.get_config() == config
    assert isinstance(clone.attention, GPTNeoXAttention)
    assert clone.attention.rotary_percentage == 0.5


def test_lora_adapts_the_fused_projection():
    model = GPTNeoXBackbone(**TINY)
    before = ops.convert_to_numpy(model(INPUTS))
    model.enable_lora(2)
    trainable = {v.path: tuple(v.shape) for v in model.trainable_weights}
    qkv = "self_attention/query_key_value"
    assert trainable == {
        f"transformer_layer_{i}/{qkv}/lora_kernel_{ab}": shape
        for i in range(2)
        for ab, shape in (("a", (32, 4, 2)), ("b", (2, 24)))
    }
    # Adapters start at zero: the output is unchanged until trained.
    np.testing.assert_allclose(
        ops.convert_to_numpy(model(INPUTS)), before, atol=1e-6
    )
    config = model.get_config()
    assert config["lora_rank"] == 2
    clone = GPTNeoXBackbone.from_config(config)
    assert sorted(v.path for v in clone.trainable_weights) == sorted(trainable)
