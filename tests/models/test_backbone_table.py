"""Checks the backbone classes share, as tables of rows: a class and its
numbers. Dropout (every class), invalid arguments, the paths and shapes
of config options (planned), preset parameter counts, sliding windows and
MoE losses. The battery every tiny config runs is test_conformance.py.
Built models come from the zoo (tests/models/zoo.py), shared with it; a
row with overrides builds its own.
"""

import functools
import inspect

import keras
import numpy as np
import pytest

from keras_nlp.models.llama.llama_rotary_embedding import LlamaRotaryEmbedding
from keras_nlp.models.phi3.phi3_rotary_embedding import (
    Phi3SuScaledRotaryEmbedding,
)
from keras_nlp.models.qwen.qwen_backbone import QwenBackbone
from tests.models.backbone_checks import jit_forward
from tests.models.backbone_checks import train_pass
from tests.models.tiny_configs import TINY_CONFIGS
from tests.models.tiny_configs import backbone_class
from tests.models.tiny_configs import tiny
from tests.models.zoo import build_with_weights
from tests.models.zoo import reference

ONE_DEVICE = {"batch": 1, "model": 1}


def case(target):
    """`(class name, config name)` of a row's target: a class name (its
    first tiny config) or that pair."""
    return (target, "tiny") if isinstance(target, str) else target


def row_id(target, overrides):
    """`Class-config-key=value,...` (values cut short) for a row's id."""
    if callable(target):
        name = getattr(target, "__name__", "plan_layout")
    else:
        name = "-".join(case(target)).replace("Backbone", "")
    label = ",".join(f"{k}={v!r}"[:24] for k, v in overrides.items())
    return f"{name}-{label}" if label else name


def built(target, overrides):
    """The zoo's model of `target`, or with `overrides` a new one holding
    the zoo model's weights (built once); and the zoo's inputs."""
    ref = reference(*case(target))
    key = (case(target), repr(overrides))
    if overrides and key not in _BUILT:
        _BUILT[key] = build_with_weights(
            ref.backbone_cls,
            {**ref.config, **overrides},
            ref.backbone.weights,
        )
    return _BUILT.get(key, ref.backbone), ref.inputs


_BUILT = {}


# === Dropout ===

# The config each class's dropout model copies its weights from: one whose
# dropout is 0 where the class has one (all but XLM-R, whose inference is
# the same at any rate), so inference must equal the zoo's outputs.
ZERO_DROPOUT_CONFIG = {
    "BartBackbone": "twelve_heads",
    "BertBackbone": "two_heads",
    "DebertaV3Backbone": "six_heads",
    "DistilBertBackbone": "twelve_heads",
    "ElectraBackbone": "twelve_heads_unprojected",
    "FNetBackbone": "hidden_3x16",
    "GPT2Backbone": "odd_vocab_8_heads",
    # Text only, one block: the first config has a vision tower.
    "Gemma3Backbone": "mqa_4_1",
    "OPTBackbone": "vocab_32x_8_heads",
    "RobertaBackbone": "twelve_heads_odd_vocab",
    "T5Backbone": "relu_tied_8_heads",
}


def dropout_arguments(name):
    parameters = inspect.signature(backbone_class(name).__init__).parameters
    return [p for p in parameters if "dropout" in p]


# One row per class and dropout argument (Falcon has two).
DROPOUT = [
    (name, ZERO_DROPOUT_CONFIG.get(name, "tiny"), argument)
    for name in sorted(TINY_CONFIGS)
    for argument in dropout_arguments(name)
]


def test_every_backbone_has_a_dropout_row():
    assert {row[0] for row in DROPOUT} == set(TINY_CONFIGS)


@pytest.mark.parametrize("name, config_name, argument", DROPOUT, ids=str)
def test_dropout_draws_masks_in_training_only(name, config_name, argument):
    model, inputs = built((name, config_name), {argument: 0.3})
    # Twice each; the second training pass from the seeds the first left.
    first, _, state = train_pass(model, inputs)
    second, _, _ = train_pass(model, inputs, state)
    # Inference is the zoo's program (the same one, compiled once).
    infer = [jit_forward(model, inputs) for _ in range(2)]
    for key, value in reference(name, config_name).outputs.items():
        assert np.all(np.isfinite(first[key])), key
        assert not np.allclose(first[key], second[key]), key
        assert not np.allclose(first[key], infer[0][key]), key
        np.testing.assert_array_equal(infer[0][key], infer[1][key])
        np.testing.assert_allclose(infer[0][key], value, atol=1e-5, rtol=1e-5)


# === Invalid arguments ===

