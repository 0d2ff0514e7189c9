"""LoRA on backbones: targets, freezing, configs, merging, regex traps."""

import functools

import keras
import numpy as np
import pytest

from keras_nlp.distribution import DATA
from keras_nlp.distribution import MODEL
from keras_nlp.distribution import LayoutError
from keras_nlp.models import GemmaBackbone
from keras_nlp.models import LlamaBackbone

GEMMA = dict(
    vocabulary_size=64,
    num_layers=2,
    num_query_heads=4,
    num_key_value_heads=2,
    hidden_dim=32,
    intermediate_dim=64,
    head_dim=8,
)
INPUTS = {
    "token_ids": np.array([[5, 9, 2, 7, 1], [0, 0, 3, 4, 8]], "int32"),
    "padding_mask": np.array([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]], "int32"),
}


def numpy(x):
    return keras.ops.convert_to_numpy(x)


def test_only_adapters_of_the_default_targets_are_trainable():
    backbone = GemmaBackbone(**GEMMA)
    backbone.enable_lora(4)
    trainable = sorted(v.path for v in backbone.trainable_weights)
    assert trainable == sorted(
        f"decoder_block_{i}/attention/{kind}/lora_kernel_{ab}"
        for i in range(2)
        for kind in ("query", "value")
        for ab in "ab"
    )
    shapes = {v.path: tuple(v.shape) for v in backbone.weights}
    assert shapes["decoder_block_0/attention/query/lora_kernel_a"] == (4, 32, 4)
    assert shapes["decoder_block_0/attention/query/lora_kernel_b"] == (4, 8)


LLAMA = dict(
    vocabulary_size=64,
    num_layers=1,
    num_query_heads=4,
    num_key_value_heads=2,
    hidden_dim=32,
    intermediate_dim=48,
)


@functools.cache
def llama_for_errors():
    """A Llama that every bad request leaves as it is."""
    return LlamaBackbone(**LLAMA)


# Each rank error names the first target layer that cannot use the rank.
VALUE_RANK_LIMIT = (
    "is larger than the layer transformer_layer_0/self_attention/value can "
    "use: its kernel (32, 2, 8) is adapted as a 64 x 8 matrix, of rank at "
    "most 8. Pass a rank of at most 8 for these target layers."
)


@pytest.mark.parametrize(
    "arguments, message",
    [
        pytest.param(dict(rank=0), "Received: rank=0.", id="zero_rank"),
        pytest.param(
            dict(rank=10**5),
            f"LoRA rank 100000 {VALUE_RANK_LIMIT}",
            id="rank_1e5",
        ),
        pytest.param(
            dict(rank=9), f"LoRA rank 9 {VALUE_RANK_LIMIT}", id="rank_9"
        ),
        # The constructor (a config's `lora_rank`) checks alike.
        pytest.param(
            dict(lora_rank=10**7),
            f"LoRA rank 10000000 {VALUE_RANK_LIMIT}",
            id="constructor_rank_1e7",
        ),
        pytest.param(
            dict(rank=9, target_layer_names=["feedforward_gate_dense", "key"]),
            "LoRA rank 9 is larger than the layer "
            "transformer_layer_0/self_attention/key can use: its kernel "
            "(32, 2, 8) is adapted as a 64 x 8 matrix, of rank at most 8. "
            "Pass a rank of at most 8 for these target layers.",
            id="rank_9_custom_targets",
        ),
        pytest.param(
            dict(rank=2, target_layer_names=[]),
            "target_layer_names is empty: LoRA would adapt no layer and "
            "leave nothing trainable. Name the layers to adapt, or pass None "
            "for the defaults (['query', 'value']).",
            id="no_targets",
        ),
        pytest.param(
            dict(rank=2, target_layer_names=["qkv"]),
            "LoRA target names ['qkv'] match no layer",
            id="unknown_target",
        ),
        pytest.param(
            dict(rank=2, target_layer_names="query"),
            "must be a list of layer names",
            id="target_string",
        ),
    ],
)
def test_lora_argument_errors(arguments, message):
    backbone = llama_for_errors()
    with pytest.raises(ValueError) as error:
        if "lora_rank" in arguments:
            LlamaBackbone(**LLAMA, **arguments)
        else:
            backbone.enable_lora(**arguments)
    assert message in str(error.value)
    assert "\n" not in str(error.value)
    # Refused before any adapter or plan: nothing changed.
    assert backbone.lora_config() == {}
    assert len(backbone.trainable_weights) == len(backbone.weights)


