"""Hugging Face `roberta` checkpoints against keras-hub's loader.

keras-hub has no RoBERTa exporter: the checkpoint is written from a
keras-hub backbone under the names keras-hub's `convert_roberta` reads, as
a `RobertaForMaskedLM` checkpoint (`roberta.` prefix, the `lm_head.*` the
backbone skips), its position table with Hugging Face's two leading rows
and a zero token-type table (keras-hub's loader ignores that table; the
original checkpoints hold zeros).
"""

import json
import warnings

import numpy as np
from safetensors.numpy import load_file

from keras_nlp.models import Backbone
from keras_nlp.saving.huggingface import huggingface_config
from tests.saving.huggingface_checkpoints import HFCase
from tests.saving.huggingface_checkpoints import HuggingFaceFamilyTests
from tests.saving.huggingface_checkpoints import assert_real_outputs_close
from tests.saving.huggingface_checkpoints import assert_same_weights
from tests.saving.huggingface_checkpoints import tensor_writer
from tests.saving.huggingface_checkpoints import write_directory
from tests.saving.test_huggingface_bert import assert_config_refused
from tests.saving.test_huggingface_bert import encoder_block_tensors
from tests.saving.test_huggingface_bert import encoder_config
from tests.saving.test_huggingface_bert import numpy

ROBERTA_CONFIG = dict(
    vocabulary_size=64,
    num_layers=2,
    num_heads=4,
    hidden_dim=32,
    intermediate_dim=48,
    max_sequence_length=16,
)


def roberta_config(model_type, architecture):
    def config(oracle):
        return encoder_config(
            oracle,
            model_type=model_type,
            architectures=[architecture],
            hidden_act="gelu",
            layer_norm_eps=1e-5,
            pad_token_id=1,
            max_position_embeddings=oracle.max_sequence_length + 2,
            type_vocab_size=1,
        )

    return config


def roberta_tensors(prefix, token_type, extra=None):
    """RoBERTa's tensors under `prefix`; `token_type(hidden)` is the
    token-type table; `extra(oracle)` more tensors."""

    def tensors(oracle):
        hidden = oracle.hidden_dim
        positions = numpy(
            oracle.embeddings.position_embedding.position_embeddings
        )
        padded = np.concatenate([np.zeros((2, hidden), "float32"), positions])
        embeddings = prefix + "embeddings."
        out = {
            embeddings + "word_embeddings.weight": (
                oracle.token_embedding.embeddings
            ),
            embeddings + "position_embeddings.weight": padded,
            embeddings + "token_type_embeddings.weight": token_type(hidden),
            embeddings + "LayerNorm.weight": oracle.embeddings_layer_norm.gamma,
            embeddings + "LayerNorm.bias": oracle.embeddings_layer_norm.beta,
        }
        for i, block in enumerate(oracle.transformer_layers):
            out.update(
                encoder_block_tensors(block, f"{prefix}encoder.layer.{i}.")
            )
        out.update(extra(oracle) if extra else {})
        return out

    return tensors


def _lm_head(oracle):
    rng = np.random.default_rng(2)
    hidden = oracle.hidden_dim
    return {
        "lm_head.dense.weight": rng.normal(size=(hidden, hidden)).astype(
            "float32"
        ),
        "lm_head.bias": np.zeros(oracle.vocabulary_size, "float32"),
    }


class TestRobertaCheckpoints(HuggingFaceFamilyTests):
    cases = [
        HFCase(
            "roberta_masked_lm",
            "RobertaBackbone",
            ROBERTA_CONFIG,
            writer=tensor_writer(
                roberta_config("roberta", "RobertaForMaskedLM"),
                roberta_tensors(
                    "roberta.",
                    lambda hidden: np.zeros((1, hidden), "float32"),
                    _lm_head,
                ),
            ),
        )
    ]
    meshes = ((2, 4),)

    def test_pooler_is_kept_and_written_back(self, case, checkpoint, tmp_path):
        # `RobertaModel`: the same checkpoint with a pooler, which the
        # backbone keeps (unused) and exports.
        path, _, inputs, expected = checkpoint
        rng = np.random.default_rng(4)
        hidden = case.config["hidden_dim"]
        pooler = {
            "roberta.pooler.dense.weight": rng.normal(
                size=(hidden, hidden)
            ).astype("float32"),
            "roberta.pooler.dense.bias": rng.normal(size=hidden).astype(
                "float32"
            ),
        }
        tensors = {**load_file(str(path / "model.safetensors")), **pooler}
        written = tmp_path / "roberta_model"
        config = json.loads((path / "config.json").read_text())
        write_directory(
            written, tensors, dict(config, architectures=["RobertaModel"])
        )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ours = Backbone.from_preset(str(written))
        assert not [w for w in caught if "pooler" in str(w.message)]
        assert ours.get_config()["keep_pooler"] is True
        np.testing.assert_array_equal(
            numpy(ours.pooled_dense.kernel),
            pooler["roberta.pooler.dense.weight"].T,
        )
        # The outputs do not use it.
        assert_real_outputs_close(case, inputs, ours, expected)
        ours.save_to_preset(str(tmp_path / "hf"), format="huggingface")
        exported = load_file(str(tmp_path / "hf" / "model.safetensors"))
        for name, value in tensors.items():
            if not name.startswith("lm_head."):
                np.testing.assert_array_equal(
                    exported[name], value, err_msg=name
                )
        again = Backbone.from_preset(str(tmp_path / "hf"))
        assert again.get_config()["keep_pooler"] is True
        assert_same_weights(again, ours)
        # The keras format keeps it too (a layer outside the graph).
        ours.save_to_preset(str(tmp_path / "keras"))
        assert_same_weights(Backbone.from_preset(str(tmp_path / "keras")), ours)


def test_roberta_position_offset_comes_from_the_padding_id(tmp_path):
    config = dict(
        model_type="roberta",
        vocab_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        hidden_size=32,
        intermediate_size=48,
        max_position_embeddings=514,
        layer_norm_eps=1e-5,
    )
    (tmp_path / "config.json").write_text(json.dumps(config))
    _, cls, arguments = huggingface_config(Backbone, str(tmp_path))
    assert cls.__name__ == "RobertaBackbone"
    assert arguments["max_sequence_length"] == 512
    assert_config_refused(
        tmp_path, {**config, "pad_token_id": 0}, "pad_token_id=0"
    )
