"""Hugging Face `phi3` checkpoints against keras-hub's Phi-3.

keras-hub has no Hugging Face loader for Phi-3: each checkpoint is written
from a random keras-hub `Phi3Backbone` with `transformers`' names and
layouts (fused `qkv_proj` and `gate_up_proj`), and that model is the
oracle (see `tests/saving/huggingface_written.py`). Phi-3 mini 4k's
sliding window, which keras-hub's backbone cannot express, loads into our
backbone's `sliding_window` (`tests/saving/huggingface_options.py`).
"""

import json

import numpy as np
import pytest

from keras_nlp.models import Backbone
from keras_nlp.saving import PresetError
from keras_nlp.saving.huggingface import huggingface_config
from tests.models.backbone_checks import output_arrays
from tests.models.backbone_checks import random_inputs
from tests.saving.huggingface_checkpoints import HFCase
from tests.saving.huggingface_checkpoints import tensor_writer
from tests.saving.huggingface_options import OptionCheckpointTests
from tests.saving.huggingface_options import written_checkpoint
from tests.saving.huggingface_written import WrittenCheckpointTests


def _config(oracle):
    rope = None
    if oracle.rope_scaling_type is not None:
        rope = {
            "type": "longrope",
            "short_factor": oracle.rope_scaling_short_factor,
            "long_factor": oracle.rope_scaling_long_factor,
        }
    return {
        "model_type": "phi3",
        "architectures": ["Phi3ForCausalLM"],
        "vocab_size": oracle.vocabulary_size,
        "num_hidden_layers": oracle.num_layers,
        "hidden_size": oracle.hidden_dim,
        "intermediate_size": oracle.intermediate_dim,
        "num_attention_heads": oracle.num_query_heads,
        "num_key_value_heads": oracle.num_key_value_heads,
        "rms_norm_eps": oracle.layer_norm_epsilon,
        "max_position_embeddings": oracle.max_sequence_length,
        "original_max_position_embeddings": (
            oracle.pretraining_sequence_length
        ),
        "rope_theta": oracle.rope_max_wavelength,
        "rope_scaling": rope,
        "hidden_act": "silu",
        "attention_dropout": 0.0,
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
        # A window that never applies (Phi-3 mini 128k's is 262144).
        "sliding_window": 2 * oracle.max_sequence_length,
        "tie_word_embeddings": False,
        # Phi-3 mini's ids: 32000 lies outside this vocabulary, and is
        # exported as null (transformers refuses such a padding id).
        "bos_token_id": 1,
        "eos_token_id": 32000,
        "pad_token_id": 32000,
        "torch_dtype": "float32",
    }


def _tensors(oracle):
    """`transformers`' Phi-3 layout: (out, in) kernels, q|k|v and gate|up
    stacked along the output rows."""
    tensors = {
        "model.embed_tokens.weight": oracle.token_embedding.embeddings,
        "lm_head.weight": oracle.token_embedding.reverse_embeddings.numpy().T,
        "model.norm.weight": oracle.layer_norm.scale,
    }
    hidden = oracle.hidden_dim
    for i, layer in enumerate(oracle.transformer_layers):
        prefix = f"model.layers.{i}."
        attention = layer.attention
        qkv = [
            dense.kernel.numpy().reshape(hidden, -1).T
            for dense in (
                attention.query_dense,
                attention.key_dense,
                attention.value_dense,
            )
        ]
        tensors.update(
            {
                prefix + "input_layernorm.weight": (
                    layer.pre_attention_layernorm.scale
                ),
                prefix + "post_attention_layernorm.weight": (
                    layer.post_attention_layernorm.scale
                ),
                prefix + "self_attn.qkv_proj.weight": np.concatenate(qkv),
                prefix + "self_attn.o_proj.weight": (
                    attention.output_dense.kernel.numpy().reshape(-1, hidden).T
                ),
                prefix + "mlp.gate_up_proj.weight": np.concatenate(
                    [
                        layer.feedforward_gate_dense.kernel.numpy().T,
                        layer.feedforward_intermediate_dense.kernel.numpy().T,
                    ]
                ),
                prefix + "mlp.down_proj.weight": (
                    layer.feedforward_output_dense.kernel.numpy().T
                ),
            }
        )
    return tensors


_WRITER = tensor_writer(_config, _tensors)
_SMALL = dict(vocabulary_size=96, num_layers=2, hidden_dim=32)


class TestPhi3Checkpoints(WrittenCheckpointTests):
    cases = [
        HFCase(
            "phi3_gqa",
            "Phi3Backbone",
            dict(
                _SMALL,
                intermediate_dim=48,
                num_query_heads=8,
                num_key_value_heads=2,
            ),
            writer=_WRITER,
        ),
        # Phi-3 128k: LongRoPE; the 10-token inputs pass the 4-token
        # pretraining length, so the long factors and the amplitude apply.
        HFCase(
            "phi3_longrope",
            "Phi3Backbone",
            dict(
                _SMALL,
                intermediate_dim=40,
                num_query_heads=4,
                num_key_value_heads=4,
                max_sequence_length=64,
                pretraining_sequence_length=4,
                rope_scaling_type="su",
                rope_scaling_short_factor=[1.0, 1.25, 1.5, 2.0],
                rope_scaling_long_factor=[1.0, 2.0, 4.0, 8.0],
            ),
            writer=_WRITER,
        ),
    ]
    meshes = ((2, 4),)


