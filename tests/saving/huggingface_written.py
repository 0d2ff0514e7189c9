"""Oracle checks for families keras-hub has no Hugging Face loader for.

Phi-3, OPT, GPT-NeoX, Bloom and Falcon have keras-hub backbones but no
keras-hub converter from Hugging Face checkpoints (and `transformers` is
not installed here). Their checkpoints are written from a random keras-hub
backbone by `tensor_writer`, each tensor built by hand with Hugging Face's
names and layouts (the facts: `transformers`' modeling code and keras-hub's
`tools/checkpoint_conversion` scripts); that keras-hub model itself is the
oracle. So, per case:

- ours loads the checkpoint: every weight equals keras-hub's and the
  outputs agree (keras-hub's implementation, not ours, computes them);
- the same into the shards of each mesh;
- ours -> `save_to_preset(format="huggingface")` -> ours is bit-identical,
  the export holds every tensor of the written checkpoint bit for bit (so
  the table's export direction writes Hugging Face's layouts too) and its
  `config.json` agrees with the written one on every field both have
  (token ids as `assert_exported_fields` says).
"""

import json

import numpy as np
import pytest
from safetensors.numpy import load_file

from keras_nlp.models import Backbone
from tests.models.backbone_checks import random_inputs
from tests.saving.huggingface_checkpoints import HuggingFaceFamilyTests
from tests.saving.huggingface_checkpoints import assert_exported_fields
from tests.saving.huggingface_checkpoints import assert_same_weights
from tests.saving.huggingface_checkpoints import real_outputs
from tests.saving.huggingface_checkpoints import write_checkpoint


class WrittenCheckpointTests(HuggingFaceFamilyTests):
    """`HuggingFaceFamilyTests` with the writing keras-hub model as oracle.

    Every case needs a `writer` (`tensor_writer`). `export_rows` maps a
    tensor name to the slice of its rows our export reproduces, for tensors
    holding rows our backbone has no variable for (OPT's two unused
    position rows, written back as zeros). `export_fields_differ` names
    `config.json` fields the export may write otherwise (a window that never
    applies, written as none).
    """

    export_rows = {}
    export_fields_differ = ()

    @pytest.fixture(scope="class")
    @classmethod
    def checkpoint(cls, case, tmp_path_factory):
        path = tmp_path_factory.mktemp(case.name)
        theirs = write_checkpoint(case, path)
        inputs = random_inputs(case.config["vocabulary_size"], length=10)
        expected = real_outputs(inputs, theirs(inputs))
        return path, theirs, inputs, expected

    def test_round_trip_is_bit_identical(self, case, checkpoint, tmp_path):
        path, _, inputs, expected = checkpoint
        ours = Backbone.from_preset(str(path))
        exported = tmp_path / "hf"
        ours.save_to_preset(str(exported), format="huggingface")
        again = Backbone.from_preset(str(exported))
        assert type(again) is type(ours)
        assert_same_weights(again, ours)
        np.testing.assert_allclose(
            real_outputs(inputs, again(inputs)),
            expected,
            atol=case.atol,
            rtol=case.atol,
        )
        written = load_file(str(path / "model.safetensors"))
        rewritten = load_file(str(exported / "model.safetensors"))
        assert sorted(rewritten) == sorted(written)
        for name, value in written.items():
            rows = self.export_rows.get(name, slice(None))
            np.testing.assert_array_equal(
                rewritten[name][rows], value[rows], err_msg=name
            )
        fields = json.loads((path / "config.json").read_text())
        exported_fields = json.loads((exported / "config.json").read_text())
        assert_exported_fields(
            fields, exported_fields, case.config["vocabulary_size"]
        )
        for key in sorted(set(fields) & set(exported_fields)):
            skipped = (
                "architectures",
                "torch_dtype",
                "bos_token_id",
                "eos_token_id",
                "pad_token_id",
                *self.export_fields_differ,
            )
            if key not in skipped:
                assert exported_fields[key] == fields[key], key


def per_head_fused(denses, heads):
    """`transformers`' fused `query_key_value` `(weight, bias)` of BLOOM
    and Falcon-RW from three keras-hub `(hidden, heads, head_dim)` query,
    key and value projections: row `(h * 3 + j) * head_dim + d` is head
    `h`'s row `d` of projection `j`."""
    hidden = denses[0].kernel.shape[0]
    head_dim = hidden // heads
    weight = np.empty((heads, 3, head_dim, hidden), "float32")
    bias = np.empty((heads, 3, head_dim), "float32")
    for j, dense in enumerate(denses):
        weight[:, j] = np.transpose(dense.kernel.numpy(), (1, 2, 0))
        bias[:, j] = dense.bias.numpy()
    return weight.reshape(3 * hidden, hidden), bias.reshape(3 * hidden)
