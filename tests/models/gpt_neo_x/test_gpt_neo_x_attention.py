"""GPTNeoXAttention: declared dimensions, layout checks, its block."""

import pytest

from keras_nlp.distribution.dims import declared_dims
from keras_nlp.layers.decoder_block import DecoderBlock
from keras_nlp.models.gpt_neo_x.gpt_neo_x_attention import GPTNeoXAttention
from keras_nlp.models.gpt_neo_x.gpt_neo_x_backbone import GPTNeoXBackbone
from tests.models.tiny_configs import tiny

_, TINY = tiny("GPTNeoXBackbone")


def test_fused_and_output_kernels_declare_their_dims():
    attention = GPTNeoXAttention(num_heads=4, name="self_attention")
    attention.build((None, None, 32))
    assert declared_dims(attention) == {
        "self_attention/query_key_value/kernel": (
            "hidden",
            "heads",
            "qkv_head_dim",
        ),
        "self_attention/query_key_value/bias": ("heads", "qkv_head_dim"),
        # Rows are the concatenated heads.
        "self_attention/attention_output/kernel": ("heads", "hidden"),
    }


def test_a_transposed_output_rule_is_rejected(monkeypatch):
    rules = GPTNeoXBackbone._layout_rules

    def transposed(config):
        return [
            (pattern, spec[::-1], dims[::-1])
            if pattern.endswith("attention_output/kernel")
            else (pattern, spec, dims)
            for pattern, spec, dims in rules(config)
        ]

    monkeypatch.setattr(GPTNeoXBackbone, "_layout_rules", transposed)
    with pytest.raises(ValueError, match="transposed"):
        GPTNeoXBackbone.plan_layout({"batch": 2, "model": 4}, config=TINY)


def test_block_config_round_trip():
    model = GPTNeoXBackbone(**TINY, rotary_percentage=0.5, dropout=0.1)
    block = model.get_layer("transformer_layer_0")
    assert isinstance(block, DecoderBlock) and block.parallel_residual
    config = block.get_config()
    clone = DecoderBlock.from_config(config)
    assert clone.get_config() == config
    assert isinstance(clone.attention, GPTNeoXAttention)
    assert clone.attention.rotary_percentage == 0.5
    assert clone.attention.get_config() == block.attention.get_config()
