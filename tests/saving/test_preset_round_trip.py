"""Every backbone saves to a preset directory and loads back identically.

Unsharded, and across meshes: a preset saved from one mesh loads on another
(or on none) with the same weights, each variable laid out as planned.
"""

import json

import keras
import numpy as np
import pytest

from keras_nlp.models import Backbone
from tests.models.backbone_checks import make_mesh
from tests.models.backbone_checks import random_inputs
from tests.models.backbone_checks import spec_of
from tests.models.tiny_configs import TINY_CONFIGS
from tests.models.tiny_configs import tiny

# Save on the first mesh, load on the second.
MESH_PAIRS = [(None, (1, 8)), ((1, 8), (2, 4)), ((2, 4), (4, 2))]


def randomized(backbone_cls, config, seed=0):
    """A backbone whose every weight is random (scales and biases too)."""
    backbone = backbone_cls(**config)
    rng = np.random.default_rng(seed)
    for variable in backbone.weights:
        variable.assign(
            rng.normal(0.0, 0.2, variable.shape).astype(variable.dtype)
        )
    return backbone


def weights_by_path(backbone):
    return {
        v.path: keras.ops.convert_to_numpy(v.value) for v in backbone.weights
    }


def assert_same_weights(actual, expected):
    actual, expected = weights_by_path(actual), weights_by_path(expected)
    assert sorted(actual) == sorted(expected)
    for path, value in expected.items():
        np.testing.assert_array_equal(actual[path], value, err_msg=path)


def in_scope(mesh_shape):
    if mesh_shape is None:
        return None
    return keras.distribution.ModelParallel(
        layout_map=Backbone.get_layout_map(make_mesh(mesh_shape)),
        batch_dim_name="batch",
    )


def load(path, mesh_shape):
    distribution = in_scope(mesh_shape)
    if distribution is None:
        return Backbone.from_preset(str(path))
    with distribution.scope():
        return Backbone.from_preset(str(path))


@pytest.mark.parametrize("name", sorted(TINY_CONFIGS))
def test_round_trip_unsharded(name, tmp_path):
    backbone_cls, config = tiny(name)
    original = randomized(backbone_cls, config)
    original.save_to_preset(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "config.json",
        "metadata.json",
        "model.weights.h5",
    ]
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["registered_name"] == f"keras_nlp>{name}"
    metadata = json.loads((tmp_path / "metadata.json").read_text())
    assert metadata["parameter_count"] == original.count_params()

    loaded = backbone_cls.from_preset(str(tmp_path))
    assert type(loaded) is backbone_cls
    assert_same_weights(loaded, original)
    # Keras's own `load_weights` reads the file by its h5 keys, so the keys
    # are exactly the ones Keras (and keras-hub) write.
    keras_loaded = backbone_cls(**config)
    keras_loaded.load_weights(str(tmp_path / "model.weights.h5"))
    assert_same_weights(keras_loaded, original)
    inputs = random_inputs(config["vocabulary_size"], batch=2, length=8)
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(loaded(inputs)),
        keras.ops.convert_to_numpy(original(inputs)),
    )


@pytest.mark.multi_device
@pytest.mark.parametrize("source_mesh, target_mesh", MESH_PAIRS)
@pytest.mark.parametrize("name", sorted(TINY_CONFIGS))
def test_preset_saved_on_one_mesh_loads_on_another(
    name, source_mesh, target_mesh, tmp_path
):
    backbone_cls, config = tiny(name)
    reference = randomized(backbone_cls, config)
    distribution = in_scope(source_mesh)
    if distribution is None:
        source = reference
    else:
        with distribution.scope():
            source = backbone_cls(**config)
        source.set_weights(reference.get_weights())
    # Sharded files too: every tensor in a file of its own, or nearly.
    source.save_to_preset(str(tmp_path), max_shard_size=0.00001)
    assert (tmp_path / "model.weights.json").exists()

    loaded = load(tmp_path, target_mesh)
    assert_same_weights(loaded, reference)
    plan = loaded.layout_plan
    assert plan is not None and plan.mesh.shape == target_mesh
    planned = {w.path: w.spec for w in plan.weights}
    assert {v.path: spec_of(v) for v in loaded.weights} == planned

    inputs = random_inputs(config["vocabulary_size"], batch=8, length=8)
    expected = keras.ops.convert_to_numpy(reference(inputs))
    with in_scope(target_mesh).scope():
        actual = keras.ops.convert_to_numpy(loaded(inputs))
    # Same weights; a sharded forward pass only reorders float sums.
    np.testing.assert_allclose(actual, expected, atol=1e-5, rtol=1e-5)

    if source_mesh is not None:
        # And back to no mesh at all.
        unsharded = Backbone.from_preset(str(tmp_path))
        assert_same_weights(unsharded, reference)
