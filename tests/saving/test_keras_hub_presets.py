"""Presets written by keras-hub's `save_to_preset` load into our backbones.

keras-hub is a test-only oracle: it writes a tiny preset of the same class
(with randomized weights), and ours must load it and give its outputs, also
straight into the shards of a mesh.
"""

import re

import keras
import keras_hub
import numpy as np
import pytest

from keras_nlp.models import Backbone
from tests.models.backbone_checks import jit_forward
from tests.models.backbone_checks import make_mesh
from tests.models.backbone_checks import output_arrays
from tests.models.tiny_configs import TINY_CONFIGS
from tests.models.tiny_configs import tiny

# Classes whose keras-hub presets do not load into ours yet, and why.
NOT_LOADABLE = {
    # Its query/key/value kernels are stored flat, (hidden, heads *
    # head_dim), where ours keep the heads a dimension of their own, and
    # its RoPE frequencies are stored (`rotary_emb`): the loader reshapes
    # and skips nothing. Its Hugging Face checkpoints load
    # (tests/saving/test_huggingface_families.py).
    "SmolLM3Backbone": "flat query/key/value kernels, stored RoPE table",
}
SHARED = sorted(
    name
    for name in TINY_CONFIGS
    if hasattr(keras_hub.models, name) and name not in NOT_LOADABLE
)


def keras_hub_preset(name, path, seed=0, **save_kwargs):
    """Saves a keras-hub backbone of `name`'s tiny config with random weights.

    Returns:
        `(config, keras-hub backbone)`.
    """
    _, config = tiny(name)
    oracle = getattr(keras_hub.models, name)(**config)
    rng = np.random.default_rng(seed)
    for variable in oracle.weights:
        # Constant-initialized scales and biases are randomized too, so a
        # swapped or dropped one changes the outputs.
        variable.assign(
            rng.normal(0.0, 0.2, variable.shape).astype(variable.dtype)
        )
    oracle.save_to_preset(str(path), **save_kwargs)
    return config, oracle


def by_path_without_auto_suffixes(model):
    """Variables grouped by path with `_N` suffixes dropped, in model order.

    Auto-generated layer names (`mixtral_sparse_moe_block_1`) depend on how
    many such layers the process made before.
    """
    grouped = {}
    for variable in model.weights:
        key = re.sub(r"_\d+(?=/|$)", "", variable.path)
        grouped.setdefault(key, []).append(variable)
    return grouped


def real_tokens(inputs, outputs):
    """Each output at the real tokens (a padded query's is undefined)."""
    outputs = output_arrays(outputs)
    if "padding_mask" not in inputs:
        return outputs
    real = np.asarray(inputs["padding_mask"]).astype(bool)
    sequence = outputs.pop("sequence_output")
    # PaliGemma's outputs start with the image tokens, which are all real.
    prefix = sequence.shape[1] - real.shape[1]
    real = np.pad(real, ((0, 0), (prefix, 0)), constant_values=True)
    return {"sequence_output": sequence[real], **outputs}


def assert_same_outputs(actual, expected):
    assert sorted(actual) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_allclose(
            actual[name], value, atol=2e-5, rtol=2e-5, err_msg=name
        )


def test_every_class_both_libraries_have_is_covered():
    # Every backbone here except ours-only ones exists in keras-hub.
    assert len(SHARED) >= 13, SHARED


@pytest.mark.parametrize("name", SHARED)
def test_keras_hub_preset_loads_bit_identically(name, tmp_path):
    # Equal weights give equal outputs: each class's numerics tests compare
    # ours with keras-hub's on the same weights, and the sharded loads
    # below compare outputs too.
    _, oracle = keras_hub_preset(name, tmp_path)
    ours = Backbone.from_preset(str(tmp_path))
    assert type(ours).__name__ == name
    # Every weight came from the file, equal to keras-hub's.
    theirs = by_path_without_auto_suffixes(oracle)
    mine = by_path_without_auto_suffixes(ours)
    assert sorted(mine) == sorted(theirs)
    for path, variables in mine.items():
        for variable, expected in zip(variables, theirs[path], strict=True):
            np.testing.assert_array_equal(
                keras.ops.convert_to_numpy(variable),
                keras.ops.convert_to_numpy(expected),
                err_msg=variable.path,
            )


@pytest.mark.multi_device
@pytest.mark.parametrize(
    "name, mesh_shape",
    [
        ("GemmaBackbone", (1, 8)),
        ("Llama3Backbone", (2, 4)),
        ("BertBackbone", (1, 8)),
    ],
)
def test_sharded_keras_hub_preset_loads_into_shards(name, mesh_shape, tmp_path):
    # Tiny shards force keras-hub to write the sharded-weights variant.
    config, oracle = keras_hub_preset(name, tmp_path, max_shard_size=0.00002)
    assert (tmp_path / "model.weights.json").exists()
    assert (tmp_path / "model_00001.weights.h5").exists()
    backbone_cls = getattr(__import__("keras_nlp.models").models, name)
    distribution = keras.distribution.ModelParallel(
        layout_map=backbone_cls.get_layout_map(make_mesh(mesh_shape)),
        batch_dim_name="batch",
    )
    with distribution.scope():
        ours = backbone_cls.from_preset(str(tmp_path))
        inputs = TINY_CONFIGS[name].inputs_for(ours, config, batch=8, length=10)
        actual = real_tokens(inputs, jit_forward(ours, inputs))
    assert_same_outputs(
        actual, real_tokens(inputs, jit_forward(oracle, inputs))
    )
    planned = {w.path: w.spec for w in ours.layout_plan.weights}
    for variable in ours.weights:
        spec = tuple(variable.value.sharding.spec)
        spec += (None,) * (len(variable.shape) - len(spec))
        assert spec == planned[variable.path], variable.path
