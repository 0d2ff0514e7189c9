"""Hugging Face `bert` checkpoints against keras-hub's loader.

keras-hub has no BERT exporter: the checkpoint is written from a keras-hub
backbone under the names keras-hub's `convert_bert` reads (PyTorch
layouts), as a `BertForPreTraining` checkpoint: `bert.` prefix, the
pretraining heads (`cls.*`) and the `position_ids` buffer, which a
backbone ignores, and TensorFlow-era `gamma`/`beta` LayerNorm names. Its
`hidden_act` is the tanh GELU keras-hub computes; the exact `"gelu"` of
Hugging Face's BERTs, which keras-hub's backbone cannot express, loads into
our `hidden_activation="gelu"` (`tests/saving/huggingface_options.py`).
"""

import json
import warnings

import keras
import numpy as np
import pytest
from safetensors.numpy import load_file

from keras_nlp.models import Backbone
from keras_nlp.saving.huggingface import huggingface_config
from keras_nlp.saving.preset_files import PresetError
from tests.models.backbone_checks import output_arrays
from tests.models.backbone_checks import random_inputs
from tests.saving.huggingface_checkpoints import HFCase
from tests.saving.huggingface_checkpoints import HuggingFaceFamilyTests
from tests.saving.huggingface_checkpoints import assert_same_weights
from tests.saving.huggingface_checkpoints import real_outputs
from tests.saving.huggingface_checkpoints import tensor_writer
from tests.saving.huggingface_checkpoints import write_directory
from tests.saving.huggingface_options import OptionCheckpointTests
from tests.saving.huggingface_options import assert_feedforward_is_erf_gelu
from tests.saving.huggingface_options import written_checkpoint


def numpy(variable):
    return keras.ops.convert_to_numpy(variable)


def heads_kernel(dense):
    """A `(hidden, heads, head_dim)` kernel as PyTorch's `(out, in)`."""
    kernel = numpy(dense.kernel)
    return kernel.reshape(kernel.shape[0], -1).T


def dense_kernel(dense):
    return numpy(dense.kernel).T


def encoder_block_tensors(block, prefix, gamma="weight", beta="bias"):
    """A keras-hub `TransformerEncoder`'s tensors under BERT's names."""
    attention = block._self_attention_layer
    output = numpy(attention.output_dense.kernel)
    tensors = {
        prefix + "attention.output.dense.weight": (
            output.reshape(-1, output.shape[-1]).T
        ),
        prefix + "attention.output.dense.bias": attention.output_dense.bias,
        prefix + f"attention.output.LayerNorm.{gamma}": (
            block._self_attention_layer_norm.gamma
        ),
        prefix + f"attention.output.LayerNorm.{beta}": (
            block._self_attention_layer_norm.beta
        ),
        prefix + "intermediate.dense.weight": dense_kernel(
            block._feedforward_intermediate_dense
        ),
        prefix + "intermediate.dense.bias": (
            block._feedforward_intermediate_dense.bias
        ),
        prefix + "output.dense.weight": dense_kernel(
            block._feedforward_output_dense
        ),
        prefix + "output.dense.bias": block._feedforward_output_dense.bias,
        prefix + f"output.LayerNorm.{gamma}": (
            block._feedforward_layer_norm.gamma
        ),
        prefix + f"output.LayerNorm.{beta}": block._feedforward_layer_norm.beta,
    }
    for name in ("query", "key", "value"):
        dense = getattr(attention, f"{name}_dense")
        tensors[prefix + f"attention.self.{name}.weight"] = heads_kernel(dense)
        tensors[prefix + f"attention.self.{name}.bias"] = numpy(
            dense.bias
        ).reshape(-1)
    return tensors


def encoder_config(oracle, **fields):
    """The `config.json` fields BERT-style encoders share."""
    return {
        "vocab_size": oracle.vocabulary_size,
        "num_hidden_layers": oracle.num_layers,
        "num_attention_heads": oracle.num_heads,
        "hidden_size": oracle.hidden_dim,
        "intermediate_size": oracle.intermediate_dim,
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "initializer_range": 0.02,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "torch_dtype": "float32",
        "transformers_version": "4.40.0",
        **fields,
    }


