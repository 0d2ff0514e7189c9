"""`backbone.quantize("int8")` quantizes every dense layer and keeps the
outputs near the float ones.

PaliGemma holds every layer that once broke it (found by
`benchmarks/keras_hub_harness.py`): `named_dense` layers (Keras 3.15 could
not quantize their ellipsis `EinsumDense`), rotary embeddings that Keras
never marked built, and a vision position table read around its layer,
which skipped the int8 scale. One model takes ~10 s to compile (eager
calls took longer, and far longer next to another test worker), so one
class stands for the rest; the harness script runs all of them.
"""

import keras
import numpy as np
import pytest

from tests.models.backbone_checks import jit_forward
from tests.models.zoo import build_with_weights
from tests.models.zoo import reference

# Relative to the largest float output. Random tiny weights land between
# 0.02 and 0.07; reading the int8 position table unscaled gave 0.8-1.6.
TOLERANCE = 0.2
DENSE_TYPES = (keras.layers.Dense, keras.layers.EinsumDense)
# Relative to the largest output: sharded against unsharded quantized
# outputs (one step of the inputs' quantization moved ~0.8%).
QUANTIZED_OUTPUT_TOLERANCE = 0.03


@pytest.mark.filterwarnings("ignore:Layer .* does not have a `quantize`")
# Parametrized by class so that it runs on the worker that holds the zoo's
# PaliGemma (tests/conftest.py groups by class).
@pytest.mark.parametrize("name", ["PaliGemmaBackbone"])
def test_int8_quantized_backbone_stays_close_to_float(name):
    # The zoo's float model, inputs and outputs.
    ref = reference(name)
    backbone = build_with_weights(
        ref.backbone_cls, ref.config, ref.backbone.weights
    )
    inputs, expected = ref.inputs, ref.outputs

    # Before any call: an eager call would build layers Keras left unbuilt.
    backbone.quantize("int8")

    float_dense = [
        layer.path
        for layer in backbone._flatten_layers()
        if type(layer) in DENSE_TYPES and layer.quantization_mode != "int8"
    ]
    assert not float_dense
    actual = jit_forward(backbone, inputs)
    for key, value in expected.items():
        error = np.abs(actual[key] - value).max() / np.abs(value).max()
        assert error < TOLERANCE, f"{key}: relative error {error:.3f}"


# Under ModelParallel: built in the scope, then quantized there (the other
# order, quantized presets loaded into shards, is a row of every class in
# tests/models/test_conformance.py). Keras quantizes eagerly, op by op on
# sharded arrays (~20 s a model here), so three rows stand for the modes.
SHARDED_CASES = {
    # One key/value head (whole on the model axis), the tied embedding.
    ("GemmaBackbone", "int8"): {
        "decoder_block_0/attention/query/kernel_scale": (
            None,
            None,
            "model",
            None,
        ),
        "decoder_block_0/attention/key/kernel_scale": (None,) * 4,
        # The hidden output is split over 'batch' for memory only.
        "decoder_block_0/attention/attention_output/kernel_scale": (None,) * 3,
        "token_embedding/embeddings_scale": ("model",),
    },
    # Gemma's query kernel (heads, hidden, head_dim) reshaped to (hidden,
    # heads * head_dim) puts the heads first in the rows: they keep the
    # model axis, and 'batch' (split for memory) joins them there.
    ("GemmaBackbone", "int4"): {
        "decoder_block_0/attention/query/kernel": (("model", "batch"), None),
        "decoder_block_0/attention/attention_output/kernel": (
            "model",
            "batch",
        ),
        "decoder_block_0/ffw_gating/kernel": ("batch", "model"),
        # One group of rows: 'batch' joins the channels' 'model' there.
        "decoder_block_0/ffw_gating/kernel_scale": (None, ("model", "batch")),
        "decoder_block_0/ffw_gating/kernel_zero": (None, ("model", "batch")),
        "token_embedding/embeddings": ("model", "batch"),
        "token_embedding/embeddings_scale": (("model", "batch"), None),
        # Read for every token: whole (split over 'batch' like the tokens,
        # T5's lookup failed XLA's verifier on 2x4).
        "token_embedding/g_idx": (None,),
    },
    ("GPT2Backbone", "float8"): {
        "transformer_layer_0/feedforward_intermediate_dense/kernel": (
            "batch",
            "model",
        ),
        "transformer_layer_0/feedforward_intermediate_dense/kernel_scale": (),
        "transformer_layer_0/self_attention/query/inputs_amax_history": (None,),
    },
}


