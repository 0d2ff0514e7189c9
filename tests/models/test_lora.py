"""LoRA on backbones: targets, freezing, configs, merging, regex traps."""

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


def test_custom_targets_and_bad_input_are_named():
    backbone = LlamaBackbone(
        vocabulary_size=64,
        num_layers=1,
        num_query_heads=4,
        num_key_value_heads=2,
        hidden_dim=32,
        intermediate_dim=48,
    )
    with pytest.raises(ValueError, match="Received: rank=0"):
        backbone.enable_lora(0)
    with pytest.raises(ValueError, match=r"\['qkv'\] match no layer"):
        backbone.enable_lora(2, target_layer_names=["qkv"])
    with pytest.raises(ValueError, match="must be a list of layer names"):
        backbone.enable_lora(2, target_layer_names="query")
    backbone.enable_lora(
        2, target_layer_names=["key", "feedforward_gate_dense"]
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
