"""Preset directories: LoRA, dtypes, shard files, plans, progress."""

import json

import keras
import numpy as np
import pytest

from keras_nlp import cli
from keras_nlp.models import Backbone
from keras_nlp.models import GemmaBackbone
from tests.models.backbone_checks import assert_same_weights
from tests.models.backbone_checks import random_inputs
from tests.models.backbone_checks import randomized
from tests.models.tiny_configs import tiny


def test_lora_is_merged_into_a_plain_preset(tmp_path):
    backbone_cls, config = tiny("LlamaBackbone")
    adapted = randomized(backbone_cls, config)
    adapted.enable_lora(2)
    rng = np.random.default_rng(1)
    for variable in adapted.trainable_weights:
        variable.assign(rng.normal(0, 0.3, variable.shape).astype("float32"))
    adapted.save_to_preset(str(tmp_path))
    saved = json.loads((tmp_path / "config.json").read_text())["config"]
    assert "lora_rank" not in saved
    loaded = Backbone.from_preset(str(tmp_path))
    assert not any("lora" in v.path for v in loaded.weights)
    inputs = random_inputs(config["vocabulary_size"], batch=2, length=6)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(loaded(inputs)),
        keras.ops.convert_to_numpy(adapted(inputs)),
        atol=1e-5,
        rtol=1e-5,
    )
    # The adapters really changed the outputs, so the merge is what matched.
    plain = adapted.merge_lora()
    assert_same_weights(loaded, plain)


def test_bfloat16_round_trip_and_dtype_override(tmp_path):
    backbone_cls, config = tiny("GemmaBackbone")
    original = randomized(backbone_cls, dict(config, dtype="bfloat16"))
    original.save_to_preset(str(tmp_path))
    loaded = Backbone.from_preset(str(tmp_path))
    assert loaded.dtype_policy.name == "bfloat16"
    assert_same_weights(loaded, original)
    # A float32 copy of the same preset holds the same numbers.
    widened = Backbone.from_preset(str(tmp_path), dtype="float32")
    assert widened.weights[0].dtype == "float32"
    for mine, theirs in zip(widened.weights, original.weights, strict=True):
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(mine),
            keras.ops.convert_to_numpy(theirs).astype("float32"),
        )


def test_overrides_reach_the_constructor_and_shapes_are_checked(tmp_path):
    backbone_cls, config = tiny("GemmaBackbone")
    randomized(backbone_cls, config).save_to_preset(str(tmp_path))
    loaded = GemmaBackbone.from_preset(str(tmp_path), name="renamed")
    assert loaded.name == "renamed"
    with pytest.raises(ValueError, match=r"has shape .* expected"):
        GemmaBackbone.from_preset(str(tmp_path), hidden_dim=64)


def test_saving_again_replaces_the_old_weight_files(tmp_path):
    backbone_cls, config = tiny("GemmaBackbone")
    first = randomized(backbone_cls, config, seed=0)
    first.save_to_preset(str(tmp_path), max_shard_size=0.00001)
    assert (tmp_path / "model.weights.json").exists()
    second = randomized(backbone_cls, config, seed=1)
    second.save_to_preset(str(tmp_path))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["config.json", "metadata.json", "model.weights.h5"]
    assert_same_weights(Backbone.from_preset(str(tmp_path)), second)


def test_sharded_files_respect_the_size_threshold(tmp_path):
    backbone_cls, config = tiny("LlamaBackbone")
    original = randomized(backbone_cls, config)
    limit_gb = 0.00002
    original.save_to_preset(str(tmp_path), max_shard_size=limit_gb)
    index = json.loads((tmp_path / "model.weights.json").read_text())
    files = sorted(tmp_path.glob("model_*.weights.h5"))
    assert len(files) > 2
    largest = max(int(np.prod(v.shape)) * 4 for v in original.weights)
    total = sum(int(np.prod(v.shape)) * 4 for v in original.weights)
    assert index["metadata"]["total_size"] == total
    listed = set()
    for names in index["weight_map"].values():
        listed.update(names if isinstance(names, list) else [names])
    assert listed == {f.name for f in files}
    # Each file holds at most the threshold, or a single larger tensor.
    for file in files:
        assert file.stat().st_size < max(limit_gb * 1024**3, largest) + 64_000
    assert_same_weights(Backbone.from_preset(str(tmp_path)), original)


def test_plan_of_a_preset_directory(tmp_path, capsys):
    backbone_cls, config = tiny("GemmaBackbone")
    backbone_cls(**config).save_to_preset(str(tmp_path))
    plan = Backbone.plan_layout("1x2", preset=str(tmp_path))
    expected = GemmaBackbone.plan_layout("1x2", config=config)
    assert plan.backbone == "GemmaBackbone"
    assert [w.spec for w in plan.weights] == [w.spec for w in expected.weights]
    assert cli.main(["plan", str(tmp_path), "--mesh", "1x2", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["total_params"] == backbone_cls(**config).count_params()


def test_progress_bar(tmp_path, capsys):
    backbone_cls, config = tiny("GemmaBackbone")
    backbone_cls(**config).save_to_preset(str(tmp_path))
    Backbone.from_preset(str(tmp_path), verbose=True)
    assert "Loading" in capsys.readouterr().out


def test_load_weights_into_a_built_backbone(tmp_path):
    from keras_nlp.saving import load_weights

    backbone_cls, config = tiny("QwenBackbone")
    original = randomized(backbone_cls, config, seed=3)
    original.save_to_preset(str(tmp_path))
    target = backbone_cls(**config)
    load_weights(target, str(tmp_path))
    assert_same_weights(target, original)


def test_compiled_backbone_saves_and_loads_without_its_optimizer(tmp_path):
    backbone_cls, config = tiny("GemmaBackbone")
    backbone = randomized(backbone_cls, config)
    backbone.compile(optimizer="adam", loss="mse")
    inputs = random_inputs(config["vocabulary_size"], batch=2, length=4)
    backbone.fit(inputs, np.zeros((2, 4, config["hidden_dim"])), verbose=0)
    assert backbone.optimizer.variables
    backbone.save_to_preset(str(tmp_path))
    assert_same_weights(Backbone.from_preset(str(tmp_path)), backbone)
    # Keras's own weights file of the compiled model holds the optimizer
    # too; its training state is skipped, its layers load.
    backbone.save_weights(str(tmp_path / "model.weights.h5"))
    assert_same_weights(Backbone.from_preset(str(tmp_path)), backbone)
