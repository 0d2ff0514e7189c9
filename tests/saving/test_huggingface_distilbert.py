"""Hugging Face `distilbert` checkpoints against keras-hub's loader.

keras-hub has no DistilBERT exporter: the checkpoint is written from a
keras-hub backbone under the names keras-hub's `convert_distilbert` reads,
as a `DistilBertForMaskedLM` checkpoint (`distilbert.` prefix, the
`vocab_*` head the backbone skips).
"""

import numpy as np

from tests.saving.huggingface_checkpoints import HFCase
from tests.saving.huggingface_checkpoints import HuggingFaceFamilyTests
from tests.saving.huggingface_checkpoints import tensor_writer
from tests.saving.test_huggingface_bert import dense_kernel
from tests.saving.test_huggingface_bert import heads_kernel
from tests.saving.test_huggingface_bert import numpy


def _config(oracle):
    return {
        "model_type": "distilbert",
        "architectures": ["DistilBertForMaskedLM"],
        "vocab_size": oracle.vocabulary_size,
        "n_layers": oracle.num_layers,
        "n_heads": oracle.num_heads,
        "dim": oracle.hidden_dim,
        "hidden_dim": oracle.intermediate_dim,
        "dropout": 0.1,
        "attention_dropout": 0.1,
        "activation": "gelu",
        "max_position_embeddings": oracle.max_sequence_length,
        "sinusoidal_pos_embds": False,
        "initializer_range": 0.02,
        "qa_dropout": 0.1,
        "seq_classif_dropout": 0.2,
        "pad_token_id": 0,
        "tie_weights_": True,
    }


def _tensors(oracle):
    embedding = oracle.get_layer("token_and_position_embedding")
    embeddings = "distilbert.embeddings."
    tensors = {
        embeddings + "word_embeddings.weight": (
            embedding.token_embedding.embeddings
        ),
        embeddings + "position_embeddings.weight": (
            embedding.position_embedding.position_embeddings
        ),
        embeddings + "LayerNorm.weight": oracle.embeddings_layer_norm.gamma,
        embeddings + "LayerNorm.bias": oracle.embeddings_layer_norm.beta,
        # The masked-LM head: not the backbone's.
        "vocab_transform.weight": np.eye(oracle.hidden_dim, dtype="float32"),
        "vocab_projector.bias": np.zeros(oracle.vocabulary_size, "float32"),
    }
    for i, block in enumerate(oracle.transformer_layers):
        layer = f"distilbert.transformer.layer.{i}."
        attention = block._self_attention_layer
        for ours, theirs in (("query", "q"), ("key", "k"), ("value", "v")):
            dense = getattr(attention, f"{ours}_dense")
            tensors[layer + f"attention.{theirs}_lin.weight"] = heads_kernel(
                dense
            )
            tensors[layer + f"attention.{theirs}_lin.bias"] = numpy(
                dense.bias
            ).reshape(-1)
        output = numpy(attention.output_dense.kernel)
        norms = (
            ("sa_layer_norm", block._self_attention_layer_norm),
            ("output_layer_norm", block._feedforward_layer_norm),
        )
        for name, norm in norms:
            tensors[layer + name + ".weight"] = norm.gamma
            tensors[layer + name + ".bias"] = norm.beta
        tensors.update(
            {
                layer + "attention.out_lin.weight": (
                    output.reshape(-1, output.shape[-1]).T
                ),
                layer + "attention.out_lin.bias": attention.output_dense.bias,
                layer + "ffn.lin1.weight": dense_kernel(
                    block._feedforward_intermediate_dense
                ),
                layer + "ffn.lin1.bias": (
                    block._feedforward_intermediate_dense.bias
                ),
                layer + "ffn.lin2.weight": dense_kernel(
                    block._feedforward_output_dense
                ),
                layer + "ffn.lin2.bias": block._feedforward_output_dense.bias,
            }
        )
    return tensors


class TestDistilBertCheckpoints(HuggingFaceFamilyTests):
    cases = [
        HFCase(
            "distilbert_masked_lm",
            "DistilBertBackbone",
            dict(
                vocabulary_size=64,
                num_layers=2,
                num_heads=4,
                hidden_dim=32,
                intermediate_dim=48,
                max_sequence_length=16,
            ),
            writer=tensor_writer(_config, _tensors),
        )
    ]
    meshes = ((2, 4),)
