"""GPTNeoXAttention: declared dimension names and argument checks."""

import pytest

from keras_nlp.distribution.dims import declared_dims
from keras_nlp.models.gpt_neo_x.gpt_neo_x_attention import GPTNeoXAttention
from keras_nlp.models.gpt_neo_x.gpt_neo_x_backbone import GPTNeoXBackbone

TINY = dict(
    vocabulary_size=64,
    num_layers=1,
    num_heads=4,
    hidden_dim=32,
    intermediate_dim=48,
)


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


def test_rotary_percentage_outside_unit_interval_is_rejected():
    with pytest.raises(ValueError, match=r"rotary_percentage=1.5"):
        GPTNeoXAttention(num_heads=4, rotary_percentage=1.5)


def test_odd_rotated_part_is_rejected_when_built():
    # head_dim 8 * 0.375 = 3 rotated features: not pairs.
    attention = GPTNeoXAttention(num_heads=4, rotary_percentage=0.375)
    with pytest.raises(ValueError, match="giving 3"):
        attention.build((None, None, 32))
