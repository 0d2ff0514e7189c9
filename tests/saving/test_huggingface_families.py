"""Hugging Face checkpoints of the Llama-style families against keras-hub.

See `tests/saving/huggingface_checkpoints.py`: each class below is the
whole test of a family; a case is one tiny checkpoint.
"""

from tests.saving.huggingface_checkpoints import HFCase
from tests.saving.huggingface_checkpoints import HuggingFaceFamilyTests
from tests.saving.huggingface_checkpoints import tensor_writer

_SMALL = dict(
    vocabulary_size=96, num_layers=2, hidden_dim=32, intermediate_dim=48
)


class TestLlamaCheckpoints(HuggingFaceFamilyTests):
    cases = [
        HFCase(
            "llama3_gqa",
            "Llama3Backbone",
            dict(_SMALL, num_query_heads=8, num_key_value_heads=2),
        ),
        # Llama 3.2: tied output embedding, Llama 3.1 RoPE scaling, its
        # 131072 positions (written back as read) and token ids, two of
        # them outside this vocabulary (written back as null).
        HFCase(
            "llama3_tied_rope_scaled",
            "Llama3Backbone",
            dict(
                _SMALL,
                num_query_heads=4,
                num_key_value_heads=4,
                tie_word_embeddings=True,
                rope_max_wavelength=500000,
                rope_frequency_adjustment_factor=8.0,
                rope_low_freq_factor=1.0,
                rope_high_freq_factor=4.0,
                rope_pretraining_sequence_length=4,
            ),
            config_patch={
                "max_position_embeddings": 131072,
                "bos_token_id": 128000,
                "eos_token_id": [1, 128009],
                "pad_token_id": None,
            },
        ),
    ]


class TestMistralCheckpoints(HuggingFaceFamilyTests):
    cases = [
        HFCase(
            "mistral_window",
            "MistralBackbone",
            dict(
                _SMALL,
                num_query_heads=8,
                num_key_value_heads=2,
                sliding_window=4,
            ),
        )
    ]


class TestQwen2Checkpoints(HuggingFaceFamilyTests):
    cases = [
        HFCase(
            "qwen2_tied",
            "QwenBackbone",
            dict(
                _SMALL,
                num_query_heads=8,
                num_key_value_heads=2,
                tie_word_embeddings=True,
            ),
            # keras-hub's exporter omits these; its loader requires them.
            config_patch={"use_sliding_window": False, "sliding_window": 32768},
        )
    ]


def _qwen3_config(oracle):
    return {
        "model_type": "qwen3",
        "architectures": ["Qwen3ForCausalLM"],
        "vocab_size": oracle.vocabulary_size,
        "num_hidden_layers": oracle.num_layers,
        "num_attention_heads": oracle.num_query_heads,
        "num_key_value_heads": oracle.num_key_value_heads,
        "head_dim": oracle.head_dim,
        "hidden_size": oracle.hidden_dim,
        "intermediate_size": oracle.intermediate_dim,
        "rms_norm_eps": oracle.layer_norm_epsilon,
        "rope_theta": oracle.rope_max_wavelength,
        "use_sliding_window": False,
        "sliding_window": None,
        "max_window_layers": oracle.num_layers,
        "tie_word_embeddings": oracle.tie_word_embeddings,
        "hidden_act": "silu",
        "attention_bias": False,
        "torch_dtype": "float32",
    }


def _qwen3_tensors(oracle):
    """Named as keras-hub's `convert_qwen3` reads them (PyTorch layouts)."""
    tensors = {
        "model.embed_tokens.weight": oracle.token_embedding.embeddings,
        "model.norm.weight": oracle.layer_norm.scale,
    }
    if not oracle.tie_word_embeddings:
        tensors["lm_head.weight"] = (
            oracle.token_embedding.reverse_embeddings.numpy().T
        )
    for i, layer in enumerate(oracle.transformer_layers):
        prefix = f"model.layers.{i}."
        attention = layer._self_attention_layer
        hidden = oracle.hidden_dim
        tensors.update(
            {
                prefix + "input_layernorm.weight": (
                    layer._self_attention_layernorm.scale
                ),
                prefix + "post_attention_layernorm.weight": (
                    layer._feedforward_layernorm.scale
                ),
                prefix + "self_attn.q_norm.weight": (
                    attention._query_dense_layer_norm.scale
                ),
                prefix + "self_attn.k_norm.weight": (
                    attention._key_dense_layer_norm.scale
                ),
                prefix + "mlp.gate_proj.weight": (
                    layer._feedforward_gate_dense.kernel.numpy().T
                ),
                prefix + "mlp.up_proj.weight": (
                    layer._feedforward_intermediate_dense.kernel.numpy().T
                ),
                prefix + "mlp.down_proj.weight": (
                    layer._feedforward_output_dense.kernel.numpy().T
                ),
                prefix + "self_attn.o_proj.weight": (
                    attention._output_dense.kernel.numpy().reshape(-1, hidden).T
                ),
            }
        )
        for name, dense in (
            ("q", attention._query_dense),
            ("k", attention._key_dense),
            ("v", attention._value_dense),
        ):
            kernel = dense.kernel.numpy().reshape(hidden, -1)
            tensors[prefix + f"self_attn.{name}_proj.weight"] = kernel.T
    return tensors


class TestQwen3Checkpoints(HuggingFaceFamilyTests):
    cases = [
        HFCase(
            "qwen3_untied",
            "Qwen3Backbone",
            dict(
                _SMALL,
                num_query_heads=4,
                num_key_value_heads=2,
                head_dim=16,
                tie_word_embeddings=False,
            ),
            writer=tensor_writer(_qwen3_config, _qwen3_tensors),
        )
    ]
