"""Gemma 3's local and global layers, decoding, configs keras-hub reads."""

import numpy as np
import pytest

from keras_nlp.models.gemma3.gemma3_backbone import Gemma3Backbone
from tests.models.backbone_checks import jit_forward
from tests.models.gemma.decoding import decode_step_by_step
from tests.models.tiny_configs import tiny

_, TEXT = tiny("Gemma3Backbone", "mqa_4_1")  # one block, a window of 4
GEMMA3_OPTIONS = dict(
    attention_logit_soft_cap=50.0,
    final_logit_soft_cap=30.0,
    sliding_window_size=3,
    local_rope_scaling_factor=2.0,
    global_rope_scaling_factor=8.0,
    query_head_dim_normalize=False,
)
EMBEDDING_HEAD = dict(
    is_embedding_model=True, pooling_intermediate_dim=24, embedding_dim=16
)
INPUTS = {
    "token_ids": np.array([[5, 9, 2, 7, 1], [0, 0, 3, 4, 8]], "int32"),
    "padding_mask": np.array([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]], "int32"),
}


def test_five_local_layers_then_one_global():
    # head_dim 8, so that hidden / heads (16) is another scale.
    model = Gemma3Backbone(
        **{**TEXT, **GEMMA3_OPTIONS, "num_layers": 12, "head_dim": 8}
    )
    attention = [block.attention for block in model.transformer_layers]
    local = [a.sliding_window_size is not None for a in attention]
    assert [i for i, is_local in enumerate(local) if not is_local] == [5, 11]
    for layer, is_local in zip(attention, local, strict=True):
        assert layer.heads_first and layer.use_query_key_norm
        assert layer.zero_centered_query_key_norm
        assert layer.logit_soft_cap == 50.0
        # query_head_dim_normalize=False: scaled by (64 / 4) ** -0.5.
        assert layer.query_scale == 16**-0.5
        rope = layer.rotary_embedding
        if is_local:
            assert layer.sliding_window_size == 3
            assert (rope.max_wavelength, rope.scaling_factor) == (10_000, 2)
        else:
            assert (rope.max_wavelength, rope.scaling_factor) == (1e6, 8)
    # Without the window every layer is global.
    model = Gemma3Backbone(
        **dict(TEXT, num_layers=7, use_sliding_window_attention=False),
        global_rope_scaling_factor=4.0,
    )
    for block in model.transformer_layers:
        rope = block.attention.rotary_embedding
        assert block.attention.sliding_window_size is None
        assert (rope.max_wavelength, rope.scaling_factor) == (1e6, 4.0)


def test_blocks_decode_into_a_kv_cache_like_the_full_forward_pass():
    # Six layers: five local ones (window 3), then a global one.
    model = Gemma3Backbone(**{**TEXT, **GEMMA3_OPTIONS, "num_layers": 6})
    expected = jit_forward(model, INPUTS)["sequence_output"]
    actual = decode_step_by_step(model, INPUTS)
    np.testing.assert_allclose(actual, expected, atol=1e-5, rtol=1e-5)


def test_bidirectional_blocks_refuse_a_cache():
    model = Gemma3Backbone(**TEXT, use_bidirectional_attention=True)
    with pytest.raises(ValueError, match="cannot decode into a cache"):
        decode_step_by_step(model, INPUTS)


@pytest.mark.parametrize(
    "options", [GEMMA3_OPTIONS, EMBEDDING_HEAD], ids=["text", "embedding"]
)
def test_configs_are_interchangeable_with_keras_hub(options):
    keras_hub = pytest.importorskip("keras_hub")
    ours = Gemma3Backbone(**{**TEXT, **options})
    config = ours.get_config()
    # keras-hub's arguments are in every config, with text-only values.
    assert config["vision_encoder"] is None
    assert config["image_size"] is None
    embedding = "pooling_intermediate_dim" in options
    assert config["is_embedding_model"] is embedding
    theirs = keras_hub.models.Gemma3Backbone.from_config(config)
    assert sorted((v.path, tuple(v.shape)) for v in theirs.weights) == sorted(
        (v.path, tuple(v.shape)) for v in ours.weights
    )
    back = Gemma3Backbone.from_config(theirs.get_config())
    assert back.get_config() == config