def segment_inputs(vocabulary_size):
    return random_inputs(vocabulary_size, length=10, num_segments=2)


def sequence_and_pooled(inputs, outputs):
    """The real tokens' outputs and the pooled outputs, as rows."""
    pooled = output_arrays(outputs)["pooled_output"]
    return np.concatenate([real_outputs(inputs, outputs), pooled])


def _bert_config(oracle):
    return encoder_config(
        oracle,
        model_type="bert",
        architectures=["BertForPreTraining"],
        hidden_act="gelu_new",
        layer_norm_eps=1e-12,
        max_position_embeddings=oracle.max_sequence_length,
        type_vocab_size=oracle.num_segments,
        use_cache=True,
        classifier_dropout=None,
    )


def _bert_tensors(oracle):
    rng = np.random.default_rng(1)
    hidden = oracle.hidden_dim
    embeddings = "bert.embeddings."
    tensors = {
        embeddings + "word_embeddings.weight": (
            oracle.get_layer("token_embedding").embeddings
        ),
        embeddings + "position_embeddings.weight": (
            oracle.get_layer("position_embedding").position_embeddings
        ),
        embeddings + "token_type_embeddings.weight": (
            oracle.get_layer("segment_embedding").embeddings
        ),
        embeddings + "LayerNorm.gamma": (
            oracle.get_layer("embeddings_layer_norm").gamma
        ),
        embeddings + "LayerNorm.beta": (
            oracle.get_layer("embeddings_layer_norm").beta
        ),
        embeddings + "position_ids": np.arange(
            oracle.max_sequence_length, dtype="int64"
        )[None],
        "bert.pooler.dense.weight": dense_kernel(
            oracle.get_layer("pooled_dense")
        ),
        "bert.pooler.dense.bias": oracle.get_layer("pooled_dense").bias,
        # The pretraining heads: not the backbone's.
        "cls.predictions.bias": np.zeros(oracle.vocabulary_size, "float32"),
        "cls.predictions.transform.dense.weight": rng.normal(
            size=(hidden, hidden)
        ).astype("float32"),
        "cls.seq_relationship.weight": rng.normal(size=(2, hidden)).astype(
            "float32"
        ),
    }
    for i in range(oracle.num_layers):
        tensors.update(
            encoder_block_tensors(
                oracle.get_layer(f"transformer_layer_{i}"),
                f"bert.encoder.layer.{i}.",
                gamma="gamma",
                beta="beta",
            )
        )
    return tensors


class TestBertCheckpoints(HuggingFaceFamilyTests):
    cases = [
        HFCase(
            "bert_pretraining",
            "BertBackbone",
            dict(
                vocabulary_size=64,
                num_layers=2,
                num_heads=4,
                hidden_dim=32,
                intermediate_dim=48,
                max_sequence_length=16,
                num_segments=2,
            ),
            writer=tensor_writer(_bert_config, _bert_tensors),
            inputs=segment_inputs,
            outputs=sequence_and_pooled,
        )
    ]

    def test_masked_lm_has_no_pooler(self, case, checkpoint, tmp_path):
        # `BertForMaskedLM`: the same checkpoint without the pooler (and
        # the next-sentence head).
        path, _, inputs, expected = checkpoint
        stored = load_file(str(path / "model.safetensors"))
        tensors = {
            name: value
            for name, value in stored.items()
            if not name.startswith(("bert.pooler.", "cls.seq_relationship."))
        }
        written = tmp_path / "masked_lm"
        config = json.loads((path / "config.json").read_text())
        write_directory(
            written, tensors, dict(config, architectures=["BertForMaskedLM"])
        )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ours = Backbone.from_preset(str(written))
        said = [str(w.message) for w in caught if "pooler" in str(w.message)]
        assert len(said) == 1
        assert "bert.pooler.dense.weight" in said[0]
        assert "pooled_dense/kernel" in said[0]
        # Created as the class creates it: zero bias, random kernel.
        pooler = ours.get_layer("pooled_dense")
        np.testing.assert_array_equal(numpy(pooler.bias), 0.0)
        assert numpy(pooler.kernel).std() > 0.01
        batch = len(inputs["token_ids"])
        np.testing.assert_allclose(
            real_outputs(inputs, ours(inputs)),
            expected[:-batch],
            atol=case.atol,
            rtol=case.atol,
        )
        # Every backbone tensor read is written back, bit for bit
        # (LayerNorm under current names), and the pooler the class has.
        ours.save_to_preset(str(tmp_path / "hf"), format="huggingface")
        exported = load_file(str(tmp_path / "hf" / "model.safetensors"))
        for name, value in tensors.items():
            if name.startswith("cls.") or name.endswith("position_ids"):
                continue
            name = name.replace("LayerNorm.gamma", "LayerNorm.weight")
            name = name.replace("LayerNorm.beta", "LayerNorm.bias")
            np.testing.assert_array_equal(exported[name], value, err_msg=name)
        np.testing.assert_array_equal(
            exported["bert.pooler.dense.weight"], numpy(pooler.kernel).T
        )
        assert_same_weights(Backbone.from_preset(str(tmp_path / "hf")), ours)