_LONGROPE = TestPhi3Checkpoints.cases[1]


@pytest.fixture(scope="module")
def longrope_config(tmp_path_factory):
    import keras_hub

    oracle = keras_hub.models.Phi3Backbone(**_LONGROPE.config)
    return _config(oracle)


def _translate(tmp_path, fields):
    (tmp_path / "config.json").write_text(json.dumps(fields))
    return huggingface_config(Backbone, str(tmp_path))[2]


def test_longrope_spellings_translate_alike(longrope_config, tmp_path):
    expected = {
        "rope_scaling_type": "su",
        "max_sequence_length": 64,
        "pretraining_sequence_length": 4,
        "rope_scaling_long_factor": [1.0, 2.0, 4.0, 8.0],
    }
    legacy = _translate(tmp_path, longrope_config)
    assert {k: legacy[k] for k in expected} == expected
    # Its first name, "su".
    rope = dict(longrope_config["rope_scaling"], type="su")
    assert _translate(tmp_path, dict(longrope_config, rope_scaling=rope)) == (
        legacy
    )
    # transformers v5: one `rope_parameters` dict, with the derived factors.
    fields = dict(longrope_config)
    rope = fields.pop("rope_scaling")
    fields.pop("rope_theta")
    fields["rope_parameters"] = {
        "rope_type": "longrope",
        "rope_theta": 10000.0,
        "short_factor": rope["short_factor"],
        "long_factor": rope["long_factor"],
        "factor": 16.0,
        "attention_factor": float(np.sqrt(1 + np.log(16) / np.log(4))),
    }
    assert _translate(tmp_path, fields) == legacy


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("partial_rotary_factor", 0.75, "partial_rotary_factor=0.75"),
        ("tie_word_embeddings", True, "tie_word_embeddings=True"),
        (
            "rope_scaling",
            {"type": "yarn", "factor": 4.0},
            "rope_scaling.rope_type='yarn'",
        ),
        (
            "rope_scaling",
            {"type": "longrope", "short_factor": [1.0] * 4},
            "it lacks 'long_factor'",
        ),
        (
            "rope_scaling",
            {
                "type": "longrope",
                "short_factor": [1.0] * 4,
                "long_factor": [1.0] * 4,
                "attention_factor": 1.0,
            },
            "rope_scaling.attention_factor=1.0",
        ),
    ],
)
def test_unsupported_values_are_named(
    longrope_config, tmp_path, field, value, message
):
    with pytest.raises(PresetError, match=message.replace(".", r"\.")):
        _translate(tmp_path, dict(longrope_config, **{field: value}))


_WINDOW = 3


class TestPhi3SlidingWindowCheckpoints(OptionCheckpointTests):
    """Phi-3 mini 4k's `sliding_window` (every layer), 3 tokens wide here
    so that the 10-token inputs pass it."""

    @pytest.fixture(scope="class")
    @classmethod
    def written(cls, tmp_path_factory):
        return written_checkpoint(
            tmp_path_factory,
            TestPhi3Checkpoints.cases[0],
            options=dict(sliding_window=_WINDOW),
            fields=dict(sliding_window=_WINDOW),
            inputs=random_inputs(96, length=10),
        )

    def test_window_reach(self, written):
        """`transformers`' window: query `i` sees keys `i - w < j <= i`, so
        after two layers position 9 depends on tokens 5 to 9 and on no
        earlier one (a window one wider would reach token 3)."""
        rng = np.random.default_rng(5)
        base = rng.integers(1, 96, 10)
        rows = [base.copy() for _ in range(4)]
        for row, position in zip(rows[1:], (3, 4, 5), strict=True):
            row[position] = (row[position] % 95) + 1
        inputs = {
            "token_ids": np.stack(rows).astype("int32"),
            "padding_mask": np.ones((4, 10), "int32"),
        }
        last = output_arrays(written.expected(inputs))["sequence_output"]
        last = last[:, -1]
        reach = 2 * (_WINDOW - 1)
        for row, position in enumerate((3, 4, 5), start=1):
            changed = not np.array_equal(last[row], last[0])
            assert changed == (position >= 9 - reach), position


# Phi-3 mini 4k instruct's config.json (less `auto_map`).
_MINI_4K = {
    "architectures": ["Phi3ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 1,
    "embd_pdrop": 0.0,
    "eos_token_id": 32000,
    "hidden_act": "silu",
    "hidden_size": 3072,
    "initializer_range": 0.02,
    "intermediate_size": 8192,
    "max_position_embeddings": 4096,
    "model_type": "phi3",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "original_max_position_embeddings": 4096,
    "pad_token_id": 32000,
    "resid_pdrop": 0.0,
    "rms_norm_eps": 1e-05,
    "rope_scaling": None,
    "rope_theta": 10000.0,
    "sliding_window": 2047,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.40.2",
    "use_cache": True,
    "vocab_size": 32064,
}


def test_mini_4k_config_translates(tmp_path):
    config = _translate(tmp_path, _MINI_4K)
    assert config["sliding_window"] == 2047
    assert config["rope_scaling_type"] is None
    assert (config["num_layers"], config["hidden_dim"]) == (32, 3072)
    assert (
        _translate(tmp_path, dict(_MINI_4K, sliding_window=None))[
            "sliding_window"
        ]
        is None
    )
