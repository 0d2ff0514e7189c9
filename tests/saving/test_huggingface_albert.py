"""Hugging Face `albert` checkpoints against keras-hub's loader.

keras-hub has no ALBERT exporter: the checkpoint is written from a
keras-hub backbone under the names keras-hub's `convert_albert` reads, as
an `AlbertForPreTraining` checkpoint (`albert.` prefix, the heads the
backbone skips). Two groups of two shared blocks, each group running for
two of the four layers. `hidden_act="gelu"` (the exact GELU), which
keras-hub's backbone cannot express, loads into our
`hidden_activation="gelu"` (`tests/saving/huggingface_options.py`).
"""

import numpy as np

from tests.saving.huggingface_checkpoints import HFCase
from tests.saving.huggingface_checkpoints import HuggingFaceFamilyTests
from tests.saving.huggingface_checkpoints import tensor_writer
from tests.saving.test_huggingface_bert import ExactGeluEncoderTests
from tests.saving.test_huggingface_bert import assert_config_refused
from tests.saving.test_huggingface_bert import dense_kernel
from tests.saving.test_huggingface_bert import encoder_config
from tests.saving.test_huggingface_bert import heads_kernel
from tests.saving.test_huggingface_bert import numpy
from tests.saving.test_huggingface_bert import segment_inputs
from tests.saving.test_huggingface_bert import sequence_and_pooled


def _config(oracle):
    return encoder_config(
        oracle,
        model_type="albert",
        architectures=["AlbertForPreTraining"],
        hidden_act="gelu_new",
        layer_norm_eps=1e-12,
        embedding_size=oracle.embedding_dim,
        num_hidden_groups=oracle.num_groups,
        inner_group_num=oracle.num_inner_repetitions,
        max_position_embeddings=oracle.max_sequence_length,
        type_vocab_size=oracle.num_segments,
        classifier_dropout_prob=0.1,
        down_scale_factor=1,
        gap_size=0,
        net_structure_type=0,
        num_memory_blocks=0,
    )


def _block(block, prefix):
    attention = block._self_attention_layer
    output = numpy(attention.output_dense.kernel)
    tensors = {
        prefix + "attention.dense.weight": (
            output.reshape(-1, output.shape[-1]).T
        ),
        prefix + "attention.dense.bias": attention.output_dense.bias,
        prefix + "attention.LayerNorm.weight": (
            block._self_attention_layer_norm.gamma
        ),
        prefix + "attention.LayerNorm.bias": (
            block._self_attention_layer_norm.beta
        ),
        prefix + "ffn.weight": dense_kernel(
            block._feedforward_intermediate_dense
        ),
        prefix + "ffn.bias": block._feedforward_intermediate_dense.bias,
        prefix + "ffn_output.weight": dense_kernel(
            block._feedforward_output_dense
        ),
        prefix + "ffn_output.bias": block._feedforward_output_dense.bias,
        prefix + "full_layer_layer_norm.weight": (
            block._feedforward_layer_norm.gamma
        ),
        prefix + "full_layer_layer_norm.bias": (
            block._feedforward_layer_norm.beta
        ),
    }
    for name in ("query", "key", "value"):
        dense = getattr(attention, f"{name}_dense")
        tensors[prefix + f"attention.{name}.weight"] = heads_kernel(dense)
        tensors[prefix + f"attention.{name}.bias"] = numpy(dense.bias).reshape(
            -1
        )
    return tensors


def _tensors(oracle):
    embeddings = "albert.embeddings."
    tensors = {
        embeddings
        + "word_embeddings.weight": oracle.token_embedding.embeddings,
        embeddings + "position_embeddings.weight": (
            oracle.position_embedding.position_embeddings
        ),
        embeddings + "token_type_embeddings.weight": (
            oracle.segment_embedding.embeddings
        ),
        embeddings + "LayerNorm.weight": oracle.embeddings_layer_norm.gamma,
        embeddings + "LayerNorm.bias": oracle.embeddings_layer_norm.beta,
        "albert.encoder.embedding_hidden_mapping_in.weight": dense_kernel(
            oracle.embeddings_projection
        ),
        "albert.encoder.embedding_hidden_mapping_in.bias": (
            oracle.embeddings_projection.bias
        ),
        "albert.pooler.weight": dense_kernel(oracle.pooled_dense),
        "albert.pooler.bias": oracle.pooled_dense.bias,
        # The pretraining heads: not the backbone's.
        "predictions.bias": np.zeros(oracle.vocabulary_size, "float32"),
        "sop_classifier.classifier.weight": np.ones(
            (2, oracle.hidden_dim), "float32"
        ),
    }
    for g in range(oracle.num_groups):
        for j in range(oracle.num_inner_repetitions):
            tensors.update(
                _block(
                    oracle.get_layer(f"group_{g}_inner_layer_{j}"),
                    f"albert.encoder.albert_layer_groups.{g}.albert_layers.{j}.",
                )
            )
    return tensors


class TestAlbertCheckpoints(HuggingFaceFamilyTests):
    cases = [
        HFCase(
            "albert_shared_groups",
            "AlbertBackbone",
            dict(
                vocabulary_size=64,
                num_layers=4,
                num_heads=4,
                embedding_dim=16,
                hidden_dim=32,
                intermediate_dim=48,
                num_groups=2,
                num_inner_repetitions=2,
                max_sequence_length=16,
            ),
            writer=tensor_writer(_config, _tensors),
            inputs=segment_inputs,
            outputs=sequence_and_pooled,
        )
    ]
    meshes = ((2, 4),)


class TestExactGeluAlbertCheckpoints(ExactGeluEncoderTests):
    """`hidden_act="gelu"`, the exact GELU, in the shared blocks."""

    source = TestAlbertCheckpoints.cases[0]


def test_albert_groups_must_divide_the_layers(tmp_path):
    config = dict(
        model_type="albert",
        vocab_size=64,
        num_hidden_layers=3,
        num_hidden_groups=2,
        num_attention_heads=4,
        hidden_size=32,
        intermediate_size=48,
    )
    assert_config_refused(tmp_path, config, "num_hidden_groups=2")
