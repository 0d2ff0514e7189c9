"""GptOssBackbone: paths, shapes, windows, preset sizes, errors."""

import keras
import numpy as np
import pytest

from keras_nlp.models.gpt_oss.gpt_oss_backbone import GptOssBackbone

# heads * head_dim (64) differs from hidden_dim (32), as in the presets
# (64 * 64 on 2880).
TINY = dict(
    vocabulary_size=64,
    num_layers=2,
    num_query_heads=4,
    hidden_dim=32,
    intermediate_dim=24,
    num_key_value_heads=2,
    num_experts=4,
    top_k=2,
    sliding_window=3,
    head_dim=16,
)
# keras-hub's `metadata.params` of each preset.
PRESET_PARAMS = {
    "gpt_oss_20b_en": 20_914_757_184,
    "gpt_oss_120b_en": 116_829_156_672,
    "gpt_oss_safeguard_20b_en": 20_914_757_184,
    "gpt_oss_safeguard_120b_en": 116_829_156_672,
}


def expected_paths(num_layers, V=64, H=32, Nq=4, Nkv=2, Dh=16, F=24, E=4):
    paths = {
        "token_embedding/embeddings": (V, H),
        "token_embedding/reverse_embeddings": (H, V),
    }
    for i in range(num_layers):
        block = f"transformer_layer_{i}/"
        attention = block + "self_attention/"
        moe = block + "sparse_moe_block/"
        paths.update(
            {
                attention + "query/kernel": (H, Nq, Dh),
                attention + "query/bias": (Nq, Dh),
                attention + "key/kernel": (H, Nkv, Dh),
                attention + "key/bias": (Nkv, Dh),
                attention + "value/kernel": (H, Nkv, Dh),
                attention + "value/bias": (Nkv, Dh),
                attention + "attention_output/kernel": (Nq, Dh, H),
                attention + "attention_output/bias": (H,),
                attention + "sinks": (Nq,),
                block + "input_layernorm/scale": (H,),
                moe + "router/router_dense/kernel": (H, E),
                moe + "router/router_dense/bias": (E,),
                moe + "experts/gate_up_proj": (E, H, 2 * F),
                moe + "experts/gate_up_proj_bias": (E, 2 * F),
                moe + "experts/down_proj": (E, F, H),
                moe + "experts/down_proj_bias": (E, H),
                block + "post_attention_layernorm/scale": (H,),
            }
        )
    paths["sequence_output_layernorm/scale"] = (H,)
    return paths


def test_variable_paths_shapes_and_windows():
    model = GptOssBackbone(**TINY)
    assert {v.path: tuple(v.shape) for v in model.weights} == expected_paths(2)
    assert len(model.weights) == len(expected_paths(2))
    # keras-hub windows the odd blocks, the query plus 3 tokens before it.
    windows = [
        b.attention.sliding_window_size for b in model.transformer_layers
    ]
    assert windows == [None, 4]
    unwindowed = GptOssBackbone(**dict(TINY, sliding_window=None))
    assert [
        b.attention.sliding_window_size for b in unwindowed.transformer_layers
    ] == [None, None]


EVEN = ["sliding_attention", "full_attention"]


def test_layer_types_choose_the_windowed_blocks():
    # OpenAI's checkpoints window the even blocks (Hugging Face's names).
    model = GptOssBackbone(**TINY, layer_types=EVEN)
    windows = [
        b.attention.sliding_window_size for b in model.transformer_layers
    ]
    assert windows == [4, None]
    config = model.get_config()
    assert config["layer_types"] == EVEN
    again = GptOssBackbone.from_config(config)
    assert [
        b.attention.sliding_window_size for b in again.transformer_layers
    ] == [4, None]
    assert GptOssBackbone(**TINY).get_config()["layer_types"] is None


@pytest.mark.parametrize("layer_types", [["sliding_attention"], None])
def test_windowed_block_does_not_see_past_its_window(layer_types):
    # One block: windowed (query + 2 before it) or, keras-hub's pattern
    # for block 0, full. Changing token 0 changes exactly the positions
    # whose attention reaches it.
    config = dict(TINY, num_layers=1, sliding_window=2)
    model = GptOssBackbone(**config, layer_types=layer_types)
    # Row 1 is row 0 with token 0 changed; one call for both.
    token_ids = np.array([[5, 9, 2, 7, 11, 3], [40, 9, 2, 7, 11, 3]], "int32")
    outputs = keras.ops.convert_to_numpy(
        model({"token_ids": token_ids, "padding_mask": np.ones_like(token_ids)})
    )
    moved = np.abs(outputs[1] - outputs[0]).max(axis=-1) > 1e-6
    reach = 3 if layer_types else 6
    assert moved.tolist() == [i < reach for i in range(6)]


@pytest.mark.parametrize("preset", list(PRESET_PARAMS))
def test_preset_parameter_count_matches_keras_hub(preset):
    plan = GptOssBackbone.plan_layout({"batch": 1, "model": 1}, preset=preset)
    assert plan.total_params == PRESET_PARAMS[preset]


def test_preset_shapes_follow_the_published_configs():
    config = GptOssBackbone.presets["gpt_oss_120b_en"]
    plan = GptOssBackbone.plan_layout(
        {"batch": 1, "model": 1}, config=dict(config, num_layers=1)
    )
    assert {w.path: w.shape for w in plan.weights} == expected_paths(
        1, V=201088, H=2880, Nq=64, Nkv=8, Dh=64, F=2880, E=128
    )
    assert config["rope_scaling_factor"] == 32.0
    assert config["sliding_window"] == 128


@pytest.mark.parametrize(
    "override, error, words",
    [
        (
            {"output_router_logits": True},
            ValueError,
            ["output_router_logits=True"],
        ),
        (
            {"num_key_value_heads": 3},
            ValueError,
            ["num_key_value_heads=3", "must divide"],
        ),
        ({"top_k": 5}, ValueError, ["top_k=5", "at most `num_experts` (4)"]),
        ({"sliding_window": 0}, ValueError, ["sliding_window=0", "or None"]),
        ({"rope_scaling_factor": 0.5}, ValueError, ["factor=0.5"]),
        ({"head_dim": 7}, ValueError, ["head_dim=7"]),
        ({"rope_type": "yarn"}, TypeError, ["rope_type", "head_dim"]),
        (
            {"layer_types": ["full_attention"]},
            ValueError,
            ["needs 2 entries", "it has 1 entries", "['full_attention']"],
        ),
        (
            {"layer_types": ["sliding_attention", "local"]},
            ValueError,
            ["unknown value(s) ['local']", "'sliding_attention'"],
        ),
        (
            {"layer_types": "sliding_attention"},
            ValueError,
            ["must be None or a list of 2", "'sliding_attention'"],
        ),
        (
            {"layer_types": EVEN, "sliding_window": None},
            ValueError,
            ["windows the blocks [0]", "sliding_window=None"],
        ),
    ],
)
def test_invalid_arguments_are_named(override, error, words):
    with pytest.raises(error) as info:
        GptOssBackbone(**{**TINY, **override})
    for word in words:
        assert word in str(info.value)
