"""`CausalLM` under `ModelParallel` on the 8 fake devices: sharded
generation equals unsharded, key/value caches sit where the plan puts them,
LoRA fine-tuning keeps the layouts and its preset loads on another mesh.

Each sharded `generate` compiles its loop for 8 devices (several seconds
on 2 cores), so few families generate sharded; the cache layouts of every
decoder family are checked by allocation alone (`init_cache`), on
backbones built abstractly.
"""

import functools
import math
import re

import keras
import numpy as np
import pytest

from keras_nlp.distribution.array_placement import planned_cache_specs
from keras_nlp.distribution.layout_errors import LayoutError
from keras_nlp.distribution.rules import entry_axes
from keras_nlp.models import DeepSeekV3Backbone
from keras_nlp.models import Gemma4Backbone
from keras_nlp.models import GemmaBackbone
from keras_nlp.models import GPTNeoXBackbone
from keras_nlp.models import Llama4Backbone
from keras_nlp.models import LlamaBackbone
from keras_nlp.models import LlamaCausalLM
from keras_nlp.models import MixtralBackbone
from keras_nlp.models import Qwen3_5Backbone
from keras_nlp.models.causal_lm import causal_lm_class
from keras_nlp.tokenizers import Tokenizer
from tests.models.backbone_checks import make_mesh
from tests.models.backbone_checks import spec_of
from tests.models.causal_lm_checks import generated
from tests.models.causal_lm_checks import sensitive
from tests.models.test_conformance import BUILD_MESHES
from tests.models.tiny_configs import TINY_CONFIGS
from tests.models.tiny_configs import tiny
from tests.models.zoo import build_with_weights
from tests.models.zoo import sharded
from tests.tokenizers import tiny_tokenizers

pytestmark = pytest.mark.multi_device

