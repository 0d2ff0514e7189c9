"""Tests shared by GPT-2 and OPT, which have the same blocks and shapes.

Each test runs for both classes (the `family` parameter); only the
embedding paths, the default sequence length and the initializer differ.
Model-specific tests (presets, parameter counts) stay in each model's file.
"""

import dataclasses

import numpy as np
import pytest
from keras import ops

from keras_nlp.models.gpt2.gpt2_backbone import GPT2Backbone
from keras_nlp.models.opt.opt_backbone import OPTBackbone

TINY = dict(
    vocabulary_size=97,
    num_layers=2,
    num_heads=4,
    hidden_dim=32,
    intermediate_dim=48,
    dropout=0.0,
    max_sequence_length=16,
)
INPUTS = {
    "token_ids": np.array([[5, 9, 2, 7, 1], [0, 0, 3, 4, 8]], "int32"),
    "padding_mask": np.array([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]], "int32"),
}
# A left-padded query attends to no key: its output is undefined (here an
# average of all values), so only real tokens are compared.
REAL = INPUTS["padding_mask"].astype(bool)


@dataclasses.dataclass(frozen=True)
class Family:
    backbone_cls: type
    # Where the token and position tables live ("" or "embeddings/").
    embedding_prefix: str
    default_max_sequence_length: int
    # Initial kernel std bounds (RandomNormal vs TruncatedNormal, 0.02).
    kernel_std: tuple

    def position_table(self, model):
        if self.embedding_prefix:
            return model.embeddings.position_embedding.embeddings
        return model.position_embedding.embeddings


GPT2 = Family(GPT2Backbone, "", 1024, (0.01, 0.03))
# TruncatedNormal(stddev=0.02) cuts at two deviations.
OPT = Family(OPTBackbone, "embeddings/", 2048, (0.01, 0.02))


def expected_paths(num_layers, V=97, P=16, H=32, N=4, F=48, prefix=""):
    paths = {
        f"{prefix}token_embedding/embeddings": (V, H),
        f"{prefix}position_embedding/embeddings": (P, H),
    }
    for i in range(num_layers):
        block = f"transformer_layer_{i}"
        attention = f"{block}/self_attention"
        for kind in ("query", "key", "value"):
            paths[f"{attention}/{kind}/kernel"] = (H, N, H // N)
            paths[f"{attention}/{kind}/bias"] = (N, H // N)
        paths[f"{attention}/attention_output/kernel"] = (N, H // N, H)
        paths[f"{attention}/attention_output/bias"] = (H,)
        for norm in ("self_attention_layer_norm", "feedforward_layer_norm"):
            paths[f"{block}/{norm}/gamma"] = (H,)
            paths[f"{block}/{norm}/beta"] = (H,)
        paths[f"{block}/feedforward_intermediate_dense/kernel"] = (H, F)
        paths[f"{block}/feedforward_intermediate_dense/bias"] = (F,)
        paths[f"{block}/feedforward_output_dense/kernel"] = (F, H)
        paths[f"{block}/feedforward_output_dense/bias"] = (H,)
    paths["layer_norm/gamma"] = (H,)
    paths["layer_norm/beta"] = (H,)
    return paths


def block_params(H, F):
    attention = 4 * (H * H + H)  # q, k, v, output kernels and biases
    layer_norms = 2 * 2 * H
    mlp = H * F + F + F * H + H
    return attention + layer_norms + mlp


def full_params(V, P, L, H, F):
    # Tied token table, position table, blocks, final layer norm.
    return V * H + P * H + L * block_params(H, F) + 2 * H


@pytest.fixture(params=[GPT2, OPT], ids=["gpt2", "opt"])
def family(request):
    return request.param


def test_variable_paths_and_shapes(family):
    model = family.backbone_cls(**TINY)
    actual = {v.path: tuple(v.shape) for v in model.weights}
    assert actual == expected_paths(2, prefix=family.embedding_prefix)
    assert len(model.weights) == len(actual)  # no duplicate paths
    assert model.count_params() == full_params(97, 16, 2, 32, 48)


def test_defaults_are_keras_hubs(family):
    model = family.backbone_cls(
        vocabulary_size=10,
        num_layers=1,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
    )
    assert model.dropout == 0.1
    assert model.max_sequence_length == family.default_max_sequence_length


def test_tied_logits(family):
    model = family.backbone_cls(**TINY)
    hidden = model(INPUTS)
    logits = ops.convert_to_numpy(model.token_embedding(hidden, reverse=True))
    table = ops.convert_to_numpy(model.token_embedding.embeddings)
    assert logits.shape == (2, 5, 97)
    np.testing.assert_allclose(
        logits, ops.convert_to_numpy(hidden) @ table.T, atol=1e-5
    )


def test_initial_weights_differ_between_kernels(family):
    model = family.backbone_cls(**TINY)
    kernels = [
        ops.convert_to_numpy(v)
        for v in model.weights
        if v.path.endswith("/kernel") and "self_attention/" in v.path
    ]
    assert len(kernels) == 8
    for i, first in enumerate(kernels):
        for second in kernels[i + 1 :]:
            assert first.shape != second.shape or not np.allclose(first, second)
    for kernel in kernels:
        low, high = family.kernel_std
        assert low < kernel.std() < high


def test_positions_count_from_the_first_token(family):
    model = family.backbone_cls(**TINY)
    # Swapping two position rows changes exactly the outputs from the
    # earlier of the two positions onward.
    table = family.position_table(model)
    values = ops.convert_to_numpy(table).copy()
    before = ops.convert_to_numpy(model(INPUTS))
    values[[3, 4]] = values[[4, 3]]
    table.assign(values)
    after = ops.convert_to_numpy(model(INPUTS))
    earlier = REAL.copy()
    earlier[:, 3:] = False
    np.testing.assert_array_equal(before[earlier], after[earlier])
    for row in range(2):
        assert not np.allclose(before[row, 3:], after[row, 3:])


@pytest.mark.parametrize(
    "override, words",
    [
        ({"num_heads": 5}, ["hidden_dim=32", "num_heads=5", "divisible"]),
        ({"num_layers": 0}, ["num_layers=0", "positive integer"]),
        ({"vocabulary_size": 12.5}, ["vocabulary_size=12.5", "positive"]),
        ({"num_heads": True}, ["num_heads=True", "positive integer"]),
        (
            {"max_sequence_length": None},
            ["max_sequence_length=None", "positive integer"],
        ),
        ({"dropout": 1.0}, ["dropout=1.0", "[0, 1)"]),
    ],
)
def test_invalid_arguments(family, override, words):
    with pytest.raises(ValueError) as error:
        family.backbone_cls(**{**TINY, **override})
    for word in words:
        assert word in str(error.value)


def test_training_with_dropout(family):
    model = family.backbone_cls(**{**TINY, "dropout": 0.3})
    train = ops.convert_to_numpy(model(INPUTS, training=True))
    infer = ops.convert_to_numpy(model(INPUTS, training=False))
    assert train.shape == infer.shape == (2, 5, 32)
    assert np.all(np.isfinite(train))
    assert not np.allclose(train, infer)  # dropout is active in training
    np.testing.assert_array_equal(
        infer, ops.convert_to_numpy(model(INPUTS, training=False))
    )
