"""The `Example:` blocks of public docstrings run as written."""

import os
import re

import keras
import numpy as np
import pytest

import keras_nlp.layers
import keras_nlp.models
from keras_nlp.distribution import LayoutPlan
from keras_nlp.distribution import MeshShape
from keras_nlp.distribution import PlanRequest
from keras_nlp.distribution import device_profile
from keras_nlp.distribution import estimate_memory
from keras_nlp.distribution import recommend
from keras_nlp.distribution import resolve_layout
from keras_nlp.models import Backbone

pytestmark = pytest.mark.multi_device

DOCUMENTED = {
    "Backbone.get_layout_map": Backbone.get_layout_map,
    "Backbone.from_preset": Backbone.from_preset,
    "Backbone.save_to_preset": Backbone.save_to_preset,
    "Backbone.save_lora_weights": Backbone.save_lora_weights,
    "Backbone.quantize": Backbone.quantize,
    "MeshShape": MeshShape,
    "LayoutPlan": LayoutPlan,
    "PlanRequest": PlanRequest,
    "resolve_layout": resolve_layout,
    "device_profile": device_profile,
    "estimate_memory": estimate_memory,
    "recommend": recommend,
}
# Every backbone's example builds a tiny model and calls it eagerly (a few
# seconds of op-by-op compiling each): these run one per kind of inputs and
# stack; every other example is compiled and checked to use its class.
RUN_BACKBONES = {
    "CausalLM",
    "BertBackbone",
    "DebertaV3Backbone",
    "FNetBackbone",
    "GPT2Backbone",
    "GemmaBackbone",
    "LlamaBackbone",
    "PaliGemmaBackbone",
    "T5Backbone",
    "WhisperBackbone",
}
COMPILED_ONLY = {}
for _module in (keras_nlp.layers, keras_nlp.models):
    for _name in _module.__all__:
        _obj = getattr(_module, _name)
        if _obj is Backbone or "```python" not in (_obj.__doc__ or ""):
            continue
        if _module is keras_nlp.models and _name not in RUN_BACKBONES:
            COMPILED_ONLY[_name] = _obj
        else:
            DOCUMENTED[_name] = _obj


def example_code(obj):
    blocks = re.findall(r"```python\n(.*?)```", obj.__doc__, re.DOTALL)
    assert blocks, f"{obj} has no runnable example"
    lines = blocks[-1].splitlines()
    indent = min(len(line) - len(line.lstrip()) for line in lines if line)
    return "\n".join(line[indent:] for line in lines)


@pytest.mark.parametrize("name", list(DOCUMENTED))
def test_docstring_example_runs(name):
    namespace = {}
    exec(compile(example_code(DOCUMENTED[name]), name, "exec"), namespace)
    if name == "Backbone.get_layout_map":
        plan = namespace["layout_map"].plan
        key = plan.weight("decoder_block_0/attention/key/kernel")
        assert key.shape == (1, 2048, 256)
        assert key.spec == (None, "batch", None)
        assert plan.num_devices == 8
    if name == "Backbone.from_preset":
        loaded, original = namespace["loaded"], namespace["backbone"]
        assert loaded.layout_plan.num_devices == 8
        for mine, theirs in zip(loaded.weights, original.weights, strict=True):
            np.testing.assert_array_equal(
                keras.ops.convert_to_numpy(mine),
                keras.ops.convert_to_numpy(theirs),
            )
    if name == "Backbone.save_to_preset":
        # The tiny threshold wrote the sharded-weights variant.
        path = namespace["path"]
        assert os.path.exists(os.path.join(path, "model.weights.json"))
        assert namespace["loaded"].count_params() == (
            namespace["backbone"].count_params()
        )


@pytest.mark.parametrize("name", sorted(COMPILED_ONLY))
def test_docstring_example_compiles_and_uses_its_class(name):
    code = example_code(COMPILED_ONLY[name])
    compile(code, name, "exec")
    assert name in code


def test_every_backbone_has_an_example():
    backbones = [n for n in keras_nlp.models.__all__ if n != "Backbone"]
    assert set(backbones) <= set(DOCUMENTED) | set(COMPILED_ONLY)
