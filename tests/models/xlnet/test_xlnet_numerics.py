"""Numerical parity of keras_nlp's XLNet with keras-hub's (the oracle).

keras-hub 0.32.0 reshapes where it means to transpose (its relative
encoding and its padding mask), so a row's outputs depend on the other
rows of its batch. Ours computes every row on its own; the oracle is
therefore run one row at a time, where its layout is right, and compared
with ours on the whole batch, at every position (a padded query attends
to the real keys and itself, so its output is defined).
"""

import keras
import numpy as np
import pytest

from keras_nlp.models.xlnet import xlnet_layers
from keras_nlp.models.xlnet.xlnet_backbone import XLNetBackbone
from tests.models.backbone_checks import assert_dropout_in_training
from tests.models.backbone_checks import assert_outputs_close
from tests.models.backbone_checks import copy_weights_by_path
from tests.models.backbone_checks import output_arrays
from tests.models.backbone_checks import random_inputs
from tests.models.backbone_checks import unit_scale_oracle

VOCABULARY_SIZE = 96
# name -> (num_heads, hidden_dim): the tiny configs' 4 heads and
# xlnet_base_like's 12.
CASES = {"heads4": (4, 32), "heads12": (12, 96)}


def make_pair(name, seed=0, dropout=0.0):
    num_heads, hidden_dim = CASES[name]
    config = dict(
        vocabulary_size=VOCABULARY_SIZE,
        num_layers=2,
        num_heads=num_heads,
        hidden_dim=hidden_dim,
        intermediate_dim=64,
        dropout=dropout,
    )
    oracle = unit_scale_oracle("XLNetBackbone", config, seed)
    ours = XLNetBackbone(**config)
    copy_weights_by_path(oracle, ours)
    # Row 0 left-padded, row 1 with random segment ids.
    inputs = random_inputs(VOCABULARY_SIZE, batch=4, num_segments=2)
    return oracle, ours, inputs


def rows(inputs):
    batch = len(inputs["token_ids"])
    return [{k: v[b : b + 1] for k, v in inputs.items()} for b in range(batch)]


def assert_rows_match(ours, oracle, inputs, atol=1e-5):
    """Ours on the batch equals the oracle on each row, every position.

    Returns:
        The largest absolute difference.
    """
    actual = output_arrays(ours(inputs))["sequence_output"]
    differences = []
    for index, row in enumerate(rows(inputs)):
        expected = output_arrays(oracle(row))["sequence_output"][0]
        assert_outputs_close(actual[index], expected, atol=atol)
        differences.append(np.max(np.abs(actual[index] - expected)))
    return float(max(differences))


@pytest.mark.parametrize("name", list(CASES))
def test_matches_keras_hub(name):
    oracle, ours, inputs = make_pair(name)
    max_diff = assert_rows_match(ours, oracle, inputs)
    print(f"xlnet {name}: max |ours - keras_hub| = {max_diff:.3e}")


def test_rows_are_independent_unlike_keras_hubs_batches():
    """Ours: a row's outputs are the same alone or in a batch. keras-hub's
    batch of 4 differs from its rows (if this starts failing, keras-hub has
    fixed its layout and whole batches can be compared)."""
    oracle, ours, inputs = make_pair("heads4")
    batched = output_arrays(ours(inputs))["sequence_output"]
    oracle_batched = output_arrays(oracle(inputs))["sequence_output"]
    for index, row in enumerate(rows(inputs)):
        alone = output_arrays(ours(row))["sequence_output"][0]
        np.testing.assert_allclose(batched[index], alone, atol=1e-5, rtol=0)
    oracle_rows = np.stack(
        [
            output_arrays(oracle(row))["sequence_output"][0]
            for row in rows(inputs)
        ]
    )
    assert not np.allclose(oracle_batched, oracle_rows, atol=1e-3)


def test_training_mode_draws_dropout_masks():
    oracle, ours, inputs = make_pair("heads4", dropout=0.1)
    assert_dropout_in_training(ours, oracle, inputs)


def tanh_gelu(model, monkeypatch):
    for block in model.transformer_layers:
        block.intermediate_dense.activation = lambda x: keras.activations.gelu(
            x, approximate=True
        )


def offsets_reversed(model, monkeypatch):
    # Key minus query instead of query minus key: the sines change sign.
    encoding = xlnet_layers.relative_encoding

    def reversed_encoding(length, hidden_dim, dtype):
        rows = encoding(length, hidden_dim, dtype)
        half = hidden_dim // 2
        return keras.ops.concatenate([-rows[:, :half], rows[:, half:]], -1)

    monkeypatch.setattr(xlnet_layers, "relative_encoding", reversed_encoding)


def segments_swapped(model, monkeypatch):
    # "Same segment" and "different segment" encodings exchanged.
    for block in model.transformer_layers:
        encoding = keras.ops.convert_to_numpy(block.segment_encoding)
        block.segment_encoding.assign(encoding[::-1])


def padded_queries_do_not_see_themselves(model, monkeypatch):
    # BERT's mask: every query sees the real keys only.
    def real_keys(padding_mask):
        batch, length = keras.ops.shape(padding_mask)
        keys = keras.ops.cast(padding_mask, "bool")[:, None, :]
        return keras.ops.broadcast_to(keys, (batch, length, length))

    monkeypatch.setattr(model.attn_mask_layer, "call", real_keys)


def positional_bias_ignored(model, monkeypatch):
    for block in model.transformer_layers:
        bias = block.positional_attention_bias
        bias.assign(np.zeros(bias.shape, "float32"))


@pytest.mark.parametrize(
    "mistake",
    [
        tanh_gelu,
        offsets_reversed,
        segments_swapped,
        padded_queries_do_not_see_themselves,
        positional_bias_ignored,
    ],
)
def test_the_comparison_detects_mistakes(mistake, monkeypatch):
    """The check sees a wrong activation, offset sign, segment term, mask
    or a dropped per-head bias."""
    oracle, ours, inputs = make_pair("heads4")
    assert_rows_match(ours, oracle, inputs)
    mistake(ours, monkeypatch)
    with pytest.raises(AssertionError):
        assert_rows_match(ours, oracle, inputs)
