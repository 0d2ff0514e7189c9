"""PaliGemmaCausalLM: text from images and prompts, against keras-hub's.

One tiny PaliGemma 2 style model (a local block with a window shorter than
the 4 image tokens plus the prompt, then a global one; soft caps; 8:4
heads) generates a batch of four prompts of 2 to 6 tokens, right-padded to
the total width as keras-hub takes them; we left-pad them. Each row must
equal keras-hub's generation of that row alone, stored by
`python -m tests.oracles pali_gemma_generate`: keras-hub batches unequal
prompts by decoding from the shortest length on, re-running the longer
prompts' last tokens causally (so its batched rows differ from its own
one-by-one rows), hence one row per keras-hub call.
"""

import keras
import numpy as np
import pytest

import keras_nlp.models.causal_lm_generation as generation_module
from keras_nlp.distribution.activations import FREE
from keras_nlp.models import PaliGemmaBackbone
from keras_nlp.models import PaliGemmaCausalLM
from tests import oracles
from tests.models.backbone_checks import assign_unit_scale
from tests.models.backbone_checks import make_mesh

ORACLE_DATA = "pali_gemma-generate"
CONFIG = dict(
    vocabulary_size=96,
    image_size=8,
    num_layers=2,
    num_query_heads=8,
    num_key_value_heads=4,
    hidden_dim=32,
    intermediate_dim=64,
    head_dim=8,
    vit_patch_size=4,
    vit_num_heads=2,
    vit_hidden_dim=16,
    vit_num_layers=1,
    vit_intermediate_dim=32,
    use_post_ffw_norm=True,
    use_post_attention_norm=True,
    attention_logit_soft_cap=5.0,
    final_logit_soft_cap=10.0,
    use_sliding_window_attention=True,
    sliding_window_size=3,
)
IMAGE_TOKENS = 4
WIDTH = 10
LENGTHS = (4, 4, 2, 6)
# Embeddings small against the blocks' outputs: unit-scale embeddings times
# sqrt(hidden_dim) make every row repeat its last prompt token.
SCALES = {"token_embedding": 0.125}


def make_prompts():
    """Four images and prompts, right-padded to `WIDTH`."""
    rng = np.random.default_rng(1)
    size = CONFIG["image_size"]
    batch = len(LENGTHS)
    token_ids = np.zeros((batch, WIDTH), "int32")
    padding_mask = np.zeros((batch, WIDTH), "int32")
    for row, length in enumerate(LENGTHS):
        token_ids[row, :length] = rng.integers(1, 96, length)
        padding_mask[row, :length] = 1
    images = rng.uniform(-1, 1, (batch, size, size, 3)).astype("float32")
    return {
        "images": images,
        "token_ids": token_ids,
        "padding_mask": padding_mask,
    }


def generate_oracle_data():
    """keras-hub's greedy generation of each prompt alone."""
    import keras_hub

    backbone = keras_hub.models.PaliGemmaBackbone(**CONFIG)
    assign_unit_scale(backbone, scales=SCALES)
    hub = keras_hub.models.PaliGemmaCausalLM(
        preprocessor=None, backbone=backbone
    )
    hub.compile(sampler="greedy")
    prompts = make_prompts()
    token_ids = [
        hub.generate(rows(prompts, slice(row, row + 1)), stop_token_ids=None)[
            "token_ids"
        ][0]
        for row in range(len(LENGTHS))
    ]
    return {ORACLE_DATA: {"token_ids": np.stack(token_ids)}}


@pytest.fixture(scope="module")
def prompts():
    return make_prompts()


def make_backbone():
    backbone = PaliGemmaBackbone(**CONFIG)
    assign_unit_scale(backbone, scales=SCALES)
    return backbone


def compiled_forward(causal_lm):
    """The causal LM's logits as NumPy; on JAX one compiled program (an
    eager call compiles each op on its first shapes: slower here)."""
    if keras.backend.backend() != "jax":
        return lambda x: keras.ops.convert_to_numpy(causal_lm(x))
    import jax

    compiled = jax.jit(lambda x: causal_lm(x))
    return lambda x: np.asarray(compiled(x))


def rows(inputs, selected):
    return {name: value[selected] for name, value in inputs.items()}


@pytest.fixture(scope="module")
def unsharded(prompts):
    causal_lm = PaliGemmaCausalLM(make_backbone())
    return causal_lm, causal_lm.generate(prompts, stop_token_ids=None)