# (2, 2, 2) is (batch, context, model): caches split their length over
# the context axis (then over the model axis where heads are whole there).
GENERATION_MESHES = [(1, 8), (2, 4), (2, 2, 2)]
# Four rows of mixed lengths, left-padded in the batch.
PROMPTS = [[11, 12, 13, 14, 15], [21, 22, 23], [31], [41, 42, 43, 44]]
# A multiple of every model axis: caches whose heads are whole on it are
# split by length.
MAX_LENGTH = 16
_DIMS = dict(vocabulary_size=96, num_layers=1)
# Backbone class, config and, per mesh, the layout of the batch of 4's
# caches: (batch, keys and values, sequence, kv heads, head_dim).
SHARDED_FAMILIES = {
    # One key/value head, whole on 'model': the length split over it.
    "gemma_one_kv_head": (
        GemmaBackbone,
        dict(
            _DIMS,
            hidden_dim=32,
            num_query_heads=4,
            num_key_value_heads=1,
            head_dim=8,
            intermediate_dim=64,
        ),
        {
            (1, 8): (None, None, "model", None, None),
            (2, 4): ("batch", None, "model", None, None),
            (2, 2, 2): ("batch", None, ("context", "model"), None, None),
        },
    ),
    # 16:8 grouped queries: 8 key/value heads on 'model' (4 or 8 ways).
    "llama_gqa": (
        LlamaBackbone,
        dict(
            _DIMS,
            hidden_dim=64,
            num_query_heads=16,
            num_key_value_heads=8,
            intermediate_dim=64,
        ),
        {
            (1, 8): (None, None, None, "model", None),
            (2, 4): ("batch", None, None, "model", None),
            (2, 2, 2): ("batch", None, "context", "model", None),
        },
    ),
    # One fused query/key/value kernel of 4 heads: on 'model' of 4; whole
    # on 'model' of 8, which splits the length instead.
    "gpt_neox_fused_qkv": (
        GPTNeoXBackbone,
        dict(_DIMS, hidden_dim=32, num_heads=4, intermediate_dim=64),
        {
            (1, 8): (None, None, "model", None, None),
            (2, 4): ("batch", None, None, "model", None),
            (2, 2, 2): ("batch", None, "context", "model", None),
        },
    ),
    # A chunked RoPE block (chunks of 4: prompts and generation cross
    # them) and a global NoPE block with temperature tuning and 4 experts;
    # 8 key/value heads on 'model'.
    "llama4_chunked_moe": (
        Llama4Backbone,
        dict(
            vocabulary_size=96,
            num_layers=2,
            hidden_dim=64,
            num_query_heads=8,
            num_key_value_heads=8,
            head_dim=8,
            intermediate_dim=32,
            intermediate_dim_mlp=64,
            num_experts=4,
            interleave_moe_layer_step=2,
            no_rope_layers=[1, 0],
            attention_chunk_size=4,
            floor_scale=4,
            attn_scale=0.5,
        ),
        {
            (1, 8): (None, None, None, "model", None),
            (2, 4): ("batch", None, None, "model", None),
            (2, 2, 2): ("batch", None, "context", "model", None),
        },
    ),
    # Mixture of 4 experts (top 2), 8 key/value heads.
    "mixtral_moe": (
        MixtralBackbone,
        dict(
            _DIMS,
            hidden_dim=32,
            num_query_heads=8,
            num_key_value_heads=8,
            intermediate_dim=32,
            num_experts=4,
            top_k=2,
            sliding_window=None,
        ),
        {
            (1, 8): (None, None, None, "model", None),
            (2, 4): ("batch", None, None, "model", None),
            (2, 2, 2): ("batch", None, "context", "model", None),
        },
    ),
    # DeepSeek-V3's cache of one latent and RoPE key per position: no heads
    # to split, so its length is split over 'model' (after 'context').
    "deepseek_v3_latent": (
        DeepSeekV3Backbone,
        dict(
            _DIMS,
            hidden_dim=32,
            num_query_heads=8,
            intermediate_dim=32,
            moe_intermediate_dim=8,
            n_routed_experts=4,
            n_shared_experts=1,
            num_experts_per_tok=2,
            n_group=2,
            topk_group=1,
            q_lora_rank=16,
            kv_lora_rank=8,
            qk_nope_head_dim=4,
            qk_rope_head_dim=4,
            v_head_dim=4,
        ),
        {
            (1, 8): (None, None, "model", None, None),
            (2, 4): ("batch", None, "model", None, None),
            (2, 2, 2): ("batch", None, ("context", "model"), None, None),
        },
    ),
    # Gemma 4's tiny config: block 2 reads block 0's keys and values (two
    # caches for three blocks); one key/value head in local and global
    # blocks (of head_dim 8 and 16), whole on 'model': the lengths split
    # over it.
    "gemma4_shared_keys": (
        Gemma4Backbone,
        dict(
            TINY_CONFIGS["Gemma4Backbone"].configs["tiny"],
            num_key_value_heads=1,
        ),
        {
            (1, 8): (None, None, "model", None, None),
            (2, 4): ("batch", None, "model", None, None),
            (2, 2, 2): ("batch", None, ("context", "model"), None, None),
        },
    ),
    # Qwen 3.5's tiny config with 4 key and 8 value heads in its linear
    # attention (16 heads in the fused projection: whole heads on an axis
    # of 8): the full attention block's key/value cache (2 heads: split by
    # length where 'model' does not divide them), then the linear block's
    # convolution state (channels on 'model', as its kernel's) and its
    # delta-rule memory (value heads on 'model').
    "qwen3_5": (
        Qwen3_5Backbone,
        dict(
            TINY_CONFIGS["Qwen3_5Backbone"].configs["tiny"],
            linear_num_key_heads=4,
            linear_num_value_heads=8,
        ),
        {
            (1, 8): [
                (None, None, "model", None, None),
                (None, None, "model"),
                (None, "model", None, None),
            ],
            (2, 4): [
                ("batch", None, "model", None, None),
                ("batch", None, "model"),
                ("batch", "model", None, None),
            ],
            (2, 2, 2): [
                ("batch", None, "context", "model", None),
                ("batch", None, "model"),
                ("batch", "model", None, None),
            ],
        },
    ),
}


def distribution_for(backbone_cls, mesh_shape):
    mesh = make_mesh(mesh_shape)
    if len(mesh_shape) == 3:
        devices = keras.distribution.list_devices()[: math.prod(mesh_shape)]
        mesh = keras.distribution.DeviceMesh(
            mesh_shape, ("batch", "context", "model"), devices
        )
    return keras.distribution.ModelParallel(
        layout_map=backbone_cls.get_layout_map(mesh),
        batch_dim_name="batch",
    )


def padded_spec(array):
    spec = tuple(array.sharding.spec)
    return spec + (None,) * (len(array.shape) - len(spec))


@functools.cache
def unsharded(family):
    """`(causal LM, its greedy generation of PROMPTS)` on one device."""
    backbone_cls, config, _ = SHARDED_FAMILIES[family]
    backbone = sensitive(backbone_cls(**config), seed=4)
    model = causal_lm_class(backbone_cls)(backbone)
    return model, model.generate(PROMPTS, max_length=MAX_LENGTH)


# === Sharded generation ===