def test_custom_targets_and_a_rank_at_the_kernels_limit():
    backbone = LlamaBackbone(**LLAMA)
    # 8: the key kernel's (32, 2, 8) limit, which it reaches.
    backbone.enable_lora(
        8, target_layer_names=["key", "feedforward_gate_dense"]
    )
    assert sorted(v.path for v in backbone.trainable_weights) == [
        "transformer_layer_0/feedforward_gate_dense/lora_kernel_a",
        "transformer_layer_0/feedforward_gate_dense/lora_kernel_b",
        "transformer_layer_0/self_attention/key/lora_kernel_a",
        "transformer_layer_0/self_attention/key/lora_kernel_b",
    ]
    with pytest.raises(ValueError, match="already enabled"):
        backbone.enable_lora(2)


def test_keras_hub_lora_api_names():
    # keras-hub's keyword and default-names method, as a user calls them.
    backbone = GemmaBackbone(**GEMMA)
    assert backbone.default_lora_layer_names() == ["query", "value"]
    backbone.enable_lora(2, target_layer_names=["value"])
    assert {v.path.rsplit("/", 2)[-2] for v in backbone.trainable_weights} == {
        "value"
    }
    with pytest.raises(TypeError, match="target_names"):
        GemmaBackbone(**GEMMA).enable_lora(2, target_names=["value"])


def test_config_round_trip_keeps_lora():
    backbone = GemmaBackbone(**GEMMA)
    backbone.enable_lora(3, target_layer_names=["query"])
    config = backbone.get_config()
    assert config["lora_rank"] == 3
    assert config["lora_target_names"] == ["query"]
    clone = GemmaBackbone.from_config(config)
    assert sorted(v.path for v in clone.trainable_weights) == sorted(
        v.path for v in backbone.trainable_weights
    )
    clone.set_weights(backbone.get_weights())
    np.testing.assert_allclose(
        numpy(clone(INPUTS)), numpy(backbone(INPUTS)), atol=1e-6
    )


def test_merged_backbone_gives_the_adapted_outputs():
    backbone = GemmaBackbone(**GEMMA)
    backbone.enable_lora(4)
    rng = np.random.default_rng(0)
    for variable in backbone.weights:
        if "lora_kernel" in variable.path:
            variable.assign(rng.normal(0, 0.1, variable.shape))
    merged = backbone.merge_lora()
    assert not any("lora" in v.path for v in merged.weights)
    assert "lora_rank" not in merged.get_config()
    assert len(merged.trainable_weights) == len(merged.weights)
    np.testing.assert_allclose(
        numpy(merged(INPUTS)), numpy(backbone(INPUTS)), atol=1e-5
    )
    with pytest.raises(ValueError, match="no LoRA adapters to merge"):
        merged.merge_lora()


def test_plan_lists_adapters_with_their_kernels_layout():
    plan = GemmaBackbone.plan_layout(
        {"batch": 2, "model": 4}, preset="gemma_7b_en", lora_rank=8
    )
    block = "decoder_block_3/attention/"
    a = plan.weight(block + "query/lora_kernel_a")
    b = plan.weight(block + "query/lora_kernel_b")
    assert (a.shape, a.spec) == ((16, 3072, 8), ("model", "batch", None))
    assert (b.shape, b.spec) == ((8, 256), (None, None))
    assert plan.weight(block + "value/lora_kernel_a").spec == (
        "model",
        "batch",
        None,
    )


class _LooseRules(GemmaBackbone):
    """Gemma with a query rule loose enough to catch the adapters too."""

    presets = {}

    @staticmethod
    def _layout_rules(config):
        return [
            (r"decoder_block_\d+/attention/query/.*", (MODEL, DATA, None))
            if pattern.endswith("attention/query/kernel")
            else (pattern, *rest)
            for pattern, *rest in GemmaBackbone._layout_rules(config)
        ]


def test_a_rule_that_also_matches_adapters_is_a_clear_error():
    with pytest.raises(LayoutError) as info:
        _LooseRules.plan_layout(
            {"batch": 1, "model": 2}, config=GEMMA, lora_rank=2
        )
    message = str(info.value)
    assert "LoRA adapter weights take the layout of their kernel" in message
    assert (
        "decoder_block_0/attention/query/lora_kernel_a matches "
        "'decoder_block_\\\\d+/attention/query/.*'"
    ) in message
