"""LoRA fine-tuning under ModelParallel: adapter layouts, a few fit steps."""

import keras
import numpy as np
import pytest

from keras_nlp.models import GemmaBackbone
from tests.models.backbone_checks import make_mesh
from tests.models.backbone_checks import spec_of

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
    after = snapshot(backbone)
    for path, value in before.items():
        if "lora_kernel" in path:
            assert not np.array_equal(value, after[path]), path
        else:
            np.testing.assert_array_equal(value, after[path], err_msg=path)
