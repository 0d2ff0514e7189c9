"""XLNet layouts: the base and large architectures on every mesh, the
transposed output kernel, and a rule written in the usual orientation.

keras-hub has no XLNet preset, so neither has keras_nlp: the plans are
checked on configs (the reference's `xlnet_base_like` and the large
architecture, 24 x 1024 with 16 heads).
"""

import keras
import pytest

from keras_nlp.distribution import DATA
from keras_nlp.distribution import MODEL
from keras_nlp.distribution import LayoutError
from keras_nlp.models.xlnet.xlnet_backbone import XLNetBackbone
from tests.models.backbone_checks import ENCODER_RATIO_GOALS
from tests.models.backbone_checks import MESHES
from tests.models.backbone_checks import RATIO_BOUND
from tests.models.backbone_checks import make_mesh
from tests.models.backbone_checks import mesh_dict

pytestmark = pytest.mark.multi_device

CONFIGS = {
    "xlnet_base_like": dict(
        vocabulary_size=32000,
        num_layers=12,
        num_heads=12,
        hidden_dim=768,
        intermediate_dim=3072,
    ),
    "xlnet_large_like": dict(
        vocabulary_size=32000,
        num_layers=24,
        num_heads=16,
        hidden_dim=1024,
        intermediate_dim=4096,
    ),
}
BLOCK = "xlnet_encoder_1/"
ATTENTION = BLOCK + "rel_attn/"
OUTPUT = ATTENTION + "attention_output/kernel"
HEAD_WEIGHTS = (
    "content_attention_bias",
    "positional_attention_bias",
    "segment_attention_bias",
    "segment_encoding",
)


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("name", list(CONFIGS))
def test_plan_meets_the_goals(name, mesh_shape):
    config = CONFIGS[name]
    plan = XLNetBackbone.plan_layout(mesh_dict(mesh_shape), config=config)
    assert plan.num_devices == mesh_shape[0] * mesh_shape[1]
    goal = ENCODER_RATIO_GOALS.get(mesh_shape[1], RATIO_BOUND)
    assert plan.memory_ratio <= min(goal, RATIO_BOUND), plan.memory_ratio
    for weight in plan.weights:
        if weight.path.endswith("/kernel") and "rel_attn" in weight.path:
            # (hidden, heads, head_dim): heads whole or on the model axis,
            # head_dim never sharded.
            assert weight.spec[1] in (None, "model"), weight.path
            assert weight.spec[2] is None, weight.path
    # Only the per-head biases and segment encodings fall back, by heads.
    for weight in plan.fallbacks:
        assert weight.path.rsplit("/", 1)[-1] in HEAD_WEIGHTS, weight.path
        heads = f"(heads, size {config['num_heads']})"
        assert heads in weight.reason, weight.reason
        for fallback in weight.fallbacks:
            assert fallback.dim_name == "heads"


def test_base_on_2x4_puts_the_transposed_kernels_heads_on_model():
    plan = XLNetBackbone.plan_layout(
        mesh_dict((2, 4)), config=CONFIGS["xlnet_base_like"]
    )
    assert not plan.fallbacks
    expected = {
        "content_query_embedding/word_embedding/embeddings": (
            "model",
            "batch",
        ),
        "encoder_block_attn_mask_layer/mask_emb": (None, None, None),
        # Every projection is (hidden, heads, head_dim), the output too:
        # heads (dim 1) on the model axis, hidden (dim 0) on the data axis.
        ATTENTION + "query/kernel": ("batch", "model", None),
        ATTENTION + "encoding/kernel": ("batch", "model", None),
        OUTPUT: ("batch", "model", None),
        BLOCK + "content_attention_bias": ("model", None),
        BLOCK + "segment_encoding": (None, "model", None),
        BLOCK + "feedforward_intermediate_dense/kernel": ("batch", "model"),
        BLOCK + "feedforward_output_dense/kernel": ("model", "batch"),
    }
    for path, spec in expected.items():
        assert plan.weight(path).spec == spec, path
    assert plan.weight("encoder_block_attn_mask_layer/mask_emb").decision == (
        "replicated"
    )


def test_base_on_1x8_never_splits_a_head():
    plan = XLNetBackbone.plan_layout(
        mesh_dict((1, 8)), config=CONFIGS["xlnet_base_like"]
    )
    # 12 heads on 8 devices: hidden takes both axes instead.
    for name in ("query", "key", "value", "encoding", "attention_output"):
        weight = plan.weight(ATTENTION + name + "/kernel")
        assert weight.spec == (("batch", "model"), None, None), name
        assert weight.decision == "alternative"
        assert "heads, size 12" in weight.reason
    bias = plan.weight(BLOCK + "segment_attention_bias")
    assert bias.decision == "fallback" and bias.spec == (None, None)
    assert "heads, size 12" in bias.reason


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


TINY = dict(
    vocabulary_size=96,
    num_layers=1,
    num_heads=4,
    hidden_dim=32,
    intermediate_dim=64,
)


def assert_orientation_error(message):
    assert "rel_attn/attention_output/kernel" in message
    assert "('heads', 'head_dim', 'hidden')" in message
    assert "('hidden', 'heads', 'head_dim')" in message
    assert "transposed" in message


def test_a_usual_orientation_output_rule_is_rejected_by_the_plan():
    with pytest.raises(LayoutError) as error:
        UsualOrientationXLNet.plan_layout(mesh_dict((2, 4)), config=TINY)
    assert_orientation_error(str(error.value))


def test_a_usual_orientation_output_rule_is_rejected_under_a_mesh():
    distribution = keras.distribution.ModelParallel(
        layout_map=UsualOrientationXLNet.get_layout_map(make_mesh((2, 4))),
        batch_dim_name="batch",
    )
    with distribution.scope():
        with pytest.raises(LayoutError) as error:
            UsualOrientationXLNet(**TINY)
    assert_orientation_error(str(error.value))
