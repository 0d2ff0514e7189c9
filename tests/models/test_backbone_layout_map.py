"""Backbone.get_layout_map: validation of its arguments and its three calls."""

import keras
import pytest

from keras_nlp.models import Backbone
from keras_nlp.models import GemmaBackbone

pytestmark = pytest.mark.multi_device

TINY = dict(
    vocabulary_size=128,
    num_layers=1,
    num_query_heads=4,
    num_key_value_heads=1,
    hidden_dim=32,
    intermediate_dim=64,
    head_dim=8,
)


@pytest.fixture
def mesh():
    devices = keras.distribution.list_devices()[:2]
    return keras.distribution.DeviceMesh((1, 2), ("batch", "model"), devices)


def test_get_layout_map_names_a_missing_model_axis(mesh):
    with pytest.raises(ValueError) as info:
        GemmaBackbone.get_layout_map(mesh, model_parallel_dim_name="tensor")
    assert str(info.value) == (
        "model_parallel_dim_name='tensor' is not an axis of the device mesh. "
        "The mesh's axis names are ['batch', 'model']."
    )


def test_get_layout_map_names_a_missing_data_axis(mesh):
    with pytest.raises(ValueError) as info:
        GemmaBackbone.get_layout_map(mesh, data_parallel_dim_name="data")
    assert "data_parallel_dim_name='data' is not an axis" in str(info.value)
    assert "['batch', 'model']" in str(info.value)


def test_get_layout_map_rejects_one_axis_for_both_roles(mesh):
    with pytest.raises(ValueError) as info:
        GemmaBackbone.get_layout_map(
            mesh,
            model_parallel_dim_name="model",
            data_parallel_dim_name="model",
        )
    assert "must name different mesh axes; both are 'model'" in str(info.value)


def test_get_layout_map_rejects_config_and_preset(mesh):
    with pytest.raises(ValueError, match="takes config= or preset=, not both"):
        GemmaBackbone.get_layout_map(mesh, config=TINY, preset="gemma_2b_en")


def test_unknown_preset_lists_the_built_in_ones(mesh):
    with pytest.raises(ValueError) as info:
        GemmaBackbone.get_layout_map(mesh, preset="gemma_3b")
    assert "Unknown preset 'gemma_3b' for GemmaBackbone" in str(info.value)
    assert "gemma2_27b_en" in str(info.value)


def test_instance_call_takes_no_config(mesh):
    backbone = GemmaBackbone(**TINY)
    with pytest.raises(ValueError, match="uses that backbone's own config"):
        backbone.get_layout_map(mesh, config=TINY)


def test_base_class_needs_a_preset_to_know_the_architecture(mesh):
    with pytest.raises(ValueError, match="cannot tell which architecture"):
        Backbone.get_layout_map(mesh, config=TINY)
    layout_map = Backbone.get_layout_map(mesh, preset="gemma_2b_en")
    assert layout_map.backbone_cls is GemmaBackbone