def test_matches_keras_hub_token_for_token(unsharded):
    _, ours = unsharded
    np.testing.assert_array_equal(ours["padding_mask"], 1)
    expected = oracles.load(ORACLE_DATA)["token_ids"]
    for row in range(len(LENGTHS)):
        np.testing.assert_array_equal(
            ours["token_ids"][row], expected[row], err_msg=row
        )
    # Enough different tokens that a wrong mask or position shows.
    generated = ours["token_ids"][:, max(LENGTHS) :]
    assert len(np.unique(generated)) >= 6, generated


def test_left_padded_rows_equal_full_forward_and_one_by_one(prompts, unsharded):
    """Every row's tokens are the argmax of a full forward pass over its
    images, prompt (both ways) and response so far (causal), one token at
    a time; the most padded row alone generates the same."""
    causal_lm, ours = unsharded
    np.testing.assert_array_equal(ours["padding_mask"], 1)
    forward = compiled_forward(causal_lm)
    batch = len(LENGTHS)
    lengths = np.array(LENGTHS)
    positions = np.arange(WIDTH)[None, :]
    for length in range(min(LENGTHS), WIDTH):
        current = np.maximum(lengths, length)
        inputs = {
            "images": prompts["images"],
            "token_ids": np.where(
                positions < current[:, None], ours["token_ids"], 0
            ).astype("int32"),
            "padding_mask": (positions < current[:, None]).astype("int32"),
            "response_mask": (
                (positions >= lengths[:, None]) & (positions < current[:, None])
            ).astype("int32"),
        }
        logits = forward(inputs)
        for row in range(batch):
            if current[row] == length:
                token = ours["token_ids"][row, length]
                predicted = np.argmax(logits[row, length - 1])
                assert predicted == token, (row, length)

    row = int(np.argmin(LENGTHS))
    alone = causal_lm.generate(
        {
            "images": prompts["images"][row],
            "token_ids": prompts["token_ids"][row : row + 1, : LENGTHS[row]],
        },
        max_length=WIDTH,
        stop_token_ids=None,
    )
    np.testing.assert_array_equal(alone["token_ids"][0], ours["token_ids"][row])


def test_generate_needs_images_of_the_model_size(unsharded, prompts):
    causal_lm, _ = unsharded
    with pytest.raises(ValueError, match=r"pass a dict with `images`"):
        causal_lm.generate([[1, 2, 3]], max_new_tokens=2)
    with pytest.raises(ValueError, match=r"must have shape \(4, 8, 8, 3\)"):
        causal_lm.generate(
            dict(prompts, images=prompts["images"][:, :4]), max_new_tokens=2
        )
    with pytest.raises(ValueError, match="needs a `response_mask`"):
        causal_lm.compute_loss(
            x=rows(prompts, slice(None)),
            y_pred=np.zeros((4, WIDTH, 96), "float32"),
        )


@pytest.mark.multi_device
def test_sharded_2x4_equals_unsharded_with_planned_caches(
    prompts, unsharded, monkeypatch
):
    _, expected = unsharded
    verified = []
    verify = generation_module.verify_cache_layouts

    def recording_verify(caches, plans, specs, device_mesh):
        verified.append(
            [
                (cache.shape, _padded_spec(cache), spec)
                for cache, spec in zip(caches, specs, strict=True)
            ]
        )
        return verify(caches, plans, specs, device_mesh)

    monkeypatch.setattr(
        generation_module, "verify_cache_layouts", recording_verify
    )
    layout_map = PaliGemmaBackbone.get_layout_map(make_mesh((2, 4)))
    distribution = keras.distribution.ModelParallel(
        layout_map=layout_map, batch_dim_name="batch"
    )
    with distribution.scope():
        backbone = make_backbone()
        sharded = PaliGemmaCausalLM(backbone)
        actual = sharded.generate(prompts, stop_token_ids=None)

    np.testing.assert_array_equal(actual["token_ids"], expected["token_ids"])
    np.testing.assert_array_equal(
        actual["padding_mask"], expected["padding_mask"]
    )
    plans = backbone.layout_plan.kv_caches
    assert [plan.path for plan in plans] == [
        f"decoder_block_{i}/attention/cache" for i in range(2)
    ]
    # Four key/value heads, one per device of the model axis; the batch on
    # the batch axis.
    assert all(plan.spec == (FREE, None, None, "model", None) for plan in plans)
    spec = ("batch", None, None, "model", None)
    # The image tokens, then the longest prompt and the most new tokens.
    text = max(LENGTHS) + WIDTH - min(LENGTHS)
    shape = (len(LENGTHS), 2, IMAGE_TOKENS + text, 4, 8)
    assert verified == [[(shape, spec, spec)] * 2]


def _padded_spec(array):
    spec = tuple(array.sharding.spec)
    return spec + (None,) * (len(array.shape) - len(spec))
