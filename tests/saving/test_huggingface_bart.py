"""Hugging Face `bart` checkpoints against keras-hub's loader.

keras-hub has no BART exporter: the checkpoint is written from a keras-hub
backbone under the names keras-hub's `convert_bart` reads, as a
`BartForConditionalGeneration` checkpoint (`model.` prefix, position
tables with Hugging Face's two leading rows, and the tied embedding copies
and generation head the backbone skips).
"""

import numpy as np

from tests.models.backbone_checks import output_arrays
from tests.models.backbone_checks import random_inputs
from tests.saving.huggingface_checkpoints import HFCase
from tests.saving.huggingface_checkpoints import HuggingFaceFamilyTests
from tests.saving.huggingface_checkpoints import tensor_writer
from tests.saving.test_huggingface_bert import assert_config_refused
from tests.saving.test_huggingface_bert import dense_kernel
from tests.saving.test_huggingface_bert import heads_kernel
from tests.saving.test_huggingface_bert import numpy


def _config(oracle):
    return {
        "model_type": "bart",
        "architectures": ["BartForConditionalGeneration"],
        "vocab_size": oracle.vocabulary_size,
        "d_model": oracle.hidden_dim,
        "encoder_layers": oracle.num_layers,
        "decoder_layers": oracle.num_layers,
        "num_hidden_layers": oracle.num_layers,
        "encoder_attention_heads": oracle.num_heads,
        "decoder_attention_heads": oracle.num_heads,
        "encoder_ffn_dim": oracle.intermediate_dim,
        "decoder_ffn_dim": oracle.intermediate_dim,
        "activation_function": "gelu",
        "max_position_embeddings": oracle.max_sequence_length,
        "scale_embedding": False,
        "dropout": 0.1,
        "attention_dropout": 0.0,
        "activation_dropout": 0.0,
        "encoder_layerdrop": 0.0,
        "decoder_layerdrop": 0.0,
        "init_std": 0.02,
        "normalize_before": False,
        "add_final_layer_norm": False,
        "is_encoder_decoder": True,
        "pad_token_id": 1,
        "decoder_start_token_id": 2,
    }


def _attention(layer, prefix):
    output = numpy(layer.output_dense.kernel)
    tensors = {
        prefix + "out_proj.weight": output.reshape(-1, output.shape[-1]).T,
        prefix + "out_proj.bias": layer.output_dense.bias,
    }
    for name, proj in (("query", "q"), ("key", "k"), ("value", "v")):
        dense = getattr(layer, f"{name}_dense")
        tensors[prefix + f"{proj}_proj.weight"] = heads_kernel(dense)
        tensors[prefix + f"{proj}_proj.bias"] = numpy(dense.bias).reshape(-1)
    return tensors


def _norm(norm, prefix):
    return {prefix + ".weight": norm.gamma, prefix + ".bias": norm.beta}


def _block(block, prefix):
    return {
        **_attention(block._self_attention_layer, prefix + "self_attn."),
        **_norm(
            block._self_attention_layer_norm, prefix + "self_attn_layer_norm"
        ),
        prefix + "fc1.weight": dense_kernel(
            block._feedforward_intermediate_dense
        ),
        prefix + "fc1.bias": block._feedforward_intermediate_dense.bias,
        prefix + "fc2.weight": dense_kernel(block._feedforward_output_dense),
        prefix + "fc2.bias": block._feedforward_output_dense.bias,
        **_norm(block._feedforward_layer_norm, prefix + "final_layer_norm"),
    }


def _tensors(oracle):
    shared = numpy(oracle.token_embedding.embeddings)
    tensors = {
        "model.shared.weight": shared,
        # Hugging Face's tied copies and generation head.
        "model.encoder.embed_tokens.weight": shared,
        "model.decoder.embed_tokens.weight": shared,
        "lm_head.weight": shared,
        "final_logits_bias": np.zeros((1, oracle.vocabulary_size), "float32"),
    }
    for side in ("encoder", "decoder"):
        table = numpy(
            getattr(oracle, f"{side}_position_embedding").position_embeddings
        )
        zeros = np.zeros((2, table.shape[1]), "float32")
        tensors[f"model.{side}.embed_positions.weight"] = np.concatenate(
            [zeros, table]
        )
        tensors.update(
            _norm(
                getattr(oracle, f"{side}_embeddings_layer_norm"),
                f"model.{side}.layernorm_embedding",
            )
        )
    for i in range(oracle.num_layers):
        tensors.update(
            _block(
                oracle.encoder_transformer_layers[i],
                f"model.encoder.layers.{i}.",
            )
        )
        block = oracle.decoder_transformer_layers[i]
        prefix = f"model.decoder.layers.{i}."
        tensors.update(_block(block, prefix))
        tensors.update(
            _attention(block._cross_attention_layer, prefix + "encoder_attn.")
        )
        tensors.update(
            _norm(
                block._cross_attention_layer_norm,
                prefix + "encoder_attn_layer_norm",
            )
        )
    return tensors


def _inputs(vocabulary_size):
    encoder = random_inputs(vocabulary_size, batch=4, length=10, seed=0)
    decoder = random_inputs(vocabulary_size, batch=4, length=7, seed=1)
    return {
        "encoder_token_ids": encoder["token_ids"],
        "encoder_padding_mask": encoder["padding_mask"],
        "decoder_token_ids": decoder["token_ids"],
        "decoder_padding_mask": decoder["padding_mask"],
    }


def _outputs(inputs, outputs):
    """Both sides' outputs at their real tokens, as rows."""
    arrays = output_arrays(outputs)
    return np.concatenate(
        [
            arrays[f"{side}_sequence_output"][
                np.asarray(inputs[f"{side}_padding_mask"]).astype(bool)
            ]
            for side in ("encoder", "decoder")
        ]
    )


class TestBartCheckpoints(HuggingFaceFamilyTests):
    cases = [
        HFCase(
            "bart_conditional_generation",
            "BartBackbone",
            dict(
                vocabulary_size=64,
                num_layers=2,
                num_heads=4,
                hidden_dim=32,
                intermediate_dim=48,
                max_sequence_length=16,
            ),
            writer=tensor_writer(_config, _tensors),
            inputs=_inputs,
            outputs=_outputs,
        )
    ]
    meshes = ((2, 4),)


def test_bart_config_values_it_cannot_express_are_refused(tmp_path):
    base = dict(
        model_type="bart",
        vocab_size=64,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=48,
        decoder_ffn_dim=48,
    )
    refused = [
        ({"decoder_layers": 3}, "decoder_layers=3"),
        ({"decoder_ffn_dim": 64}, "decoder_ffn_dim=64"),
        ({"scale_embedding": True}, "scale_embedding=True"),
        ({"activation_function": "relu"}, "activation_function='relu'"),
    ]
    for patch, message in refused:
        assert_config_refused(tmp_path, {**base, **patch}, message)