# Target (a class name, `(class name, config name)` or a callable) -> rows
# `(overrides, words)`: the target refuses its tiny config with `overrides`
# and the message holds every `|`-separated word, `{}` standing for the
# last override as written (`key=repr(value)`). A row may start with its
# error class when that is not ValueError.
POSITIVE = "positive integer"
SIZES = [
    ({"num_layers": 0}, f"{{}}|{POSITIVE}"),
    ({"vocabulary_size": 12.5}, "{}|positive"),
]
GPT2_LIKE = [
    ({"num_heads": 5}, "hidden_dim=32|{}|divisible"),
    *SIZES,
    ({"num_heads": True}, f"{{}}|{POSITIVE}"),
    ({"max_sequence_length": None}, f"{{}}|{POSITIVE}"),
    ({"dropout": 1.0}, "{}|[0, 1)"),
]
GEMMA_RATIO = (
    {"num_query_heads": 6, "num_key_value_heads": 4},
    "num_query_heads=6|{}|must divide",
)
EMBEDDING_HEAD = dict(
    is_embedding_model=True, pooling_intermediate_dim=24, embedding_dim=16
)
SU = dict(
    max_sequence_length=64,
    pretraining_sequence_length=4,
    rope_scaling_type="su",
    rope_scaling_short_factor=[1.0, 1.1, 1.2, 1.3],
    rope_scaling_long_factor=[1.0, 2.0, 4.0, 8.0],
)
KV_3 = ({"num_key_value_heads": 3}, "{}")
MUST_DIVIDE = ({"num_key_value_heads": 3}, "{}|must divide `num_query_heads`")
TOP_K_5 = ({"top_k": 5}, "{}|at most `num_experts` (4)")
INVALID = {
    # ALBERT runs its layers group by group.
    "AlbertBackbone": [({"num_layers": 3, "num_groups": 2}, "num_layers=3|{}")],
    "GPT2Backbone": GPT2_LIKE,
    "OPTBackbone": [
        *GPT2_LIKE,
        *(({"token_embedding_dim": w}, "{}") for w in (0, 16.0, True)),
    ],
    "BloomBackbone": [
        ({"num_heads": 5}, "hidden_dim=32|{}|divisible"),
        ({"num_heads": 0}, f"{{}}|{POSITIVE}"),
        ({"intermediate_dim": -4}, "{}|positive"),
        *SIZES,
    ],
    "FalconBackbone": [
        ({"num_attention_heads": 5}, "hidden_dim=32|{}|divisible"),
        ({"num_attention_heads": 0}, f"{{}}|{POSITIVE}"),
        ({"intermediate_dim": -4}, "{}|positive"),
        *SIZES,
        ({"shared_layer_norm": True}, "{}|parallel_residual=False"),
        ({"num_key_value_heads": 3}, "{}|num_attention_heads=4|divide"),
    ],
    "GemmaBackbone": [GEMMA_RATIO],
    ("Gemma3Backbone", "mqa_4_1"): [
        GEMMA_RATIO,
        (
            {"vision_encoder": keras.layers.Dense(4)},
            "vision_encoder|must be None|Dense",
        ),
        (
            dict(EMBEDDING_HEAD, embedding_dim=None),
            "{}|is_embedding_model=True",
        ),
        ({"embedding_dim": 16}, "{}|is_embedding_model=True"),
    ],
    "GPTNeoXBackbone": [
        ({"num_heads": 5}, "hidden_dim=32|{}|divisible"),
        ({"rotary_percentage": 1.5}, "{}|[0, 1]"),
        # head_dim 8 * 0.375 = 3 rotated features: not pairs.
        ({"rotary_percentage": 0.375}, "{}|head_dim=8|even|giving 3"),
        *SIZES,
        ({"hidden_activation": "relu"}, "{}|'gelu_approximate', 'gelu'"),
    ],
    "DeepSeekV3Backbone": [
        ({"n_group": 3}, "{}|n_routed_experts=8|groups of at least 2"),
        ({"n_group": 8}, "{}|groups of at least 2"),
        ({"topk_group": 5}, "{}|at most `n_group` (4)"),
        ({"num_experts_per_tok": 5}, "{}|kept groups|= 4"),
        ({"first_k_dense_replace": 3}, "{}|[0, 2]"),
        ({"qk_rope_head_dim": 3}, "{}|even"),
        ({"kv_lora_rank": 0}, "{}|positive"),
        ({"q_lora_rank": 2.5}, "{}|positive"),
        ({"n_shared_experts": 0}, "{}|positive"),
        *SIZES,
    ],
    "GptOssBackbone": [
        ({"output_router_logits": True}, "{}"),
        ({"num_key_value_heads": 3}, "{}|must divide"),
        TOP_K_5,
        ({"sliding_window": 0}, "{}|or None"),
        ({"rope_scaling_factor": 0.5}, "factor=0.5"),
        ({"head_dim": 7}, "{}"),
        (TypeError, {"rope_type": "yarn"}, "rope_type|head_dim"),
        (
            {"layer_types": ["full_attention"]},
            "needs 2 entries|it has 1 entries|{}",
        ),
        (
            {"layer_types": ["sliding_attention", "local"]},
            "unknown value(s) ['local']|{}",
        ),
        (
            {"layer_types": "sliding_attention"},
            "must be None or a list of 2|{}",
        ),
        (
            dict(layer_types=["sliding_attention", "full_attention"])
            | {"sliding_window": None},
            "windows the blocks [0]|{}",
        ),
    ],
    "LlamaBackbone": [({"num_query_heads": 5}, "{}"), KV_3],
    LlamaRotaryEmbedding: [
        (
            dict(
                frequency_adjustment_factor=8.0,
                low_freq_factor=1.0,
                pretraining_sequence_length=16,
            ),
            "missing ['high_freq_factor'",
        )
    ],
    "MistralBackbone": [
        ({"num_query_heads": 5}, "hidden_dim=32|{}"),
        MUST_DIVIDE,
        ({"sliding_window": 0}, f"{{}}|{POSITIVE}"),
        ({"sliding_window": 2.5}, "{}|or None"),
        ({"head_dim": -8}, "{}|positive integer or None"),
        *SIZES,
    ],
    "MixtralBackbone": [
        ({"num_query_heads": 5}, "hidden_dim=32|{}"),
        MUST_DIVIDE,
        ({"num_experts": 0}, f"{{}}|{POSITIVE}"),
        TOP_K_5,
        ({"router_jitter_noise": -0.1}, "{}|[0, 1)"),
        ({"sliding_window": 0}, f"{{}}|{POSITIVE}"),
        SIZES[0],
    ],
    "Phi3Backbone": [
        ({"num_query_heads": 5}, "hidden_dim=32|{}"),
        KV_3,
        ({"hidden_dim": 36}, "head_dim=9|even"),
        *SIZES,
        ({"rope_scaling_type": "yarn"}, "{}|None|'su'|'longrope'"),
        (
            {"rope_scaling_type": "su"},
            "rope_scaling_short_factor|head_dim // 2 = 4|None",
        ),
        (
            dict(SU, rope_scaling_long_factor=[1.0, 2.0]),
            "{}|head_dim // 2 = 4|Received 2",
        ),
        ({"pretraining_sequence_length": 0}, f"{{}}|{POSITIVE}"),
    ],
    Phi3SuScaledRotaryEmbedding: [
        (
            dict(short_factor=[1.0, 1.0], long_factor=[2.0]),
            "Received 2 and 1 entries",
        )
    ],
    "Llama4Backbone": [
        ({"interleave_moe_layer_step": 0}, "{}|positive"),
        ({"moe_layers": [2]}, "{}|[0, 2)"),
        ({"no_rope_layers": [1]}, "{}|num_layers=2"),
        ({"no_rope_layers": [1, 2]}, "{}|0 or 1"),
        ({"attention_chunk_size": 0}, "{}|positive"),
        KV_3,
        TOP_K_5,
    ],
    "QwenBackbone": [
        ({"num_query_heads": 5}, "{}"),
        KV_3,
        (
            {"use_sliding_window_attention": True, "sliding_window_size": 0},
            "{}",
        ),
    ],
    functools.partial(QwenBackbone.plan_layout, ONE_DEVICE): [
        ({"preset": "qwen2.5_1b"}, "Unknown preset 'qwen2.5_1b'")
    ],
    "Qwen3Backbone": [
        KV_3,
        ({"head_dim": 7}, "{}"),
        ({"head_dim": None, "num_query_heads": 3}, "{}"),
        ({"sliding_window_size": 0}, "{}"),
    ],
    "Qwen3MoeBackbone": [
        ({"decoder_sparse_step": 1.5}, "{}"),
        ({"mlp_only_layers": [-1]}, "{}|[0, 2)"),
        ({"head_dim": 7}, "{}"),
        ({"sliding_window_size": 0}, "{}"),
        TOP_K_5,
    ],
    "QwenMoeBackbone": [
        ({"decoder_sparse_step": 0}, "{}|positive"),
        ({"mlp_only_layers": [2]}, "{}|[0, 2)"),
        ({"output_router_logits": True}, "{}"),
        ({"moe_intermediate_dim": 0}, "{}"),
        ({"shared_expert_intermediate_dim": None}, f"{{}}|{POSITIVE}"),
        TOP_K_5,
        KV_3,
        (TypeError, {"use_sliding_window": True}, "use_sliding_window"),
    ],
    # The text decoder only; sharing blocks need an earlier block of their
    # kind; the experts need their sizes.
    "Gemma4Backbone": [
        ({"vision_encoder": {"image_size": 16}}, "{}|text decoder only"),
        ({"audio_encoder": {"hidden_size": 8}}, "{}|text decoder only"),
        ({"image_size": 896}, "{}|must be None"),
        ({"num_kv_shared_layers": 3}, "{}|below num_layers=3"),
        (
            {"num_kv_shared_layers": 2},
            "Block 1 (global)|lower `num_kv_shared_layers`",
        ),
        ({"layer_types": ["full_attention"] * 2}, "list of 3 (num_layers)"),
        ({"num_experts": None}, "{}|expert_intermediate_dim=16"),
    ],
    # The text decoder only; layer kinds, linear heads and the rotated
    # part of each head checked.
    "Qwen3_5Backbone": [
        ({"vision_encoder": keras.layers.Dense(4)}, "{}|must be None"),
        ({"layer_types": ["full_attention"]}, "list of 2 (num_layers)"),
        (
            {"layer_types": ["linear_attention", "sliding_attention"]},
            "sliding_attention|full_attention",
        ),
        ({"linear_num_value_heads": 3}, "{}|linear_num_key_heads=2|divide"),
        ({"linear_conv_kernel_dim": 0}, f"{{}}|{POSITIVE}"),
        ({"partial_rotary_factor": 0.125}, "{}|head_dim=8|even"),
    ],
    "Qwen3_5MoeBackbone": [
        ({"vision_encoder": keras.layers.Dense(4)}, "{}|must be None"),
        ({"top_k": 5}, "{}|num_experts` (4)"),
    ],
    "SmolLM3Backbone": [
        ({"rope_layer_enabled_list": [True]}, "one entry per layer|1 entries"),
        ({"layer_types": ["full_attention"] * 3}, "one entry per layer|3"),
        ({"partial_rotary_factor": 0.5}, "Received: 0.5|1.0"),
        KV_3,
    ],
    "T5GemmaBackbone": [
        ({"encoder_layer_types": ["full_attention"]}, "{}|2 layers"),
        (
            {"decoder_layer_types": ["sliding_attention", "local"]},
            "'local'|full_attention",
        ),
        ({"sliding_window": None}, "sliding_attention|{}"),
        ({"dropout_rate": 1.5}, "{}|[0, 1)"),
        (
            {"decoder_num_key_value_heads": 3},
            "num_key_value_heads=3|must divide",
        ),
    ],
    "T5Gemma2Backbone": [
        ({"vision_encoder": {"image_size": 16}}, "text encoder-decoder|dict"),
        ({"decoder_hidden_dim": 48}, "{}|encoder_hidden_dim=32"),
        ({"encoder_layer_types": ["global"] * 2}, "'global'|sliding_attention"),
    ],
}


