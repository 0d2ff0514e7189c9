"""LoRA fine-tuning under ModelParallel: adapter layouts, a few fit steps."""

import functools
import gc

import keras
import numpy as np
import pytest

from keras_nlp.models import GemmaBackbone
from keras_nlp.models import LlamaBackbone
from tests.models.backbone_checks import jit_forward
from tests.models.backbone_checks import make_mesh
from tests.models.backbone_checks import spec_of
from tests.models.tiny_configs import tiny

pytestmark = pytest.mark.multi_device

_SMALL = dict(
    vocabulary_size=128, num_layers=2, hidden_dim=64, intermediate_dim=256
)
TINY = {
    # gemma_2b_en's 8:1 heads.
    "mqa_8_1": dict(
        _SMALL, num_query_heads=8, num_key_value_heads=1, head_dim=16
    ),
    # gemma_7b_en's 16:16 heads.
    "mha_16_16": dict(
        _SMALL, num_query_heads=16, num_key_value_heads=16, head_dim=8
    ),
}
MESHES = [(1, 2), (1, 8), (2, 4), (4, 2)]


def causal_lm(backbone):
    """Next-token logits from the tied embedding."""
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    padding_mask = keras.Input((None,), dtype="int32", name="padding_mask")
    hidden = backbone({"token_ids": token_ids, "padding_mask": padding_mask})
    logits = backbone.token_embedding(hidden, reverse=True)
    return keras.Model(
        {"token_ids": token_ids, "padding_mask": padding_mask}, logits
    )


def snapshot(backbone):
    return {
        v.path: np.array(keras.ops.convert_to_numpy(v))
        for v in backbone.weights
    }


def assert_only_adapters_changed(before, after):
    """Every LoRA adapter moved; every other variable is bit-equal."""
    for path, value in before.items():
        if "lora_kernel" in path:
            assert not np.array_equal(value, after[path]), path
        else:
            np.testing.assert_array_equal(value, after[path], err_msg=path)


CASES = [(name, mesh, "after_build") for name in TINY for mesh in MESHES]
# LoRA in the constructor's config binds the adapters with the backbone.
CASES += [(name, (2, 4), "in_config") for name in TINY]