@pytest.mark.parametrize("mesh_shape", GENERATION_MESHES, ids=str)
@pytest.mark.parametrize("family", sorted(SHARDED_FAMILIES))
def test_sharded_generation_equals_unsharded(family, mesh_shape):
    backbone_cls, config, expected_specs = SHARDED_FAMILIES[family]
    reference, expected = unsharded(family)
    # Not a degenerate model that repeats a few tokens.
    assert len({t for row in generated(expected, PROMPTS) for t in row}) >= 5
    distribution = distribution_for(backbone_cls, mesh_shape)
    with distribution.scope():
        backbone = build_with_weights(
            backbone_cls, config, reference.backbone.weights
        )
        model = causal_lm_class(backbone_cls)(backbone)
        # Checks the caches the loop returns against the plan, too.
        output = model.generate(PROMPTS, max_length=MAX_LENGTH)
        caches = model.init_cache(len(PROMPTS), MAX_LENGTH)
    np.testing.assert_array_equal(output["token_ids"], expected["token_ids"])
    np.testing.assert_array_equal(
        output["padding_mask"], expected["padding_mask"]
    )
    # The model's cache plans: the backbone's key/value caches (and Qwen
    # 3.5's recurrent states); one expected spec for all, or one each.
    with distribution.scope():
        plans = model._cache_plans()
        planned = planned_cache_specs(plans, len(PROMPTS), MAX_LENGTH)
    assert len(plans) == len(caches) == len(model.cache_shapes(1, 1))
    expected = expected_specs[mesh_shape]
    if not isinstance(expected, list):
        expected = [expected] * len(caches)
    for cache, spec, want in zip(caches, planned, expected, strict=True):
        assert padded_spec(cache) == spec == want


# === Cache layouts of every decoder family, by allocation ===


def has_causal_lm(name):
    try:
        causal_lm_class(tiny(name)[0])
    except ValueError:
        return False
    return True


# Every enrolled backbone class with a causal LM (PaliGemma's included).
DECODER_CLASSES = [name for name in sorted(TINY_CONFIGS) if has_causal_lm(name)]

# The key projection's kernel in an attention layer (or the fused query,
# key and value kernel, or DeepSeek-V3's latent projection), by name.
KEY_KERNEL = re.compile(
    r"/(key|key_dense|k_proj|query_key_value|key_value_a)/kernel$"
)


def abstract_backbone(backbone_cls, config):
    """`backbone_cls(**config)` built under `jax.eval_shape` in the active
    distribution's scope: planned and laid out, no weight allocated.
    `init_cache` needs only the plan and the shapes."""
    import jax

    built = []
    jax.eval_shape(
        lambda: built.append(backbone_cls(**config, verify_layout=False))
    )
    return built[0]


def expected_cache_spec(attention, plan, kv_heads, batch, length, mesh_shape):
    """The cache spec from the attention's key kernel, found by name: kv
    heads on 'model' iff the kernel's kv-heads dimension (the one of size
    `kv_heads`) is planned on 'model', else the length on 'model' iff its
    size (above 1) divides `length`; the batch on 'batch' iff it divides
    the batch; all else whole."""
    kernels = [w for w in attention.weights if KEY_KERNEL.search(w.path)]
    assert len(kernels) == 1, [w.path for w in attention.weights]
    kernel = kernels[0]
    heads_dims = [i for i, size in enumerate(kernel.shape) if size == kv_heads]
    kernel_spec = plan.weight(kernel.path).spec
    if kv_heads == 1 and not heads_dims:
        # A cache of one latent (DeepSeek-V3's MLA) has no heads to split.
        on_model = False
    else:
        assert len(heads_dims) == 1, (kernel.path, kernel.shape, kv_heads)
        on_model = "model" in entry_axes(kernel_spec[heads_dims[0]])
    batch_axis = mesh_shape[0] > 1 and batch % mesh_shape[0] == 0
    by_length = (
        not on_model and mesh_shape[1] > 1 and length % mesh_shape[1] == 0
    )
    return (
        "batch" if batch_axis else None,
        None,
        "model" if by_length else None,
        "model" if on_model else None,
        None,
    )


@pytest.mark.parametrize("mesh_shape", BUILD_MESHES, ids=str)
@pytest.mark.parametrize("name", DECODER_CLASSES)
def test_kv_caches_are_allocated_as_planned(name, mesh_shape):
    backbone_cls, config = tiny(name)
    distribution = distribution_for(backbone_cls, mesh_shape)
    with distribution.scope():
        backbone = abstract_backbone(backbone_cls, config)
        model = causal_lm_class(backbone_cls)(backbone)
        plan = backbone.layout_plan
        blocks = backbone.decoder_stack.blocks
        # A block reading an earlier block's keys (Gemma 4) has no cache,
        # nor a linear attention block (Qwen 3.5): its fixed-size state
        # follows the key/value caches (see the qwen3_5 generation row).
        blocks = [
            b
            for b in blocks
            if b.attention is not None and b.attention.cache_shape(1, 1)
        ]
        assert len(plan.kv_caches) == len(blocks) <= config["num_layers"]
        # 4 divides every batch axis here, 3 none above 1; a length of 6
        # is split over a model axis of 2 only.
        for batch in (4, 3):
            caches = model.init_cache(batch, 6)[: len(plan.kv_caches)]
            planned = planned_cache_specs(plan.kv_caches, batch, 6)
            for cache, spec, cache_plan, block in zip(
                caches, planned, plan.kv_caches, blocks, strict=True
            ):
                kv_heads = cache_plan.kv_heads
                assert cache.shape[0] == batch
                assert cache.shape[1] == cache_plan.keys_and_values
                assert cache.shape[3:] == (kv_heads, cache_plan.head_dim)
                assert padded_spec(cache) == spec, cache_plan.path
                assert spec == expected_cache_spec(
                    block.attention, plan, kv_heads, batch, 6, mesh_shape
                ), (cache_plan.path, cache_plan.reason)