def invalid_rows():
    for target, rows in INVALID.items():
        for row in rows:
            error, overrides, words = (
                row[-3:] if row[0] is TypeError else (ValueError, *row)
            )
            key, value = list(overrides.items())[-1]
            words = words.replace("{}", f"{key}={value!r}").split("|")
            yield pytest.param(
                target, overrides, error, words, id=row_id(target, overrides)
            )


@pytest.mark.parametrize(
    "target, overrides, error, words", list(invalid_rows())
)
def test_invalid_arguments_are_named(target, overrides, error, words):
    call, config = (target, {}) if callable(target) else tiny(*case(target))
    with pytest.raises(error) as info:
        call(**{**config, **overrides})
    for word in words:
        assert word in str(info.value), word


# === Paths and shapes of config options ===


def shapes(target, overrides, expected, total=None):
    """A row: `target`'s tiny config, or `overrides["preset"]`'s config,
    with `overrides` plans `expected` (`path: shape`, `None`: no such
    path) and `total` parameters."""
    return pytest.param(
        target, overrides, expected, total, id=row_id(target, overrides)
    )


FALCON = "transformer_layer_1/"
FALCON_PARALLEL = dict(
    rotary_max_wavelength=10000, parallel_residual=True, use_bias=False
)
ATTENTION = "transformer_layer_0/self_attention/"
OPT_350M = dict(
    vocabulary_size=50272,
    num_layers=24,
    num_heads=16,
    hidden_dim=1024,
    intermediate_dim=4096,
    max_sequence_length=2048,
    normalize_first=False,
    token_embedding_dim=512,
)
OSS_MOE = "transformer_layer_0/sparse_moe_block/"
QWEN3 = "transformer_layer_{}/qwen3_{}/"
QWEN = "transformer_layer_{}/qwen_{}/"
DENSE = "feedforward_gate_dense/kernel"
ROUTER = "sparse_feedforward_gate_dense/kernel"
LLAMA4 = "transformer_layer_{}/llama4_sparse_moe_block/"
PATHS = [
    # Falcon-7B: one key/value head, one norm, no biases.
    shapes(
        "FalconBackbone",
        dict(FALCON_PARALLEL, num_key_value_heads=1, shared_layer_norm=True),
        {
            FALCON + "attention/key_dense/kernel": (32, 1, 8),
            FALCON + "attention/query_dense/bias": None,
            FALCON + "dense_h_to_4h/bias": None,
            FALCON + "input_layernorm/gamma": (32,),
            FALCON + "post_attention_layernorm/gamma": None,
            FALCON + "ln_attn/gamma": None,
        },
    ),
    # Falcon-40B: grouped key/value heads, a norm for each branch.
    shapes(
        "FalconBackbone",
        dict(FALCON_PARALLEL, num_key_value_heads=2),
        {
            FALCON + "attention/key_dense/kernel": (32, 2, 8),
            FALCON + "input_layernorm/gamma": None,
            FALCON + "ln_attn/gamma": (32,),
            FALCON + "ln_mlp/beta": (32,),
        },
    ),
    shapes(
        ("Gemma3Backbone", "mqa_4_1"),
        {"use_query_key_norm": False},
        {"decoder_block_0/attention/query_norm/scale": None},
    ),
    # The embedding model's head adds two kernels (and no biases).
    shapes(
        ("Gemma3Backbone", "mqa_4_1"),
        EMBEDDING_HEAD,
        {
            "pooling_dense_1/kernel": (64, 24),
            "embedding_projection/kernel": (24, 16),
        },
        total=51_552 + 64 * 24 + 24 * 16,
    ),
    # keras-hub's GPT-OSS checkpoints are not in the golden file: the
    # published config's distinctive shapes, and its one-block total.
    shapes(
        "GptOssBackbone",
        {"preset": "gpt_oss_120b_en", "num_layers": 1},
        {
            "token_embedding/reverse_embeddings": (2880, 201088),
            ATTENTION + "sinks": (64,),
            ATTENTION + "key/bias": (8, 64),
            ATTENTION + "attention_output/kernel": (64, 64, 2880),
            OSS_MOE + "router/router_dense/bias": (128,),
            OSS_MOE + "experts/gate_up_proj": (128, 2880, 5760),
            OSS_MOE + "experts/down_proj_bias": (128, 2880),
        },
        total=4_371_349_952,
    ),
    shapes(
        "LlamaBackbone",
        {"tie_word_embeddings": True},
        {"token_embedding/reverse_embeddings": None},
    ),
    # An explicit head_dim: heads x head_dim need not be hidden_dim, nor
    # need hidden_dim divide by the heads.
    shapes(
        "MistralBackbone",
        {"head_dim": 16},
        {
            ATTENTION + "query/kernel": (32, 8, 16),
            ATTENTION + "key/kernel": (32, 2, 16),
            ATTENTION + "attention_output/kernel": (8, 16, 32),
        },
    ),
    shapes(
        "MistralBackbone",
        {"num_query_heads": 5, "num_key_value_heads": 1, "head_dim": 8},
        {ATTENTION + "query/kernel": (32, 5, 8)},
    ),
    # OPT-350M: post-LayerNorm blocks, no final LayerNorm, a narrow token
    # table and the projections. `transformers`' facebook/opt-350m count,
    # 331,196,416, less the two position rows before position 0.
    shapes(
        "OPTBackbone",
        OPT_350M,
        {
            "embeddings/token_embedding/embeddings": (50272, 512),
            "embeddings/position_embedding/embeddings": (2048, 1024),
            "embeddings/project_in/kernel": (512, 1024),
            "project_out/kernel": (1024, 512),
            "layer_norm/gamma": None,
        },
        total=331_196_416 - 2 * 1024,
    ),
    # A token table as wide as the blocks needs no projections.
    shapes(
        "OPTBackbone",
        {"token_embedding_dim": 32},
        {"project_out/kernel": None, "layer_norm/gamma": (32,)},
    ),
    shapes(
        "Qwen3Backbone",
        {"head_dim": None},
        {ATTENTION + "query_dense_layernorm/scale": (8,)},
    ),
    # Every second block sparse: block 0 has keras-hub's dense MLP. (The
    # sparse blocks' shapes: the golden file.)
    shapes(
        "Qwen3MoeBackbone",
        {"decoder_sparse_step": 2},
        {
            QWEN3.format(0, "moe_mlp") + DENSE: (32, 48),
            QWEN3.format(0, "sparse_moe_block") + ROUTER: None,
            QWEN3.format(1, "moe_mlp") + DENSE: None,
            QWEN3.format(1, "sparse_moe_block") + ROUTER: (32, 4),
        },
    ),
    # Maverick's interleave: block 0 dense (intermediate_dim_mlp wide),
    # block 1 MoE with its shared expert.
    shapes(
        "Llama4Backbone",
        {"interleave_moe_layer_step": 2},
        {
            "transformer_layer_0/" + DENSE: (32, 48),
            LLAMA4.format(0) + ROUTER: None,
            "transformer_layer_1/" + DENSE: None,
            LLAMA4.format(1) + ROUTER: (32, 4),
            LLAMA4.format(1) + "experts/expert_feedforward_gate_dense": (
                4,
                32,
                32,
            ),
            LLAMA4.format(1) + "shared_expert_dense/" + DENSE: (32, 16),
        },
    ),
    shapes(
        "QwenMoeBackbone",
        {"mlp_only_layers": [1]},
        {
            QWEN.format(0, "moe_mlp") + DENSE: None,
            QWEN.format(0, "sparse_moe_block") + ROUTER: (32, 4),
            QWEN.format(1, "moe_mlp") + DENSE: (32, 48),
            QWEN.format(1, "sparse_moe_block") + ROUTER: None,
        },
    ),
]


