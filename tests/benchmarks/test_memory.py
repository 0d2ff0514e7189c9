"""benchmarks/memory.py: its Keras-style matching and its byte counts.

The script is not in a package, so it is loaded from its path.
"""

import importlib.util
import pathlib

import keras
import pytest

from keras_nlp.distribution import MeshShape
from keras_nlp.distribution import VariableInfo
from keras_nlp.distribution.backbone_planner import backbone_variables
from keras_nlp.models import Backbone

_PATH = pathlib.Path(__file__).parents[2] / "benchmarks" / "memory.py"
_SPEC = importlib.util.spec_from_file_location("benchmark_memory", _PATH)
memory = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(memory)


def keras_layout(layout_map, path):
    """What Keras itself returns: a spec, None, or the ValueError."""
    try:
        layout = layout_map[path]
    except ValueError as error:
        return error
    return None if layout is None else tuple(layout.axes)


@pytest.mark.parametrize(
    "path, expected",
    [
        # An exact key wins even though a regex key matches too.
        ("dense_1/kernel", ("dense_1/kernel", ("model", None))),
        # One regex key, matched against the whole path.
        ("dense_2/kernel", ("dense_.*/kernel", (None, "model"))),
        # "dense" would be found by re.search, not by re.fullmatch.
        ("block/dense", (None, None)),
        ("block/norm/scale", (None, None)),
    ],
)
def test_lookup_matches_keras_layout_map(path, expected):
    specs = {
        "dense_1/kernel": ("model", None),
        "dense_.*/kernel": (None, "model"),
        "dense": ("model",),
        "block/.*attention.*kernel": ("batch", None, None),
        "block/.*(query|key).kernel": ("model", None, None),
    }
    layout_map = keras.distribution.LayoutMap(None)
    for key, spec in specs.items():
        layout_map[key] = spec
    assert memory.keras_lookup(specs, path) == expected
    assert keras_layout(layout_map, path) == expected[1]


def test_two_matching_keys_raise_like_keras():
    specs = {
        "block/.*attention.*kernel": ("batch", None, None),
        "block/.*(query|key).kernel": ("model", None, None),
    }
    layout_map = keras.distribution.LayoutMap(None)
    for key, spec in specs.items():
        layout_map[key] = spec
    path = "block/attention/query/kernel"
    with pytest.raises(memory.MultipleKeysError) as raised:
        memory.keras_lookup(specs, path)
    assert raised.value.keys == list(specs)
    assert isinstance(keras_layout(layout_map, path), ValueError)
    # The whole model then counts as a crash, naming both keys.
    variables = [VariableInfo(path, (4, 8, 2), "float32", True)]
    result = memory.layout_memory(
        variables,
        lambda p: memory.keras_lookup(specs, p),
        {"batch": 1, "model": 2},
    )
    assert result.status == memory.CRASH
    assert "matches 2 keys" in result.failure


def test_shard_shape_divides_by_every_named_axis():
    sizes = {"batch": 2, "model": 4}
    assert memory.shard_shape((2048, 8), (("batch", "model"), None), sizes) == (
        256,
        8,
    )
    # A short spec leaves trailing dimensions whole, as a PartitionSpec does.
    assert memory.shard_shape((8, 6, 5), ("model",), sizes) == (2, 6, 5)
    with pytest.raises(memory.IndivisibleError, match=r"dim 0 \(size 1\)"):
        memory.shard_shape((1, 2048, 256), ("model", "batch", None), sizes)
    with pytest.raises(memory.IndivisibleError, match="used twice"):
        memory.shard_shape((8, 8), ("model", "model"), sizes)


def test_unmatched_weights_are_replicated_and_counted():
    variables = [
        VariableInfo("a/kernel", (8, 4), "float32", True),
        VariableInfo("b/kernel", (4, 4), "float32", True),
        VariableInfo("b/bias", (4,), "float32", True),
    ]
    specs = {"a/kernel": ("model", None)}
    result = memory.layout_memory(
        variables,
        lambda p: memory.keras_lookup(specs, p),
        {"batch": 1, "model": 2},
    )
    # Per device 16 + 16 + 4 params of 52; the ideal is 26.
    assert result.status == memory.OK
    assert result.ratio == pytest.approx(36 / 26)
    assert result.unmatched == ("b/kernel",)
    assert result.unmatched_bytes == 64
    assert result.total_bytes == 208


def test_keras_hub_map_lookup_finds_inherited_and_missing_maps():
    assert memory.keras_hub_layout_map_fn("Llama3Backbone")[1] == (
        "LlamaBackbone"
    )
    function, reason = memory.keras_hub_layout_map_fn("MistralBackbone")
    assert function is None
    assert "no layout map" in reason


@pytest.mark.multi_device
def test_gemma_2b_single_kv_head_crashes_keras_hub_map_on_1x2():
    mesh = MeshShape.parse("1x2")
    owner, config = Backbone._preset_config("gemma_2b_en")
    variables = backbone_variables(owner, config)

    hub, where = memory.keras_hub_memory("GemmaBackbone", variables, mesh, {})
    assert where == "GemmaBackbone"
    assert hub.status == memory.CRASH
    assert hub.failure.startswith(
        "`decoder_block_0/attention/key/kernel` (1, 2048, 256) spec "
        "`(model, batch, None)`: dim 0 (size 1) is not divisible by "
        "'model' (2)"
    )
    # Key and value kernels of all 18 blocks.
    assert hub.num_failing == 36
    assert hub.unmatched == ()

    plan = Backbone.plan_layout(mesh, preset="gemma_2b_en")
    ours = memory.our_memory(plan, variables, mesh)
    assert ours.ratio == pytest.approx(plan.memory_ratio, rel=1e-12)
    assert ours.ratio == pytest.approx(1.008, abs=5e-4)