# === LoRA fine-tuning on one mesh, its preset generating on another ===


@functools.cache
def text_token_ids():
    """The tiny tokenizers' training text as token ids, right-padded."""
    tokenizer = Tokenizer(
        {"tokenizer.model": tiny_tokenizers.train_sentencepiece()}
    )
    rows = tokenizer.encode(tiny_tokenizers.TEXT)
    width = max(len(row) for row in rows)
    token_ids = np.zeros((len(rows), width), "int32")
    padding_mask = np.zeros((len(rows), width), "int32")
    for index, row in enumerate(rows):
        token_ids[index, : len(row)] = row
        padding_mask[index, : len(row)] = 1
    return tokenizer.vocabulary_size, {
        "token_ids": token_ids,
        "padding_mask": padding_mask,
    }


def test_lora_fine_tuning_under_model_parallel_and_preset_on_another_mesh(
    tmp_path,
):
    vocabulary_size, data = text_token_ids()
    config = dict(
        vocabulary_size=vocabulary_size,
        num_layers=1,
        hidden_dim=32,
        num_query_heads=4,
        num_key_value_heads=4,
        intermediate_dim=64,
    )
    prompts = [
        row[mask == 1][:4].tolist()
        for row, mask in zip(
            data["token_ids"][:4], data["padding_mask"][:4], strict=True
        )
    ]
    prompts[1] = prompts[1][:2]
    train = distribution_for(LlamaBackbone, (2, 4))
    with train.scope():
        backbone = sensitive(LlamaBackbone(**config), 5, embedding_scale=25.0)
        model = LlamaCausalLM(backbone)
        model.enable_lora(rank=2)
        model.compile(optimizer=keras.optimizers.AdamW(learning_rate=3e-2))
        history = model.fit(data, batch_size=4, epochs=15, verbose=0)
        tuned = model.generate(prompts, max_length=8)
    losses = history.history["loss"]
    assert losses[-1] < 0.8 * losses[0], losses

    # Only the adapters trained, and every weight is still where the plan
    # (with the adapters) puts it.
    plan = backbone.layout_plan
    adapters = [w.path for w in plan.weights if "lora_kernel" in w.path]
    assert len(adapters) == 4  # (query, value) x (a, b)
    assert {v.path for v in backbone.trainable_weights} == set(adapters)
    assert {v.path: spec_of(v) for v in backbone.weights} == {
        w.path: w.spec for w in plan.weights
    }
    lora_b = [v for v in backbone.weights if v.path.endswith("lora_kernel_b")]
    assert all(np.any(keras.ops.convert_to_numpy(v) != 0) for v in lora_b)

    model.save_to_preset(tmp_path)
    serve = distribution_for(LlamaBackbone, (1, 8))
    with serve.scope():
        loaded = LlamaCausalLM.from_preset(tmp_path)
        assert loaded.backbone.layout_plan.mesh.shape == (1, 8)
        output = loaded.generate(prompts, max_length=8)
    np.testing.assert_array_equal(output["token_ids"], tuned["token_ids"])
    np.testing.assert_array_equal(output["padding_mask"], tuned["padding_mask"])


@pytest.mark.multi_device
def test_a_task_made_under_a_new_distribution_binds_its_layout_map():
    # The backbone was built under one distribution; the causal LM (which
    # compiles, creating its optimizer's variables) is made under a new
    # one whose map no backbone has bound yet: it binds to this backbone.
    backbone, _ = sharded("LlamaBackbone", "tiny", (1, 8))
    distribution = distribution_for(type(backbone), (1, 8))
    with distribution.scope():
        causal_lm = LlamaCausalLM(backbone)
    layout_map = distribution._layout_map
    assert layout_map.plan is not None
    assert layout_map.plan.weights == backbone.layout_plan.weights
    assert causal_lm.optimizer.iterations.value.sharding.is_fully_replicated
    with pytest.raises(LayoutError, match="GemmaBackbone.*LlamaBackbone"):
        with distribution_for(GemmaBackbone, (1, 8)).scope():
            LlamaCausalLM(backbone)