@pytest.mark.parametrize("target, overrides, expected, total", PATHS)
def test_config_options_plan_these_paths(target, overrides, expected, total):
    cls, config = tiny(*case(target))
    overrides = dict(overrides)
    if "preset" in overrides:
        config = dict(cls.presets[overrides.pop("preset")])
    plan = cls.plan_layout(ONE_DEVICE, config={**config, **overrides})
    shapes = {w.path: tuple(w.shape) for w in plan.weights}
    assert len(shapes) == len(plan.weights)  # no duplicate paths
    assert {path: shapes.get(path) for path in expected} == expected
    if total is not None:
        assert plan.total_params == total


# === Preset parameter counts ===

# Preset -> its full-model parameter count as published: keras-hub's
# `metadata.params` or the reference's checkpoint. Not in the reference
# (their shapes' sums): pythia_1.4b_en, opt_2.7b_en, opt_6.7b_en. keras-hub's
# metadata for qwen2.5_7b_en says 6,993,420,288; its Hugging Face config
# (the one here) has 7,615,616,512.
# The vision encoder keras-hub counts in its Qwen 3.5 presets of width 2048.
_QWEN3_5_VISION = 35_107_181_936 - 34_660_610_688
PRESETS = {
    # Meta's "109B" and "400B" (Scout's counts its vision tower too).
    "llama4_scout_17b_16e": 107_769_861_120,
    "llama4_maverick_17b_128e": 400_711_848_960,
    "bloom_560m_multi": 559_214_592,
    "bloom_3b_multi": 3_002_557_440,
    "falcon_refinedweb_1b_en": 1_311_625_216,
    "gemma3_270m": 268_098_176,
    "gemma3_1b": 999_885_952,
    "gemma3_4b_text": 3_880_099_328,
    "gemma3_12b_text": 11_765_788_416,
    "gemma3_27b_text": 27_009_002_240,
    "gpt2_base_en": 124_439_808,
    "gpt2_medium_en": 354_823_168,
    "gpt2_large_en": 774_030_080,
    "gpt2_extra_large_en": 1_557_611_200,
    "pythia_410m_en": 353_822_720,
    "pythia_1.4b_en": 1_311_625_216,
    "gpt_oss_20b_en": 20_914_757_184,
    "gpt_oss_120b_en": 116_829_156_672,
    "gpt_oss_safeguard_20b_en": 20_914_757_184,
    "gpt_oss_safeguard_120b_en": 116_829_156_672,
    "llama2_7b_en": 6_738_415_616,
    "mistral_7b_en": 7_241_732_096,
    "mistral_0.3_7b_en": 7_248_023_552,
    "mixtral_8_7b_en": 46_702_792_704,
    "opt_125m_en": 125_237_760,
    "opt_1.3b_en": 1_315_753_984,
    "opt_2.7b_en": 2_651_591_680,
    "opt_6.7b_en": 6_658_465_792,
    "phi3_mini_4k_instruct_en": 3_821_079_552,
    "qwen2.5_0.5b_en": 494_032_768,
    "qwen2.5_3b_en": 3_085_938_688,
    "qwen2.5_7b_en": 7_615_616_512,
    "qwen3_0.6b_en": 596_049_920,
    "qwen3_8b_en": 8_190_735_360,
    "qwen3_moe_30b_a3b_en": 30_532_122_624,
    "qwen3_moe_235b_a22b_en": 235_093_634_560,
    "qwen3_coder_instruct_30b_a3b_en": 30_532_122_624,
    "qwen1.5_moe_2.7b_en": 14_315_784_192,
    # keras-hub's 3,075,100,928 counts its RoPE frequencies (36 x 64), a
    # variable there and a constant here.
    "smollm3_3b_en": 3_075_100_928 - 36 * 64,
    # DeepSeek-V3's published 671B (685B with the multi-token-prediction
    # block, which is left out).
    "deepseek_v3_671b": 671_026_419_200,
    # Text only (keras-hub's 5.1B, 7.9B, 26B and 31B count the towers);
    # e.g. the 31B: 262144 x 5376 embedding, 50 local blocks of 478,959,105
    # and 10 global ones of 534,009,857 (head_dim 512, 4 kv heads, keys as
    # values), a final norm.
    "gemma4_2b": 4_628_569_379,
    "gemma4_4b": 7_463_013_418,
    "gemma4_26b_a4b": 25_233_141_790,
    "gemma4_31b": 262144 * 5376 + 50 * 478_959_105 + 10 * 534_009_857 + 5376,
    # Text only. keras-hub's counts add a vision encoder, except for the
    # text-only qwen_agent_world_35b_a3b (the 35B-A3B's shape): the
    # encoder's merger grows by 4 * 1152 + 1 per unit of hidden_dim, which
    # gives the 9B's and 27B's encoders from the 35B-A3B's.
    "qwen_agent_world_35b_a3b": 34_660_610_688,
    "qwen3_5_moe_35b_a3b": 35_107_181_936 - _QWEN3_5_VISION,
    "qwen3_5_9b": 9_409_813_744 - _QWEN3_5_VISION - 4609 * (4096 - 2048),
    "qwen3_5_27b": 27_356_728_560 - _QWEN3_5_VISION - 4609 * (5120 - 2048),
}
# Preset -> options (not shapes: the golden file has those) it must set.
PYTHIA = {"rotary_percentage": 0.25, "max_sequence_length": 2048}
PRESET_OPTIONS = {
    "llama4_scout_17b_16e": {
        "interleave_moe_layer_step": 1,
        "use_qk_norm": True,
        "rope_frequency_adjustment_factor": 16.0,
    },
    "llama4_maverick_17b_128e": {
        "interleave_moe_layer_step": 2,
        "use_qk_norm": False,
        "rope_frequency_adjustment_factor": None,
    },
    "falcon_refinedweb_1b_en": {"layer_norm_epsilon": 1e-5},
    "pythia_410m_en": PYTHIA,
    "pythia_1.4b_en": PYTHIA,
    "gpt_oss_120b_en": {"rope_scaling_factor": 32.0, "sliding_window": 128},
    "mistral_7b_en": {"sliding_window": 4096},
    "mistral_0.3_7b_en": {"sliding_window": None, "rope_max_wavelength": 1e6},
    "mixtral_8_7b_en": {"sliding_window": None, "router_aux_loss_coef": 0.02},
    "phi3_mini_4k_instruct_en": {
        "rope_max_wavelength": 10000,
        "max_sequence_length": 4096,
        "pretraining_sequence_length": 4096,
        "rope_scaling_type": None,
        "layer_norm_epsilon": 1e-5,
    },
    "qwen3_moe_30b_a3b_en": {
        "sliding_window_size": None,
        "router_aux_loss_coefficient": 0.001,
    },
    "smollm3_3b_en": {"rope_theta": 5000000.0, "layer_norm_epsilon": 1e-6},
}


