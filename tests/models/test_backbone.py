"""The Backbone base class: presets, validation of layout calls, plans."""

import keras
import pytest

import keras_nlp
from keras_nlp.models import Backbone
from keras_nlp.models import GemmaBackbone


def test_get_layout_map_rejects_a_non_mesh():
    with pytest.raises(ValueError) as info:
        GemmaBackbone.get_layout_map((1, 2))
    message = str(info.value)
    assert "device_mesh must be a keras.distribution.DeviceMesh" in message
    assert "Received an object of type tuple: (1, 2)" in message


def test_plan_layout_needs_a_config():
    with pytest.raises(ValueError, match="plan_layout needs a config"):
        GemmaBackbone.plan_layout({"batch": 1, "model": 2})


def test_plan_layout_takes_a_mesh_string():
    from_string = GemmaBackbone.plan_layout("2x4", preset="gemma_2b_en")
    from_dict = GemmaBackbone.plan_layout(
        {"batch": 2, "model": 4}, preset="gemma_2b_en"
    )
    assert from_string.mesh.shape == (2, 4)
    assert from_string.memory_ratio == from_dict.memory_ratio
    with pytest.raises(ValueError, match="Could not read the mesh shape"):
        GemmaBackbone.plan_layout("2by4", preset="gemma_2b_en")


def test_from_preset_refuses_weights_it_does_not_have():
    with pytest.raises(ValueError) as info:
        GemmaBackbone.from_preset("gemma_2b_en")
    assert "'gemma_2b_en' is a config only" in str(info.value)
    assert "load_weights=False" in str(info.value)


def test_from_preset_builds_the_config_with_overrides():
    backbone = Backbone.from_preset(
        "gemma_2b_en",
        load_weights=False,
        num_layers=1,
        vocabulary_size=64,
        intermediate_dim=64,
    )
    assert isinstance(backbone, GemmaBackbone)
    assert backbone.num_query_heads == 8
    assert backbone.num_key_value_heads == 1
    assert backbone.hidden_dim == 2048


def test_presets_are_the_seven_built_in_gemma_configs():
    assert sorted(GemmaBackbone.presets) == [
        "gemma2_27b_en",
        "gemma2_2b_en",
        "gemma2_9b_en",
        "gemma_2b_en",
        "gemma_7b_en",
        "gemma_instruct_2b_en",
        "gemma_instruct_7b_en",
    ]


def test_public_api_is_reexported():
    assert keras_nlp.models.Backbone is Backbone
    assert keras_nlp.models.GemmaBackbone is GemmaBackbone
    assert keras_nlp.distribution.MODEL.name == "MODEL"
    assert issubclass(keras_nlp.distribution.LayoutError, ValueError)


@pytest.mark.parametrize(
    "preset, total",
    [("gemma_2b_en", 2_506_172_416), ("gemma_7b_en", 8_537_680_896)],
)
def test_full_size_plan_totals(preset, total):
    plan = GemmaBackbone.plan_layout({"batch": 1, "model": 2}, preset=preset)
    assert plan.total_params == total
    assert plan.ideal_params_per_device == total / 2


def test_gemma_2b_plan_on_two_devices_holds_about_half():
    plan = GemmaBackbone.plan_layout(
        {"batch": 1, "model": 2}, preset="gemma_2b_en", dtype="bfloat16"
    )
    # Only the 36 single-head key/value kernels and the 1-D norm scales stay
    # whole on each device; everything else is split in two.
    assert len(plan.fallbacks) == 36
    whole = 36 * 2048 * 256 + (18 * 2 + 1) * 2048
    assert plan.params_per_device == (plan.total_params - whole) // 2 + whole
    assert plan.memory_ratio == pytest.approx(1.0076, abs=1e-4)
    assert plan.total_bytes == 2 * plan.total_params


@pytest.mark.parametrize("preset", sorted(GemmaBackbone.presets))
@pytest.mark.parametrize("mesh_shape", [(1, 2), (1, 8), (2, 4), (8, 1)])
def test_every_preset_resolves_on_every_mesh(preset, mesh_shape):
    plan = GemmaBackbone.plan_layout(
        dict(zip(("batch", "model"), mesh_shape, strict=True)), preset=preset
    )
    heads = plan.config["num_key_value_heads"]
    if heads % mesh_shape[1] == 0:
        assert plan.fallbacks == ()
        assert plan.memory_ratio < 1.02
    else:
        # Heads are atomic: only key/value kernels fall back, and say why.
        assert {w.path.split("/", 1)[1] for w in plan.fallbacks} == {
            "attention/key/kernel",
            "attention/value/kernel",
        }
        for weight in plan.fallbacks:
            assert weight.reason.startswith(
                f"dim 0 (kv_heads, size {heads}) is not divisible by 'model' "
                f"(size {mesh_shape[1]})"
            )


def test_plan_counts_bytes_in_the_variables_dtype():
    config = dict(GemmaBackbone.presets["gemma_2b_en"], dtype="bfloat16")
    plan = GemmaBackbone.plan_layout({"batch": 1, "model": 2}, config=config)
    assert plan.dtypes == ["bfloat16"]
    assert plan.total_bytes == 2 * 2_506_172_416


def test_backbone_without_rules_says_what_to_implement():
    class RulelessBackbone(Backbone):
        def __init__(self, **kwargs):
            inputs = keras.Input((4,))
            outputs = keras.layers.Dense(4, name="dense")(inputs)
            super().__init__(inputs, outputs, **kwargs)

    with pytest.raises(NotImplementedError, match="implement `_layout_rules"):
        RulelessBackbone.plan_layout({"batch": 1, "model": 2}, config={})


def test_from_preset_on_an_empty_directory_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError) as info:
        GemmaBackbone.from_preset(str(tmp_path))
    message = str(info.value)
    assert f"The preset has no config.json: {tmp_path}/config.json" in message


class _TensorFlowConsulted:
    @property
    def available(self):
        raise AssertionError("Keras's serializer looked for TensorFlow")


@pytest.mark.parametrize("name", ["float32", "bfloat16", "mixed_bfloat16"])
def test_dtype_policy_is_serialized_as_keras_does_without_tensorflow(
    monkeypatch, name
):
    # Keras's serializer imports TensorFlow (its start-up banner in a JAX
    # program) to rule out TensorFlow types; get_config must not reach it.
    from keras.src.saving import serialization_lib

    from keras_nlp.models.backbone import serialize_dtype_policy

    monkeypatch.setattr(serialization_lib, "tf", _TensorFlowConsulted())
    serialized = serialize_dtype_policy(keras.DTypePolicy(name))
    # What keras.dtype_policies.serialize writes, and reads back.
    assert serialized == {
        "module": "keras",
        "class_name": "DTypePolicy",
        "config": {"name": name},
        "registered_name": None,
    }
    assert keras.dtype_policies.deserialize(serialized).name == name
