"""T5 layouts: every preset's plan on every mesh, and exact specs."""

import pytest

from keras_nlp.models.t5.t5_backbone import T5Backbone
from keras_nlp.models.t5.t5_backbone import flat_heads_stay_whole
from tests.models.backbone_checks import MESHES
from tests.models.backbone_checks import RATIO_BOUND
from tests.models.backbone_checks import assert_preset_plan_is_efficient
from tests.models.backbone_checks import mesh_dict

pytestmark = pytest.mark.multi_device

PRESETS = list(T5Backbone.presets)
ENCODER = "transformer_encoder_layer_1/"
DECODER = "transformer_decoder_layer_1/"
# The same projector names in the encoder, the decoder and the cross-
# attention; the feed-forward's `output_projector` is the block's own.
ATTENTIONS = [
    ENCODER + "self_attention/",
    DECODER + "self_attention/",
    DECODER + "cross_attention/",
]
BIAS = "self_attention/embeddings"


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("preset", PRESETS)
def test_preset_plan_is_within_2_percent_of_the_ideal(preset, mesh_shape):
    """No fallback at all, and per-device parameters within 1.02 of the
    ideal for every preset (the 1B+ goal), small ones included."""
    plan = assert_preset_plan_is_efficient(T5Backbone, preset, mesh_shape)
    assert not plan.fallbacks
    assert plan.memory_ratio <= RATIO_BOUND, plan.memory_ratio
    if mesh_shape == MESHES[0]:
        # keras-hub's metadata counts (t5_1.1_small and _large count a
        # tied embedding).
        from keras_hub.src.models.t5.t5_presets import backbone_presets

        metadata = backbone_presets[preset]["metadata"]
        assert plan.total_params == metadata["params"]


@pytest.mark.parametrize(
    "num_heads, whole",
    [(8, True), (16, True), (32, True), (64, True), (6, False), (12, False)],
)
def test_flat_heads_go_on_the_model_axis_only_when_they_stay_whole(
    num_heads, whole
):
    # 6 x 64 = 384 divides by 4 and 8, 12 x 64 = 768 by 8: heads would
    # split; a power of two divides every such axis up to the head count.
    assert flat_heads_stay_whole(num_heads, 64) is whole


def test_base_on_an_8_way_axis_shards_hidden_in_every_attention():
    plan = T5Backbone.plan_layout(mesh_dict((1, 8)), preset="t5_base_multi")
    expected = {
        # 32128 = 128 * 251: the vocabulary takes the model axis.
        "token_embedding/embeddings": ("model", "batch"),
        ENCODER + "input_projector/kernel": ("batch", "model"),
        ENCODER + "output_projector/kernel": ("model", "batch"),
        DECODER + "output_projector/kernel": ("model", "batch"),
    }
    # 12 heads of 64: 768 divides by 8 but the heads don't, so hidden
    # takes both axes, in the encoder, the decoder and the cross-attention.
    for attention in ATTENTIONS:
        for kind in ("query", "key", "value"):
            expected[attention + f"{kind}_projector/kernel"] = (
                ("batch", "model"),
                None,
            )
        expected[attention + "output_projector/kernel"] = (
            None,
            ("batch", "model"),
        )
    for path, spec in expected.items():
        assert plan.weight(path).spec == spec, path
    query = plan.weight(DECODER + "cross_attention/query_projector/kernel")
    assert query.decision == "sharded"


def test_small_on_a_2x4_mesh_puts_whole_heads_on_the_model_axis():
    plan = T5Backbone.plan_layout(mesh_dict((2, 4)), preset="t5_small_multi")
    for attention in ATTENTIONS:
        for kind in ("query", "key", "value"):
            weight = plan.weight(attention + f"{kind}_projector/kernel")
            # 8 heads of 64: two whole heads per device.
            assert weight.spec == ("batch", "model"), weight.path
            assert weight.shard_shape == (256, 128)
        assert plan.weight(attention + "output_projector/kernel").spec == (
            "model",
            "batch",
        )


def test_both_relative_bias_tables_share_one_path_and_are_replicated():
    plan = T5Backbone.plan_layout(mesh_dict((2, 4)), preset="flan_base_multi")
    tables = [w for w in plan.weights if w.path == BIAS]
    # keras-hub's path for the encoder's table and the decoder's alike.
    assert len(tables) == 2
    for table in tables:
        assert table.shape == (32, 12)
        assert table.spec == (None, None)
        assert table.decision == "replicated"
    # The untied output projection (hidden, vocab): vocabulary on model.
    assert plan.weight("token_embedding/reverse_embeddings").spec == (
        "batch",
        "model",
    )
    # Gated: the gate is laid out like the input projection.
    assert plan.weight(ENCODER + "gate_projector/kernel").spec == (
        "batch",
        "model",
    )