def preset_owner(preset):
    """The class name whose presets hold `preset` (the zoo's grouping)."""
    (name,) = [n for n in TINY_CONFIGS if preset in backbone_class(n).presets]
    return name


@pytest.mark.parametrize(
    "name, preset", [(preset_owner(p), p) for p in PRESETS], ids=list(PRESETS)
)
def test_preset_parameter_count_and_options(name, preset):
    cls = backbone_class(name)
    plan = cls.plan_layout(ONE_DEVICE, preset=preset)
    assert plan.total_params == PRESETS[preset]
    parameters = inspect.signature(cls.__init__).parameters
    for key, value in PRESET_OPTIONS.get(preset, {}).items():
        assert plan.config.get(key, parameters[key].default) == value, key


# === Sliding windows ===

# (target, overrides, reach): changing the first token changes the outputs
# of the first `reach` positions only (of 12). A window of w tokens moves
# w - 1 further each block.
WINDOWS = [
    ("MistralBackbone", {}, 1 + 2 * 3),
    (("MistralBackbone", "gqa_32_8_window_3"), {}, 3),
    (("MixtralBackbone", "e3_top1_gqa_8_2_window"), {}, 4),
    (("QwenBackbone", "gqa_28_4_untied_window"), {}, 3),
    # The size is ignored unless the window is switched on.
    (
        ("QwenBackbone", "gqa_28_4_untied_window"),
        {"use_sliding_window_attention": False},
        12,
    ),
    (("Qwen3Backbone", "gqa_32_8_untied_window"), {}, 3),
    (("Qwen3MoeBackbone", "e16_top8_gqa_32_4_sparse_step_2"), {}, 1 + 2 * 2),
    (("QwenMoeBackbone", "e60_top4_mha_16_16_dense_first"), {}, 1 + 2 * 3),
    # Llama 4's chunks of 3 on RoPE blocks; the NoPE block sees it all.
    ("Llama4Backbone", {"no_rope_layers": [1, 1]}, 3),
    ("Llama4Backbone", {}, 12),
    # Gemma 2 windows block 0 only, Gemma 3 five blocks of six.
    (("GemmaBackbone", "gqa_8_4_gemma2"), {}, 12),
    (("Gemma3Backbone", "mqa_4_1"), {}, 4),
    # keras-hub windows GPT-OSS's odd blocks, with the query and the
    # `sliding_window` (4) tokens before it; OpenAI's `layer_types` may
    # window any.
    ("GptOssBackbone", {}, 12),
    ("GptOssBackbone", {"layer_types": ["sliding_attention"] * 2}, 1 + 2 * 4),
]


