"""XLNet's output kernel is transposed, `(hidden, heads, head_dim)`: a rule
written for the usual orientation is refused. The plans of XLNet's base and
large architectures (keras-hub has no XLNet preset) are pinned by
tests/models/test_preset_plans.py."""

import keras
import pytest

from keras_nlp.distribution import DATA
from keras_nlp.distribution import MODEL
from keras_nlp.distribution import LayoutError
from keras_nlp.models.xlnet.xlnet_backbone import XLNetBackbone
from tests.models.backbone_checks import make_mesh
from tests.models.backbone_checks import mesh_dict

pytestmark = pytest.mark.multi_device

TINY = dict(
    vocabulary_size=96,
    num_layers=1,
    num_heads=4,
    hidden_dim=32,
    intermediate_dim=64,
)


class UsualOrientationXLNet(XLNetBackbone):
    """XLNet whose output-kernel rule is written for the usual
    `(heads, head_dim, hidden)` kernel."""

    @staticmethod
    def _layout_rules(config):
        rules = [
            rule
            for rule in XLNetBackbone._layout_rules(config)
            if "attention_output" not in rule[0]
        ]
        # On the (32, 4, 8) kernel of TINY and a 2x4 mesh, (MODEL, None,
        # DATA) divides: only the names can tell it is transposed.
        rules.append(
            (
                r"xlnet_encoder_\d+/rel_attn/attention_output/kernel",
                (MODEL, None, DATA),
                ("heads", "head_dim", "hidden"),
            )
        )
        return rules


def assert_orientation_error(error):
    message = str(error.value)
    assert "rel_attn/attention_output/kernel" in message
    assert "('heads', 'head_dim', 'hidden')" in message
    assert "('hidden', 'heads', 'head_dim')" in message
    assert "transposed" in message


def test_a_usual_orientation_output_rule_is_rejected():
    with pytest.raises(LayoutError) as error:
        UsualOrientationXLNet.plan_layout(mesh_dict((2, 4)), config=TINY)
    assert_orientation_error(error)
    # Under a mesh, when the backbone is built.
    distribution = keras.distribution.ModelParallel(
        layout_map=UsualOrientationXLNet.get_layout_map(make_mesh((2, 4))),
        batch_dim_name="batch",
    )
    with distribution.scope(), pytest.raises(LayoutError) as error:
        UsualOrientationXLNet(**TINY)
    assert_orientation_error(error)