@pytest.mark.parametrize("name, mesh_shape, when", CASES, ids=str)
def test_lora_fit_under_model_parallel(name, mesh_shape, when):
    layout_map = GemmaBackbone.get_layout_map(make_mesh(mesh_shape))
    distribution = keras.distribution.ModelParallel(
        layout_map=layout_map, batch_dim_name="batch"
    )
    with distribution.scope():
        if when == "after_build":
            backbone = GemmaBackbone(**TINY[name])
            backbone.enable_lora(4)
        else:
            backbone = GemmaBackbone(**TINY[name], lora_rank=4)

    plan = backbone.layout_plan
    assert plan is layout_map.plan
    adapters = [w for w in plan.weights if "lora_kernel" in w.path]
    assert len(adapters) == 2 * 2 * 2  # layers x (query, value) x (a, b)
    variables = {v.path: v for v in backbone.weights}
    for weight in adapters:
        assert spec_of(variables[weight.path]) == weight.spec, weight.path
        kernel = plan.weight(weight.path.rsplit("/", 1)[0] + "/kernel")
        if weight.path.endswith("_a"):
            assert weight.spec == kernel.spec[:-1] + (None,)
        else:
            assert weight.spec == (None, kernel.spec[-1])

    rng = np.random.default_rng(0)
    token_ids = rng.integers(1, 128, (8, 17)).astype("int32")
    x = {
        "token_ids": token_ids[:, :-1],
        "padding_mask": np.ones((8, 16), "int32"),
    }
    y = token_ids[:, 1:]
    before = snapshot(backbone)
    with distribution.scope():
        model = causal_lm(backbone)
        model.compile(
            optimizer=keras.optimizers.Adam(1e-2),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
        history = model.fit(x, y, batch_size=8, epochs=4, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < losses[0], losses
    assert_only_adapters_changed(before, snapshot(backbone))


# QLoRA's base: the tiny Llama with one block (compiling two costs ~4 s).
QLORA_CONFIG = dict(tiny("LlamaBackbone")[1], num_layers=1)
# QLoRA's targets: two EinsumDenses and a Dense.
QLORA_TARGETS = ["query", "value", "feedforward_gate_dense"]
INT4_LAYERS = ("query", "feedforward_gate_dense")


@functools.cache
def qlora_base():
    """`(config, values)` of a tiny quantized Llama: int4 queries and gate
    projections, whose kernels are stored packed (an EinsumDense's
    flattened to 2-D first) while their adapters have the float kernels'
    dimensions; int8 for every other layer. Keras's own quantization,
    unsharded (Keras quantizes eagerly, slowly on sharded arrays)."""
    reference = LlamaBackbone(**QLORA_CONFIG)
    # Keras runs `gc.collect()` for each kernel it replaces; with the
    # objects alive before frozen it scans only new ones (2-7 s -> 0.3 s).
    gc.freeze()
    try:
        reference.quantize("int4", filters=lambda x: x.name in INT4_LAYERS)
        reference.quantize("int8", filters=lambda x: x.name not in INT4_LAYERS)
    finally:
        gc.unfreeze()
    return reference.get_config(), snapshot(reference)


def quantized_llama(mesh_shape, config, values):
    """The quantized Llama of `config` (a `DTypePolicyMap` dtype, as a
    quantized preset's) built under a mesh, holding `values`, with LoRA
    on `QLORA_TARGETS`."""
    layout_map = LlamaBackbone.get_layout_map(make_mesh(mesh_shape))
    distribution = keras.distribution.ModelParallel(
        layout_map=layout_map, batch_dim_name="batch"
    )
    with distribution.scope():
        backbone = LlamaBackbone.from_config(config)
        for variable in backbone.weights:
            variable.assign(values[variable.path])
        backbone.enable_lora(4, target_layer_names=QLORA_TARGETS)
    return backbone, distribution


def assert_laid_out_as_planned(backbone):
    variables = {v.path: v for v in backbone.weights}
    assert set(variables) == {w.path for w in backbone.layout_plan.weights}
    for weight in backbone.layout_plan.weights:
        variable = variables[weight.path]
        assert tuple(variable.shape) == weight.shape, weight.path
        assert spec_of(variable) == weight.spec, weight.path


@pytest.mark.filterwarnings("ignore:Layer .* does not have a `quantize`")
def test_qlora_trains_only_adapters_that_reload_on_another_mesh(tmp_path):
    config, values = qlora_base()
    backbone, distribution = quantized_llama((2, 4), config, values)
    modes = {
        layer.quantization_mode
        for layer in backbone._flatten_layers()
        if getattr(layer, "lora_enabled", False)
    }
    assert modes == {"int8", "int4"}
    # Each adapter is planned as on the float base: from its float
    # kernel's dimensions and layout, not from the packed int4 kernel.
    float_plan = LlamaBackbone.plan_layout(
        {"batch": 2, "model": 4},
        config=QLORA_CONFIG,
        lora_rank=4,
        lora_target_names=QLORA_TARGETS,
    )
    adapters = [w for w in backbone.layout_plan.weights if "lora" in w.path]
    assert len(adapters) == 3 * 2  # targets x (a, b)
    assert {v.path for v in backbone.trainable_weights} == {
        w.path for w in adapters
    }
    for weight in adapters:
        expected = float_plan.weight(weight.path)
        assert (weight.shape, weight.spec) == (expected.shape, expected.spec)

    token_ids = np.random.default_rng(0).integers(1, 96, (8, 9), "int32")
    x = {
        "token_ids": token_ids[:, :-1],
        "padding_mask": np.ones((8, 8), "int32"),
    }
    before = snapshot(backbone)
    with distribution.scope():
        model = causal_lm(backbone)
        model.compile(
            optimizer=keras.optimizers.Adam(1e-2),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
        history = model.fit(x, token_ids[:, 1:], batch_size=4, verbose=0)
        outputs = jit_forward(backbone, x)["sequence_output"]
    assert np.isfinite(history.history["loss"]).all()
    # int8 and packed int4 kernels, scales, zeros and float weights kept;
    # `b` starts at zero, so `a` moves from the second step on.
    after = snapshot(backbone)
    assert_only_adapters_changed(before, after)
    assert_laid_out_as_planned(backbone)

    path = tmp_path / "qlora.lora.h5"
    backbone.save_lora_weights(path)
    restored, distribution = quantized_llama((4, 2), config, values)
    with distribution.scope():
        restored.load_lora_weights(path)
        restored_outputs = jit_forward(restored, x)["sequence_output"]
    assert_laid_out_as_planned(restored)
    for path_, value in snapshot(restored).items():
        np.testing.assert_array_equal(value, after[path_], err_msg=path_)
    # The quantized layers quantize their inputs too: a last-bit difference
    # between the two meshes' sums can move a value one rounding step (as
    # in tests/models/test_quantization.py, ~1% of the largest output).
    np.testing.assert_allclose(
        restored_outputs, outputs, atol=0.03 * np.abs(outputs).max(), rtol=0
    )


def test_merge_lora_refuses_quantized_kernels(tmp_path):
    backbone = LlamaBackbone.from_config(qlora_base()[0])
    backbone.enable_lora(4, target_layer_names=QLORA_TARGETS)
    # Adding the update to int8 values without their scales was wrong by
    # ~20% of the outputs (int4's packed kernels raised a shape error).
    # Keras 3.15's requantizing merge (`_get_kernel_with_merged_lora`)
    # returns the float kernel for a layer built from a quantized config:
    # it reads the mode of the layer's policy, which is the whole map.
    with pytest.raises(ValueError, match="quantized kernels of .*query"):
        backbone.merge_lora()
    # A preset holds LoRA merged: refused the same way, nothing written.
    with pytest.raises(ValueError, match="save_to_preset cannot fold"):
        backbone.save_to_preset(str(tmp_path))
    assert not list(tmp_path.iterdir())
    # A Hugging Face checkpoint holds float weights only.
    plain = LlamaBackbone.from_config(qlora_base()[0])
    with pytest.raises(ValueError, match="writes float checkpoints, but"):
        plain.save_to_preset(str(tmp_path), format="huggingface")
    assert not list(tmp_path.iterdir())