@pytest.mark.parametrize(
    "target, overrides, reach", WINDOWS, ids=[row_id(*r[:2]) for r in WINDOWS]
)
def test_a_window_limits_how_far_a_token_reaches(target, overrides, reach):
    model, inputs = built(target, overrides)
    changed = dict(inputs, token_ids=inputs["token_ids"].copy())
    changed["token_ids"][:, 0] = changed["token_ids"][:, 0] % 50 + 1
    before = jit_forward(model, inputs)["sequence_output"]
    after = jit_forward(model, changed)["sequence_output"]
    # Row 0 starts with padding. The farthest positions in reach see the
    # change through one chain of attention weights, which in a row can
    # be below float32's resolution: each position in reach must move in
    # some row, and none beyond it in any.
    moved = np.abs(after[1:] - before[1:]).max(axis=-1) > 1e-6
    assert moved[:, :reach].any(axis=0).all(), moved
    assert not moved[:, reach:].any(), moved


# === MoE load-balancing losses ===

# (target, overrides, losses in training, bound): each is coef * E *
# sum(share * mean probability), in (0, coef * E] as shares sum to one.
AUX_LOSSES = [
    ("MixtralBackbone", {}, 2, 0.02 * 4),
    ("MixtralBackbone", {"router_aux_loss_coef": 0}, 0, 0),
    (("MixtralBackbone", "e3_top1_gqa_8_2_window"), {}, 1, 0.1 * 3),
    # A dense first block and a dense every second block add none.
    (("QwenMoeBackbone", "e60_top4_mha_16_16_dense_first"), {}, 1, 0.01 * 60),
    (
        ("Qwen3MoeBackbone", "e16_top8_gqa_32_4_sparse_step_2"),
        {},
        1,
        0.001 * 16,
    ),
]


@pytest.mark.parametrize(
    "target, overrides, count, bound",
    AUX_LOSSES,
    ids=[row_id(*row[:2]) for row in AUX_LOSSES],
)
def test_training_adds_a_loss_per_sparse_block(target, overrides, count, bound):
    model, inputs = built(target, overrides)
    _, losses, _ = train_pass(model, inputs)
    assert len(losses) == count
    assert all(0 < loss <= bound for loss in losses)
    # Inference adds none: traced, not compiled.
    values = [[v.value for v in model.trainable_variables]]
    values.append([v.value for v in model.non_trainable_variables])
    if keras.backend.backend() == "jax":
        import jax

        _, _, losses = jax.eval_shape(
            lambda: model.stateless_call(*values, inputs, return_losses=True)
        )
        assert losses == []
