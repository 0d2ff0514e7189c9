"""LoRA adapter files: keras-hub's `.lora.h5` format, both ways, sharded."""

import keras
import keras_hub
import numpy as np
import pytest

from keras_nlp.saving.lora_weights import LoraFileError
from tests.models.backbone_checks import make_mesh
from tests.models.tiny_configs import tiny

CLASSES = ["GemmaBackbone", "Llama3Backbone", "BertBackbone"]


def numpy(x):
    return keras.ops.convert_to_numpy(x)


def adapters(model):
    return {
        v.path: numpy(v.value)
        for v in model.weights
        if v.path.rsplit("/", 1)[-1].startswith("lora_kernel_")
    }


def randomize_adapters(model, seed=0):
    # `lora_kernel_b` starts at zero: give every adapter values to carry.
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        if "/lora_kernel_" in variable.path:
            variable.assign(rng.normal(size=variable.shape).astype("float32"))


@pytest.mark.parametrize("name", CLASSES)
def test_keras_hub_reads_ours_and_we_read_keras_hubs(name, tmp_path):
    backbone_cls, config = tiny(name)
    ours = backbone_cls(**config)
    theirs = getattr(keras_hub.models, name)(**config)
    ours.enable_lora(4)
    randomize_adapters(ours, seed=1)
    ours.save_lora_weights(tmp_path / "ours.lora.h5")
    theirs.load_lora_weights(str(tmp_path / "ours.lora.h5"))
    assert sorted(adapters(theirs)) == sorted(adapters(ours))
    for path, value in adapters(ours).items():
        np.testing.assert_array_equal(adapters(theirs)[path], value)

    randomize_adapters(theirs, seed=2)
    theirs.save_lora_weights(str(tmp_path / "theirs.lora.h5"))
    fresh = backbone_cls(**config)
    fresh.load_lora_weights(tmp_path / "theirs.lora.h5")
    assert fresh.get_config()["lora_rank"] == 4
    for path, value in adapters(theirs).items():
        np.testing.assert_array_equal(adapters(fresh)[path], value)


@pytest.mark.multi_device
def test_sharded_adapters_are_written_gathered_and_loaded_into_shards(
    tmp_path,
):
    backbone_cls, config = tiny("GemmaBackbone")
    path = tmp_path / "adapters.lora.h5"

    def sharded(mesh_shape):
        distribution = keras.distribution.ModelParallel(
            layout_map=backbone_cls.get_layout_map(make_mesh(mesh_shape)),
            batch_dim_name="batch",
        )
        with distribution.scope():
            backbone = backbone_cls(**config)
        return backbone, distribution

    source, distribution = sharded((2, 4))
    with distribution.scope():
        source.enable_lora(4)
    randomize_adapters(source)
    source.save_lora_weights(path)

    target, distribution = sharded((1, 8))
    with distribution.scope():
        target.load_lora_weights(path)
    planned = {w.path: w.spec for w in target.layout_plan.weights}
    loaded = [v for v in target.weights if "/lora_kernel_" in v.path]
    assert loaded
    for variable in loaded:
        spec = tuple(variable.value.sharding.spec)
        spec += (None,) * (len(variable.shape) - len(spec))
        assert spec == planned[variable.path], variable.path
    for path_, value in adapters(source).items():
        np.testing.assert_array_equal(adapters(target)[path_], value)


def test_bad_files_and_mismatches_are_named_and_assign_nothing(tmp_path):
    backbone_cls, config = tiny("GemmaBackbone")
    backbone = backbone_cls(**config)
    with pytest.raises(LoraFileError, match="no LoRA adapters to save"):
        backbone.save_lora_weights(tmp_path / "a.lora.h5")
    backbone.enable_lora(4)
    with pytest.raises(LoraFileError, match=r"must end in '\.lora\.h5'"):
        backbone.save_lora_weights(tmp_path / "a.h5")
    with pytest.raises(LoraFileError, match="does not exist"):
        backbone.save_lora_weights(tmp_path / "missing" / "a.lora.h5")
    with pytest.raises(LoraFileError, match="No LoRA weights file"):
        backbone.load_lora_weights(tmp_path / "absent.lora.h5")
    (tmp_path / "text.lora.h5").write_text("not hdf5")
    with pytest.raises(LoraFileError, match="is not an HDF5 file"):
        backbone.load_lora_weights(tmp_path / "text.lora.h5")
    backbone.save_weights(str(tmp_path / "model.weights.h5"))
    with pytest.raises(LoraFileError, match="is not a LoRA weights file"):
        backbone.load_lora_weights(tmp_path / "model.weights.h5")

    other = backbone_cls(**config)
    other.enable_lora(2)
    other.save_lora_weights(tmp_path / "rank2.lora.h5")
    with pytest.raises(LoraFileError, match="rank-2 adapters.*rank 4"):
        backbone.load_lora_weights(tmp_path / "rank2.lora.h5")

    randomize_adapters(backbone)
    before = adapters(backbone)
    # Another config: same layers, other widths; and other target layers.
    wider = backbone_cls(**dict(config, hidden_dim=2 * config["hidden_dim"]))
    wider.enable_lora(4)
    wider.save_lora_weights(tmp_path / "wider.lora.h5")
    with pytest.raises(LoraFileError, match=r"lora_kernel_a has shape"):
        backbone.load_lora_weights(tmp_path / "wider.lora.h5")
    keys_only = backbone_cls(**config)
    keys_only.enable_lora(4, target_layer_names=["key"])
    keys_only.save_lora_weights(tmp_path / "keys.lora.h5")
    with pytest.raises(LoraFileError, match="layer indices"):
        backbone.load_lora_weights(tmp_path / "keys.lora.h5")
    for path, value in before.items():
        np.testing.assert_array_equal(adapters(backbone)[path], value)
    # A failed save leaves the earlier file as it was.
    backbone.save_lora_weights(tmp_path / "keep.lora.h5")
    saved = (tmp_path / "keep.lora.h5").read_bytes()
    assert (
        sorted(p.name for p in tmp_path.iterdir() if "staging" in p.name) == []
    )
    assert saved == (tmp_path / "keep.lora.h5").read_bytes()
