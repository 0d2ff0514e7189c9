"""Every backbone takes LoRA under a (2, 4) mesh, laid out as planned."""

import keras
import pytest

from tests.models.backbone_checks import make_mesh
from tests.models.backbone_checks import spec_of
from tests.models.tiny_configs import TINY_CONFIGS
from tests.models.tiny_configs import tiny

pytestmark = pytest.mark.multi_device


def test_every_exported_backbone_has_a_tiny_config():
    import keras_nlp.models

    exported = {
        name
        for name in keras_nlp.models.__all__
        if name.endswith("Backbone") and name != "Backbone"
    }
    assert exported == set(TINY_CONFIGS)


@pytest.mark.parametrize("name", sorted(TINY_CONFIGS))
def test_lora_under_a_2x4_mesh_builds_and_verifies(name):
    backbone_cls, config = tiny(name)
    distribution = keras.distribution.ModelParallel(
        layout_map=backbone_cls.get_layout_map(make_mesh((2, 4))),
        batch_dim_name="batch",
    )
    with distribution.scope():
        backbone = backbone_cls(**config)
        backbone.enable_lora(4)
    plan = backbone.layout_plan
    adapters = {w.path: w for w in plan.weights if "lora_kernel" in w.path}
    trainable = {v.path for v in backbone.trainable_weights}
    assert adapters and set(adapters) == trainable
    variables = {v.path: v for v in backbone.weights}
    for path, weight in adapters.items():
        assert spec_of(variables[path]) == weight.spec, path
        kernel = plan.weight(path.rsplit("/", 1)[0] + "/kernel")
        shared = kernel.spec[:-1] if path.endswith("_a") else kernel.spec[-1:]
        assert shared == (
            weight.spec[:-1] if path.endswith("_a") else weight.spec[-1:]
        )