@pytest.mark.multi_device
@pytest.mark.filterwarnings("ignore:Layer .* does not have a `quantize`")
@pytest.mark.parametrize(
    "name, mode",
    sorted(SHARDED_CASES),
    ids=[f"{name}-{mode}" for name, mode in sorted(SHARDED_CASES)],
)
def test_quantized_under_model_parallel_follows_the_plan(name, mode):
    from keras_nlp.distribution import ModelParallel
    from keras_nlp.distribution import quantized_config
    from tests.models.backbone_checks import assert_same_weights
    from tests.models.backbone_checks import inputs_for
    from tests.models.backbone_checks import make_mesh
    from tests.models.backbone_checks import spec_of
    from tests.models.tiny_configs import tiny

    backbone_cls, config = tiny(name)
    plain = backbone_cls(**config)
    layout_map = backbone_cls.get_layout_map(make_mesh((2, 4)), config=config)
    distribution = ModelParallel(layout_map=layout_map, batch_dim_name="batch")
    with distribution.scope():
        sharded = backbone_cls(**config)
        for variable, reference in zip(
            sharded.weights, plain.weights, strict=True
        ):
            variable.assign(keras.ops.convert_to_numpy(reference.value))
        sharded.quantize(mode)
        inputs = inputs_for(sharded, config)
        actual = jit_forward(sharded, inputs)
    plain.quantize(mode)
    expected = jit_forward(plain, inputs)
    # Quantized the same, bit for bit, wherever the shards lie.
    assert_same_weights(sharded, plain)
    # The layers quantize their inputs too, by rounding: a last-bit
    # difference between the sharded and the unsharded sums can move a
    # value to the next step, ~1% of the output at that position.
    for key, value in expected.items():
        atol = QUANTIZED_OUTPUT_TOLERANCE * np.abs(value).max()
        np.testing.assert_allclose(actual[key], value, atol=atol, rtol=0)
    # Quantize checked every variable against the plan; the plan says why.
    plan = sharded.layout_plan
    variables = {v.path: v for v in sharded.weights}
    for path, spec in SHARDED_CASES[name, mode].items():
        assert plan.weight(path).spec == spec, path
        assert spec_of(variables[path]) == spec, path
        assert plan.weight(path).shape == tuple(variables[path].shape), path
        assert plan.weight(path).dtype == variables[path].dtype, path
    assert set(variables) == {w.path for w in plan.weights}
    # The config a quantized backbone writes is the one `quantized_config`
    # predicts from the float config (which plans and presets use).
    assert (
        plain.get_config()["dtype"]
        == quantized_config(backbone_cls, config, mode)["dtype"]
    )


@pytest.mark.multi_device
def test_unplanned_modes_are_refused_under_a_layout_map():
    from keras_nlp.distribution import LayoutError
    from keras_nlp.distribution import ModelParallel
    from tests.models.backbone_checks import make_mesh
    from tests.models.tiny_configs import tiny

    backbone_cls, config = tiny("LlamaBackbone")
    layout_map = backbone_cls.get_layout_map(make_mesh((1, 2)), config=config)
    distribution = ModelParallel(layout_map=layout_map, batch_dim_name="batch")
    with distribution.scope():
        backbone = backbone_cls(**config)
        # Refused before any calibration: the dataset is never read.
        gptq = keras.quantizers.GPTQConfig(dataset=["a"], tokenizer=str.split)
        with pytest.raises(LayoutError, match=r"quantize\('gptq'\) is not"):
            backbone.quantize("gptq", config=gptq)
    # Nothing was quantized, and outside the scope it must not start.
    assert all(v.dtype != "int8" for v in backbone.weights)
    with pytest.raises(ValueError, match="call quantize inside that"):
        backbone.quantize("int8")