class ExactGeluEncoderTests(OptionCheckpointTests):
    """`hidden_act="gelu"`, the exact GELU, in the checkpoint of `source`
    (an `HFCase` of a BERT-style family with segment inputs)."""

    source = None
    # Export drops the pretraining heads (and renames BERT's old
    # `gamma`/`beta`).
    exports_every_tensor = False

    @pytest.fixture(scope="class")
    @classmethod
    def written(cls, tmp_path_factory):
        return written_checkpoint(
            tmp_path_factory,
            cls.source,
            options=dict(hidden_activation="gelu"),
            fields=dict(hidden_act="gelu"),
            inputs=segment_inputs(cls.source.config["vocabulary_size"]),
            compared=sequence_and_pooled,
        )

    def test_feedforward_is_the_exact_gelu(self, written):
        # ALBERT's blocks share weights: each is checked.
        for block in written.expected.transformer_layers:
            assert_feedforward_is_erf_gelu(
                block,
                lambda x, b=block: b.output_dense(b.intermediate_dense(x)),
            )


class TestExactGeluBertCheckpoints(ExactGeluEncoderTests):
    """Hugging Face's BERT: `hidden_act="gelu"`, the exact GELU."""

    source = TestBertCheckpoints.cases[0]


def test_bert_gelus_translate_without_warning(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(_BERT_BASE))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # Absent: `BertConfig`'s default, the exact GELU.
        config = huggingface_config(Backbone, str(tmp_path))[2]
    assert config["hidden_activation"] == "gelu"
    for hidden_act, ours in [
        ("gelu", "gelu"),
        ("gelu_new", "gelu_approximate"),
        ("gelu_pytorch_tanh", "gelu_approximate"),
    ]:
        fields = dict(_BERT_BASE, hidden_act=hidden_act)
        (tmp_path / "config.json").write_text(json.dumps(fields))
        config = huggingface_config(Backbone, str(tmp_path))[2]
        assert config["hidden_activation"] == ours, hidden_act


def assert_config_refused(tmp_path, config, message):
    """`config.json` alone is refused, naming the field and value."""
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(PresetError, match=message):
        huggingface_config(Backbone, str(tmp_path))


_BERT_BASE = dict(
    model_type="bert",
    vocab_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    hidden_size=32,
    intermediate_size=48,
)


def test_bert_config_values_it_cannot_express_are_refused(tmp_path):
    refused = [
        ({"position_embedding_type": "relative_key"}, "relative_key"),
        ({"is_decoder": True}, "is_decoder=True"),
        ({"layer_norm_eps": 1e-5}, "layer_norm_eps=1e-05"),
        ({"hidden_act": "relu"}, "hidden_act='relu'"),
        ({"rotary_dim": 8}, r"\['rotary_dim'\] are not understood"),
    ]
    for patch, message in refused:
        assert_config_refused(tmp_path, {**_BERT_BASE, **patch}, message)
