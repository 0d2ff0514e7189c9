"""Every backbone class and its tiny configs: the enrolment list.

A class listed here runs through `tests/models/test_conformance.py` (paths
against keras-hub checkpoints, config round trip, plan == sharding on every
mesh, sharded == unsharded, LoRA under a mesh, preset round trips, and for
decoders causality and padding) and the preset tests in `tests/saving/`.

Each class has one or more tiny configs. The first, `"tiny"`, is the class's
default (`tiny(name)`), which keras-hub's class of the same name must also
accept. The others keep a family's distinctive shapes at a size that builds
in a fraction of a second: the presets' query:key/value head ratios, heads
or experts that some model axes do not divide, odd vocabularies, and
options (windows, RoPE scaling, dropout) whose config must round-trip.
"""

import dataclasses
import importlib

import numpy as np

DECODER = "decoder"
ENCODER = "encoder"

_SMALL = dict(vocabulary_size=96, num_layers=2, hidden_dim=32)


def _num_layers(config):
    return config["num_layers"]


@dataclasses.dataclass(frozen=True)
class Enrolment:
    """How a backbone class takes part in the shared checks.

    Attributes:
        module: where the class lives.
        configs: config name -> constructor arguments; `"tiny"` first.
        kind: `DECODER` (causal: the causality and padding checks run) or
            `ENCODER` (they don't).
        invisible_padding: for decoders, the side on which padding leaves
            the real tokens' outputs unchanged: `"left"` when positions are
            relative (RoPE, ALiBi), `"right"` when learned absolute
            positions count from the first slot, as in keras-hub.
        inputs: the backbone's input names.
        pooled: whether the outputs are `{"sequence_output",
            "pooled_output"}` rather than one tensor.
        distinct_blocks: config -> how many layers of each LoRA target
            name there are (ALBERT shares blocks across layers; an
            encoder-decoder has self- and cross-attention).
        make_inputs: optional `(config, batch=8, length=12, seed=0) ->
            dict` of NumPy inputs, for inputs other than token ids,
            segment ids and a padding mask (encoder-decoders, images).
        output_shapes: optional `(config, batch, length) -> {output name:
            shape}`, for outputs other than `sequence_output` (and
            `pooled_output`).
    """

    module: str
    configs: dict
    kind: str = DECODER
    invisible_padding: str = "left"
    inputs: tuple = ("token_ids", "padding_mask")
    pooled: bool = False
    distinct_blocks: object = _num_layers
    make_inputs: object = None
    output_shapes: object = None

    def inputs_for(self, backbone, config, **kwargs):
        """Random inputs for `backbone`: `make_inputs`, or token ids (and
        segment ids and a padding mask) by the backbone's input names."""
        if self.make_inputs is not None:
            return self.make_inputs(config, **kwargs)
        from tests.models.backbone_checks import inputs_for

        return inputs_for(backbone, config, **kwargs)


# Shared by the configs of a family; each entry says what it adds.
_ONE_BLOCK = dict(vocabulary_size=256, num_layers=1)
_GEMMA = dict(
    vocabulary_size=128, num_layers=2, hidden_dim=64, intermediate_dim=256
)
_GEMMA3 = dict(
    _ONE_BLOCK,
    image_size=None,
    hidden_dim=64,
    intermediate_dim=128,
    use_query_key_norm=True,
    use_post_ffw_norm=True,
    use_post_attention_norm=True,
    use_sliding_window_attention=True,
    sliding_window_size=4,
)
# BERT, ALBERT, ELECTRA: segments in, a pooled output out.
_BERT_LIKE = dict(
    kind=ENCODER,
    inputs=("token_ids", "segment_ids", "padding_mask"),
    pooled=True,
)


def _token_table_wide_outputs(config, batch, length):
    """OPT's outputs are as wide as its token table (`project_out`)."""
    width = config.get("token_embedding_dim") or config["hidden_dim"]
    return {"sequence_output": (batch, length, width)}


# Non-default options whose config must round-trip.
_ROPE_OPTIONS = dict(
    rope_max_wavelength=500, rope_scaling_factor=2.0, layer_norm_epsilon=1e-4
)


def _seq2seq_inputs(config, batch=8, length=12, seed=0):
    """BART's inputs: both sides padded on the right, where a causal
    decoder's padded queries still see real keys (their outputs are
    defined); the encoder's first row is padded too."""
    rng = np.random.default_rng(seed)
    inputs = {}
    for side, pad in (("encoder", 4), ("decoder", 3)):
        ids = rng.integers(1, config["vocabulary_size"], (batch, length))
        mask = np.ones((batch, length), "int32")
        mask[0, length - pad :] = 0
        ids[0, length - pad :] = 0
        inputs[f"{side}_token_ids"] = ids.astype("int32")
        inputs[f"{side}_padding_mask"] = mask
    return inputs


def _seq2seq_output_shapes(config, batch, length):
    shape = (batch, length, config["hidden_dim"])
    return {"encoder_sequence_output": shape, "decoder_sequence_output": shape}


def _image_text_inputs(config, batch=8, length=12, seed=0):
    """Images and a prompt + response, padded on the right (row 0), as
    PaliGemma takes them: the second half of each real text is the
    response."""
    rng = np.random.default_rng(seed)
    size = config["image_size"]
    ids = rng.integers(1, config["vocabulary_size"], (batch, length))
    mask = np.ones((batch, length), "int32")
    mask[0, length - 3 :] = 0
    ids[0, length - 3 :] = 0
    response = np.zeros((batch, length), "int32")
    response[:, length // 2 :] = 1
    response[0, length - 3 :] = 0
    return {
        "images": rng.uniform(-1, 1, (batch, size, size, 3)).astype("float32"),
        "token_ids": ids.astype("int32"),
        "padding_mask": mask,
        "response_mask": response,
    }


def _image_text_output_shapes(config, batch, length):
    patches = (config["image_size"] // config["vit_patch_size"]) ** 2
    return {"sequence_output": (batch, patches + length, config["hidden_dim"])}


def _whisper_inputs(config, batch=8, length=12, seed=0):
    """Whisper's inputs: `length` random mel frames, and decoder tokens
    padded on the right (see `_seq2seq_inputs`)."""
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(batch, length, config["num_mels"]))
    ids = rng.integers(1, config["vocabulary_size"], (batch, length))
    mask = np.ones((batch, length), "int32")
    mask[0, length - 3 :] = 0
    ids[0, length - 3 :] = 0
    return {
        "encoder_features": features.astype("float32"),
        "decoder_token_ids": ids.astype("int32"),
        "decoder_padding_mask": mask,
    }


def _whisper_output_shapes(config, batch, length):
    # The stride-2 convolution halves the frames.
    return {
        "encoder_sequence_output": (
            batch,
            (length + 1) // 2,
            config["hidden_dim"],
        ),
        "decoder_sequence_output": (batch, length, config["hidden_dim"]),
    }


def gemma4_config(**options):
    """A Gemma 4 config with every text option: local blocks (window 3,
    head_dim 8, 2 kv heads) and global ones (every second: head_dim 16, 1
    kv head whose keys are the values, half of each head rotated), the
    last two blocks sharing earlier blocks' keys and values with a
    double-wide feed-forward, per-layer inputs and a final soft cap;
    `options` add the sizes and override the rest (also for the oracle
    cases)."""
    return (
        dict(
            image_size=None,
            num_layers=4,
            num_query_heads=4,
            num_key_value_heads=2,
            head_dim=8,
            global_head_dim=16,
            sliding_window_size=3,
            sliding_window_pattern=2,
            num_kv_shared_layers=2,
            num_global_key_value_heads=1,
            hidden_size_per_layer_input=8,
            use_double_wide_mlp=True,
            global_rope_partial_rotary_factor=0.5,
            final_logit_soft_cap=30.0,
        )
        | options
    )


def qwen3_5_config(**options):
    """A Qwen 3.5 config with every option: a linear attention block (two
    key heads read by four value heads, a convolution of width 3) and a
    full attention block (2 key/value heads for 4 query heads, half of
    each head rotated, a window of 5); `options` add the sizes and
    override the rest (also for the oracle cases and the MoE class)."""
    return (
        dict(
            num_layers=2,
            num_query_heads=4,
            num_key_value_heads=2,
            head_dim=8,
            layer_types=["linear_attention", "full_attention"],
            partial_rotary_factor=0.5,
            rope_max_wavelength=100,
            sliding_window_size=5,
            linear_num_key_heads=2,
            linear_num_value_heads=4,
            linear_key_head_dim=8,
            linear_value_head_dim=8,
            linear_conv_kernel_dim=3,
        )
        | options
    )


# Qwen 3.5 MoE's feed-forward: 4 experts of width 16, a shared one of 24.
QWEN3_5_MOE_OPTIONS = dict(
    moe_intermediate_dim=16,
    shared_expert_intermediate_size=24,
    num_experts=4,
    top_k=2,
)


def _qwen3_5_lora_blocks(config):
    """Qwen 3.5's LoRA targets (query, value) are in its full attention
    blocks only."""
    from keras_nlp.models.qwen3_5.qwen3_5_backbone import qwen3_5_layer_types

    kinds = qwen3_5_layer_types(config["num_layers"], config.get("layer_types"))
    return kinds.count("full_attention")


def _gemma4_lora_blocks(config):
    """Gemma 4's LoRA targets per name, on average: every block has a
    query kernel, but only blocks with their own keys and values, and
    without keys as values (local ones), have a value kernel."""
    from keras_nlp.models.gemma4.gemma4_backbone import global_layers
    from keras_nlp.models.gemma4.gemma4_backbone import key_value_sources

    is_global = global_layers(
        config["num_layers"],
        config.get("sliding_window_pattern", 6),
        config.get("layer_types"),
    )
    shared = key_value_sources(is_global, config.get("num_kv_shared_layers", 0))
    keys_as_values = bool(config.get("num_global_key_value_heads"))
    values = sum(
        index not in shared and not (glob and keys_as_values)
        for index, glob in enumerate(is_global)
    )
    return (config["num_layers"] + values) / 2


# A Gemma 4 mixture of experts (26B-A4B's shape): 4 experts, 2 per token,
# beside the dense feed-forward; no per-layer inputs nor shared blocks.
GEMMA4_MOE_OPTIONS = dict(
    num_layers=3,
    num_kv_shared_layers=0,
    hidden_size_per_layer_input=0,
    use_double_wide_mlp=False,
    enable_moe_block=True,
    num_experts=4,
    expert_intermediate_dim=16,
    num_experts_per_token=2,
)


def _heads(query, key_value, **kwargs):
    return dict(num_query_heads=query, num_key_value_heads=key_value, **kwargs)


def smollm3_config(heads, key_value_heads, rope, **options):
    """A SmolLM3 config: `rope[i]` says whether layer `i` has RoPE;
    `options` add the sizes and override the rest (also for the oracle
    cases)."""
    return (
        dict(
            num_layers=len(rope),
            num_attention_heads=heads,
            num_key_value_heads=key_value_heads,
            attention_bias=False,
            attention_dropout=0.0,
            rope_layer_enabled_list=list(rope),
            layer_types=["full_attention"] * len(rope),
            mlp_bias=False,
            layer_norm_epsilon=1e-6,
            max_position_embeddings=128,
            rope_theta=10000.0,
            partial_rotary_factor=1.0,
        )
        | options
    )


def t5gemma_config(encoder, decoder, layer_types, **options):
    """A T5Gemma (or T5Gemma 2) config: `encoder` and `decoder` are
    `(hidden, intermediate, heads, key/value heads, head_dim)`, one block
    per entry of `layer_types` on each side; `options` add the rest
    (also for the oracle cases)."""
    config = dict(vocabulary_size=96)
    for side, sizes in (("encoder", encoder), ("decoder", decoder)):
        hidden, intermediate, heads, kv_heads, head_dim = sizes
        config.update(
            {
                f"{side}_hidden_dim": hidden,
                f"{side}_intermediate_dim": intermediate,
                f"{side}_num_layers": len(layer_types),
                f"{side}_num_attention_heads": heads,
                f"{side}_num_key_value_heads": kv_heads,
                f"{side}_head_dim": head_dim,
                f"{side}_layer_types": list(layer_types),
            }
        )
    return config | options


def _t5gemma_output_shapes(config, batch, length):
    return {
        f"{side}_sequence_output": (batch, length, config[f"{side}_hidden_dim"])
        for side in ("encoder", "decoder")
    }


_SLIDING_FULL = ("sliding_attention", "full_attention")
# T5Gemma: a window of 4 over 12 tokens, soft caps, queries scaled by the
# head size.
_T5GEMMA_TINY = t5gemma_config(
    (32, 48, 4, 2, 8),
    (32, 48, 4, 2, 8),
    _SLIDING_FULL,
    sliding_window=4,
    query_pre_attn_scalar=8.0,
    attn_logit_softcapping=50.0,
    final_logit_softcapping=30.0,
)


# BART, T5: token ids and padding masks of both stacks in, both sequences
# out; LoRA's targets in encoder self-attention, decoder self- and
# cross-attention.
_SEQ2SEQ = dict(
    kind=ENCODER,
    inputs=(
        "encoder_token_ids",
        "encoder_padding_mask",
        "decoder_token_ids",
        "decoder_padding_mask",
    ),
    distinct_blocks=lambda c: 3 * c["num_layers"],
    make_inputs=_seq2seq_inputs,
    output_shapes=_seq2seq_output_shapes,
)


TINY_CONFIGS = {
    "GemmaBackbone": Enrolment(
        "keras_nlp.models.gemma.gemma_backbone",
        {
            "tiny": dict(
                _SMALL, **_heads(4, 1), intermediate_dim=64, head_dim=8
            ),
            # gemma_2b_en's 8:1 multi-query heads.
            "mqa_8_1": dict(_GEMMA, **_heads(8, 1), head_dim=16),
            # gemma_7b_en's 16:16 multi-head.
            "mha_16_16": dict(_GEMMA, **_heads(16, 16), head_dim=8),
            # gemma2_2b_en's 8:4 with the Gemma 2 options.
            "gqa_8_4_gemma2": dict(
                _GEMMA,
                **_heads(8, 4),
                head_dim=16,
                query_head_dim_normalize=True,
                use_post_ffw_norm=True,
                use_post_attention_norm=True,
                final_logit_soft_cap=30.0,
                attention_logit_soft_cap=50.0,
                sliding_window_size=4,
                use_sliding_window_attention=True,
            ),
        },
    ),
    "Gemma3Backbone": Enrolment(
        "keras_nlp.models.gemma3.gemma3_backbone",
        {
            "tiny": dict(
                _SMALL,
                **_heads(4, 2),
                image_size=16,
                intermediate_dim=64,
                head_dim=8,
            ),
            # gemma3_270m, gemma3_1b: 4:1 multi-query.
            "mqa_4_1": dict(_GEMMA3, **_heads(4, 1), head_dim=16),
            # gemma3_4b_text: 8:4, with an odd (prime) vocabulary, so the
            # embedding takes its (DATA, MODEL) alternative or falls back.
            "gqa_8_4_odd_vocab": dict(
                _GEMMA3, **_heads(8, 4), head_dim=16, vocabulary_size=251
            ),
            # gemma3_27b_text (and gemma3_12b_text, 16:8): 32:16, queries
            # scaled by hidden / heads; soft caps and RoPE scaling.
            "gqa_32_16": dict(
                _GEMMA3,
                **_heads(32, 16),
                head_dim=4,
                query_head_dim_normalize=False,
                attention_logit_soft_cap=50.0,
                final_logit_soft_cap=30.0,
                local_rope_scaling_factor=2.0,
                global_rope_scaling_factor=8.0,
            ),
        },
    ),
    "LlamaBackbone": Enrolment(
        "keras_nlp.models.llama.llama_backbone",
        {
            "tiny": dict(_SMALL, **_heads(4, 4), intermediate_dim=48),
            # llama2_7b_en: 32:32 multi-head, untied; Llama 3.1 RoPE
            # scaling.
            "mha_32_32": dict(
                _ONE_BLOCK,
                **_heads(32, 32),
                hidden_dim=128,
                intermediate_dim=128,
                rope_frequency_adjustment_factor=8.0,
                rope_low_freq_factor=1.0,
                rope_high_freq_factor=4.0,
                rope_pretraining_sequence_length=16,
            ),
        },
    ),
    "Llama3Backbone": Enrolment(
        "keras_nlp.models.llama3.llama3_backbone",
        {
            "tiny": dict(_SMALL, **_heads(8, 2), intermediate_dim=48),
            # llama3_8b_en / llama3.2_1b: 32:8, 4 query heads per KV head.
            "gqa_32_8": dict(
                _ONE_BLOCK,
                **_heads(32, 8),
                hidden_dim=128,
                intermediate_dim=128,
            ),
            # llama3.2_3b: 24:8 (3 per KV head), tied.
            "gqa_24_8_tied": dict(
                _ONE_BLOCK,
                **_heads(24, 8),
                hidden_dim=96,
                intermediate_dim=128,
                tie_word_embeddings=True,
            ),
        },
    ),
    "MistralBackbone": Enrolment(
        "keras_nlp.models.mistral.mistral_backbone",
        {
            "tiny": dict(
                _SMALL, **_heads(8, 2), intermediate_dim=48, sliding_window=4
            ),
            # Both presets' 32:8 heads, a window shorter than the inputs.
            "gqa_32_8_window_3": dict(
                _ONE_BLOCK,
                **_heads(32, 8),
                hidden_dim=128,
                intermediate_dim=128,
                sliding_window=3,
            ),
            # The same 4:1 ratio with 2 key/value heads, which the model
            # axes 4 and 8 do not divide; no window (v0.3); an explicit
            # head_dim and non-default options.
            "gqa_8_2_no_window": dict(
                _ONE_BLOCK,
                **_heads(8, 2, head_dim=16),
                **_ROPE_OPTIONS,
                hidden_dim=64,
                intermediate_dim=96,
                sliding_window=None,
                dropout=0.1,
            ),
        },
    ),
    # Chunked local attention and temperature tuning count positions from
    # the first slot: padding is invisible on the right only.
    "Llama4Backbone": Enrolment(
        "keras_nlp.models.llama4.llama4_backbone",
        {
            # Scout's pattern: every block MoE, query/key norm; block 1 a
            # global NoPE block with temperature tuning; chunks of 3.
            "tiny": dict(
                _SMALL,
                **_heads(4, 2),
                intermediate_dim=16,
                intermediate_dim_mlp=48,
                num_experts=4,
                no_rope_layers=[1, 0],
                attention_chunk_size=3,
                floor_scale=2,
            ),
            # Maverick's: 40:8 heads in miniature (5:1), MoE on every
            # other block after a dense one, no query/key norm, top 2,
            # Llama 3.1 RoPE scaling.
            "e8_top2_gqa_10_2_step_2": dict(
                vocabulary_size=256,
                num_layers=2,
                **_heads(10, 2, head_dim=8),
                hidden_dim=40,
                intermediate_dim=16,
                intermediate_dim_mlp=64,
                num_experts=8,
                top_k=2,
                interleave_moe_layer_step=2,
                no_rope_layers=[1, 0],
                attention_chunk_size=4,
                use_qk_norm=False,
                floor_scale=3,
                attn_scale=0.2,
                rope_max_wavelength=500.0,
                rope_frequency_adjustment_factor=8.0,
                rope_low_freq_factor=1.0,
                rope_high_freq_factor=4.0,
                rope_pretraining_sequence_length=16,
                layer_norm_epsilon=1e-4,
            ),
        },
        invisible_padding="right",
    ),
    "MixtralBackbone": Enrolment(
        "keras_nlp.models.mixtral.mixtral_backbone",
        {
            "tiny": dict(
                _SMALL,
                **_heads(8, 2),
                intermediate_dim=48,
                num_experts=4,
                top_k=2,
            ),
            # mixtral_8_7b_en's 8 experts (top 2) and 32:8 heads.
            "e8_top2_gqa_32_8": dict(
                _ONE_BLOCK,
                **_heads(32, 8),
                hidden_dim=128,
                intermediate_dim=32,
                num_experts=8,
                top_k=2,
                sliding_window=None,
            ),
            # 3 experts divide no model axis: their feed-forward width is
            # sharded instead. Non-default router and RoPE options.
            "e3_top1_gqa_8_2_window": dict(
                _ONE_BLOCK,
                **_heads(8, 2),
                **_ROPE_OPTIONS,
                hidden_dim=32,
                intermediate_dim=48,
                num_experts=3,
                top_k=1,
                sliding_window=4,
                router_jitter_noise=0.1,
                router_aux_loss_coef=0.1,
                dropout=0.1,
            ),
        },
    ),
    "Phi3Backbone": Enrolment(
        "keras_nlp.models.phi3.phi3_backbone",
        {
            "tiny": dict(_SMALL, **_heads(4, 4), intermediate_dim=48),
            # phi3_mini: 32:32 multi-head, untied, vocabulary 32064 = 64 *
            # 501.
            "mha_32_32": dict(
                _ONE_BLOCK,
                **_heads(32, 32),
                vocabulary_size=192,
                hidden_dim=64,
                intermediate_dim=128,
            ),
            # Su RoPE past its pretraining length (the inputs have 12
            # tokens), an odd vocabulary and 4 heads that an 8-way axis
            # can't split.
            "mha_4_4_su_odd_vocab": dict(
                _ONE_BLOCK,
                **_heads(4, 4),
                vocabulary_size=257,
                hidden_dim=32,
                intermediate_dim=48,
                max_sequence_length=64,
                pretraining_sequence_length=8,
                rope_scaling_type="su",
                rope_scaling_short_factor=[1.0, 1.2, 1.4, 1.6],
                rope_scaling_long_factor=[1.0, 3.0, 9.0, 27.0],
                rope_max_wavelength=500,
                layer_norm_epsilon=1e-5,
                dropout=0.1,
            ),
        },
    ),
    "QwenBackbone": Enrolment(
        "keras_nlp.models.qwen.qwen_backbone",
        {
            "tiny": dict(
                _SMALL,
                **_heads(8, 2),
                intermediate_dim=48,
                tie_word_embeddings=True,
            ),
            # qwen2.5_0.5b_en: 14:2, tied; 14 query heads divide only the
            # model axes 1 and 2.
            "gqa_14_2_tied": dict(
                _ONE_BLOCK, **_heads(14, 2), hidden_dim=56, intermediate_dim=96
            ),
            # qwen2.5_3b_en: 16:2, tied.
            "gqa_16_2_tied": dict(
                _ONE_BLOCK, **_heads(16, 2), hidden_dim=64, intermediate_dim=96
            ),
            # qwen2.5_7b_en: 28:4, untied; 28 and 4 do not divide model 8.
            # With a sliding window and non-default RoPE options.
            "gqa_28_4_untied_window": dict(
                _ONE_BLOCK,
                **_heads(28, 4),
                **_ROPE_OPTIONS,
                hidden_dim=56,
                intermediate_dim=96,
                tie_word_embeddings=False,
                use_sliding_window_attention=True,
                sliding_window_size=3,
            ),
        },
    ),
    "Qwen3Backbone": Enrolment(
        "keras_nlp.models.qwen3.qwen3_backbone",
        {
            "tiny": dict(
                _SMALL, **_heads(4, 2, head_dim=16), intermediate_dim=48
            ),
            # qwen3_0.6b_en: 16:8, tied, head_dim * heads = 2 * hidden_dim.
            "gqa_16_8_tied": dict(
                _ONE_BLOCK,
                **_heads(16, 8, head_dim=8),
                hidden_dim=64,
                intermediate_dim=96,
            ),
            # qwen3_8b_en: 32:8, untied, head_dim * heads = hidden_dim.
            # With a sliding window and RoPE scaling.
            "gqa_32_8_untied_window": dict(
                _ONE_BLOCK,
                **_heads(32, 8, head_dim=2),
                **_ROPE_OPTIONS,
                hidden_dim=64,
                intermediate_dim=96,
                tie_word_embeddings=False,
                sliding_window_size=3,
            ),
        },
    ),
    "QwenMoeBackbone": Enrolment(
        "keras_nlp.models.qwen_moe.qwen_moe_backbone",
        {
            "tiny": dict(
                _SMALL,
                **_heads(4, 2),
                intermediate_dim=48,
                moe_intermediate_dim=16,
                shared_expert_intermediate_dim=24,
                num_experts=4,
                top_k=2,
            ),
            # qwen1.5_moe_2.7b_en: 60 experts (top 4), which an 8-way axis
            # does not divide, and 16:16 heads. A dense first block, a
            # window, renormalized routing and non-default options.
            "e60_top4_mha_16_16_dense_first": dict(
                vocabulary_size=256,
                num_layers=2,
                **_heads(16, 16),
                **_ROPE_OPTIONS,
                hidden_dim=64,
                intermediate_dim=32,
                moe_intermediate_dim=8,
                shared_expert_intermediate_dim=16,
                num_experts=60,
                top_k=4,
                norm_top_k_prob=True,
                mlp_only_layers=[0],
                use_sliding_window_attention=True,
                sliding_window_size=4,
                router_aux_loss_coefficient=0.01,
            ),
        },
    ),
    "Qwen3MoeBackbone": Enrolment(
        "keras_nlp.models.qwen3_moe.qwen3_moe_backbone",
        {
            "tiny": dict(
                _SMALL,
                **_heads(4, 2, head_dim=16),
                intermediate_dim=48,
                moe_intermediate_dim=16,
                num_experts=4,
                top_k=2,
            ),
            # The presets' 32:4 heads (4 divide no 8-way axis) and top 8;
            # every second block sparse, a window and RoPE options.
            "e16_top8_gqa_32_4_sparse_step_2": dict(
                vocabulary_size=256,
                num_layers=2,
                **_heads(32, 4, head_dim=4),
                **_ROPE_OPTIONS,
                hidden_dim=64,
                intermediate_dim=96,
                moe_intermediate_dim=8,
                num_experts=16,
                top_k=8,
                norm_top_k_prob=True,
                decoder_sparse_step=2,
                sliding_window_size=3,
                tie_word_embeddings=True,
            ),
        },
    ),
    "DeepSeekV3Backbone": Enrolment(
        "keras_nlp.models.deepseek_v3.deepseek_v3_backbone",
        {
            # MLA with both latents, a dense first block, then 8 routed
            # experts in 4 groups (2 kept, 2 per token) and a shared one.
            "tiny": dict(
                _SMALL,
                num_query_heads=8,
                intermediate_dim=48,
                moe_intermediate_dim=8,
                n_routed_experts=8,
                n_shared_experts=1,
                num_experts_per_tok=2,
                n_group=4,
                topk_group=2,
                routed_scaling_factor=2.5,
                first_k_dense_replace=1,
                q_lora_rank=16,
                kv_lora_rank=8,
                qk_nope_head_dim=4,
                qk_rope_head_dim=4,
                v_head_dim=4,
                rope_scaling_factor=4.0,
                rope_original_max_position_embeddings=8,
                rope_mscale_all_dims=1.0,
            ),
        },
    ),
    "GptOssBackbone": Enrolment(
        "keras_nlp.models.gpt_oss.gpt_oss_backbone",
        {
            "tiny": dict(
                _SMALL,
                **_heads(4, 2),
                intermediate_dim=16,
                num_experts=4,
                top_k=2,
                sliding_window=4,
            ),
            # The presets' 8:1 query:key/value heads with heads * head_dim
            # wider than hidden, YaRN, a window on block 1; 6 experts (top
            # 3) that no 4- or 8-way axis divides.
            "e6_top3_gqa_16_2_yarn": dict(
                vocabulary_size=256,
                num_layers=2,
                **_heads(16, 2, head_dim=8),
                hidden_dim=48,
                intermediate_dim=8,
                num_experts=6,
                top_k=3,
                rope_max_wavelength=150000,
                rope_scaling_factor=32.0,
                layer_norm_epsilon=1e-5,
                sliding_window=3,
            ),
        },
    ),
    "GPT2Backbone": Enrolment(
        "keras_nlp.models.gpt2.gpt2_backbone",
        {
            "tiny": dict(
                _SMALL,
                vocabulary_size=97,
                num_heads=4,
                intermediate_dim=64,
                max_sequence_length=32,
            ),
            # GPT-2's odd vocabulary; 8 heads divide every model axis (like
            # medium's 16), 5 divide none (like extra large's 25).
            "odd_vocab_8_heads": dict(
                _ONE_BLOCK,
                vocabulary_size=257,
                hidden_dim=64,
                intermediate_dim=128,
                num_heads=8,
                dropout=0.0,
                max_sequence_length=16,
            ),
            "odd_vocab_5_heads": dict(
                _ONE_BLOCK,
                vocabulary_size=257,
                hidden_dim=40,
                intermediate_dim=64,
                num_heads=5,
                dropout=0.1,
                max_sequence_length=16,
            ),
        },
        invisible_padding="right",
    ),
    "OPTBackbone": Enrolment(
        "keras_nlp.models.opt.opt_backbone",
        {
            "tiny": dict(
                _SMALL, num_heads=4, intermediate_dim=64, max_sequence_length=32
            ),
            # A vocabulary divisible by 32 (50272). 8 heads divide every
            # model axis (like the 32 of 1.3b and up); 4 fail on 8 only,
            # like 125m's 12.
            "vocab_32x_8_heads": dict(
                _ONE_BLOCK,
                vocabulary_size=288,
                hidden_dim=64,
                intermediate_dim=128,
                num_heads=8,
                dropout=0.0,
                max_sequence_length=16,
            ),
            "vocab_32x_4_heads": dict(
                _ONE_BLOCK,
                vocabulary_size=288,
                hidden_dim=32,
                intermediate_dim=64,
                num_heads=4,
                dropout=0.1,
                max_sequence_length=16,
            ),
            # OPT-350M: post-LayerNorm blocks, no final LayerNorm, a token
            # table narrower than the blocks and projections between them.
            "post_norm_projected": dict(
                _ONE_BLOCK,
                num_layers=2,
                vocabulary_size=288,
                hidden_dim=64,
                intermediate_dim=128,
                num_heads=8,
                dropout=0.0,
                max_sequence_length=16,
                normalize_first=False,
                token_embedding_dim=32,
            ),
        },
        invisible_padding="right",
        output_shapes=_token_table_wide_outputs,
    ),
    "GPTNeoXBackbone": Enrolment(
        "keras_nlp.models.gpt_neo_x.gpt_neo_x_backbone",
        {
            "tiny": dict(
                _SMALL, num_heads=4, intermediate_dim=64, max_sequence_length=32
            ),
            # Pythia: multi-head, 16 heads, a vocabulary divisible by 8.
            "pythia_like": dict(
                _ONE_BLOCK,
                num_layers=2,
                hidden_dim=64,
                intermediate_dim=128,
                num_heads=8,
                rotary_percentage=0.25,
            ),
            # An odd vocabulary, fewer heads than the largest model axis,
            # every feature rotated, non-default options.
            "odd_vocab_4_heads": dict(
                _ONE_BLOCK,
                vocabulary_size=257,
                hidden_dim=32,
                intermediate_dim=48,
                num_heads=4,
                rotary_percentage=1.0,
                rotary_max_wavelength=500,
                layer_norm_epsilon=1e-4,
                max_sequence_length=64,
                dropout=0.1,
            ),
        },
    ),
    "BloomBackbone": Enrolment(
        "keras_nlp.models.bloom.bloom_backbone",
        {
            "tiny": dict(_SMALL, num_heads=4, intermediate_dim=64),
            # The presets are multi-head (16 and 32 heads) with a
            # vocabulary divisible by 1024.
            "bloom_like": dict(
                _ONE_BLOCK,
                num_layers=2,
                hidden_dim=64,
                intermediate_dim=128,
                num_heads=8,
            ),
            # An odd vocabulary and 6 heads, which no model axis above 2
            # divides; non-default options.
            "odd_vocab_6_heads": dict(
                _ONE_BLOCK,
                vocabulary_size=257,
                hidden_dim=48,
                intermediate_dim=64,
                num_heads=6,
                layer_norm_epsilon=1e-4,
                dropout=0.1,
            ),
        },
    ),
    "FalconBackbone": Enrolment(
        "keras_nlp.models.falcon.falcon_backbone",
        {
            "tiny": dict(_SMALL, num_attention_heads=4, intermediate_dim=64),
            # falcon_refinedweb_1b_en: multi-head, a vocabulary divisible
            # by 128.
            "falcon_like": dict(
                _ONE_BLOCK,
                num_layers=2,
                hidden_dim=64,
                intermediate_dim=128,
                num_attention_heads=8,
            ),
            # An odd vocabulary and 6 heads, which no model axis above 2
            # divides; non-default options.
            "odd_vocab_6_heads": dict(
                _ONE_BLOCK,
                vocabulary_size=257,
                hidden_dim=48,
                intermediate_dim=64,
                num_attention_heads=6,
                layer_norm_epsilon=1e-4,
                attention_dropout_rate=0.1,
                feedforward_dropout_rate=0.2,
            ),
            # Falcon-7B's options: one key/value head (replicated on the
            # model axis), rotary, one norm per parallel block, no biases.
            "falcon_7b_like": dict(
                _ONE_BLOCK,
                hidden_dim=64,
                intermediate_dim=128,
                num_attention_heads=8,
                num_key_value_heads=1,
                rotary_max_wavelength=10000.0,
                parallel_residual=True,
                shared_layer_norm=True,
                use_bias=False,
            ),
        },
    ),
    "BertBackbone": Enrolment(
        "keras_nlp.models.bert.bert_backbone",
        {
            # A vocabulary that divides only by 2, like the uncased 30522.
            "tiny": dict(
                _SMALL,
                vocabulary_size=98,
                num_heads=4,
                intermediate_dim=64,
                max_sequence_length=32,
            ),
            # bert_tiny_en_uncased: 2 heads, which the model axes 4 and 8
            # do not divide; non-default options.
            "two_heads": dict(
                _ONE_BLOCK,
                vocabulary_size=98,
                num_heads=2,
                hidden_dim=32,
                intermediate_dim=64,
                max_sequence_length=16,
                num_segments=3,
                dropout=0.0,
            ),
            # bert_base: 12 heads, which an 8-way axis does not divide.
            "twelve_heads": dict(
                _ONE_BLOCK,
                vocabulary_size=98,
                num_heads=12,
                hidden_dim=96,
                intermediate_dim=128,
                max_sequence_length=16,
            ),
        },
        **_BERT_LIKE,
    ),
    "AlbertBackbone": Enrolment(
        "keras_nlp.models.albert.albert_backbone",
        {
            # 2 groups of 2 distinct blocks, each group run twice (8 block
            # calls, 4 blocks of weights); embeddings narrower than hidden.
            "tiny": dict(
                _SMALL,
                num_layers=4,
                num_heads=4,
                embedding_dim=16,
                intermediate_dim=64,
                num_groups=2,
                num_inner_repetitions=2,
                max_sequence_length=32,
            ),
            # albert_base_en_uncased: one block shared by every layer, 12
            # heads (which an 8-way axis does not divide), a vocabulary
            # that divides by 16 like 30000; non-default dropout.
            "shared_twelve_heads": dict(
                _ONE_BLOCK,
                num_layers=2,
                num_heads=12,
                embedding_dim=16,
                hidden_dim=96,
                intermediate_dim=128,
                max_sequence_length=16,
                dropout=0.1,
            ),
        },
        distinct_blocks=lambda c: (
            c.get("num_groups", 1) * c.get("num_inner_repetitions", 1)
        ),
        **_BERT_LIKE,
    ),
    "ElectraBackbone": Enrolment(
        "keras_nlp.models.electra.electra_backbone",
        {
            # electra_small_discriminator_uncased_en: embeddings half the
            # hidden width (projected), 4 heads, a vocabulary that divides
            # only by 2 like 30522.
            "tiny": dict(
                vocab_size=98,
                num_layers=2,
                num_heads=4,
                hidden_dim=32,
                embedding_dim=16,
                intermediate_dim=64,
                max_sequence_length=32,
            ),
            # electra_base_discriminator_uncased_en: no projection, 12
            # heads; non-default options.
            "twelve_heads_unprojected": dict(
                vocab_size=98,
                num_layers=1,
                num_heads=12,
                hidden_dim=96,
                embedding_dim=96,
                intermediate_dim=128,
                max_sequence_length=16,
                num_segments=3,
                dropout=0.0,
            ),
        },
        **_BERT_LIKE,
    ),
    "RobertaBackbone": Enrolment(
        "keras_nlp.models.roberta.roberta_backbone",
        {
            # An odd vocabulary, like 50265: no model axis divides it.
            "tiny": dict(
                _SMALL,
                vocabulary_size=97,
                num_heads=4,
                intermediate_dim=64,
                max_sequence_length=32,
            ),
            # roberta_base_en: 12 heads, which an 8-way axis does not
            # divide, and the odd vocabulary; non-default dropout.
            "twelve_heads_odd_vocab": dict(
                _ONE_BLOCK,
                vocabulary_size=97,
                num_heads=12,
                hidden_dim=96,
                intermediate_dim=128,
                max_sequence_length=16,
                dropout=0.0,
            ),
        },
        kind=ENCODER,
    ),
    "XLMRobertaBackbone": Enrolment(
        "keras_nlp.models.xlm_roberta.xlm_roberta_backbone",
        {
            # A vocabulary that divides only by 2, like 250002.
            "tiny": dict(
                _SMALL,
                vocabulary_size=98,
                num_heads=4,
                intermediate_dim=64,
                max_sequence_length=32,
            ),
            # xlm_roberta_large_multi: 16 heads on the 2-only vocabulary.
            "sixteen_heads": dict(
                _ONE_BLOCK,
                vocabulary_size=98,
                num_heads=16,
                hidden_dim=64,
                intermediate_dim=128,
                max_sequence_length=16,
            ),
        },
        kind=ENCODER,
    ),
    "DistilBertBackbone": Enrolment(
        "keras_nlp.models.distil_bert.distil_bert_backbone",
        {
            # A vocabulary that divides only by 2, like the uncased 30522.
            "tiny": dict(
                _SMALL,
                vocabulary_size=98,
                num_heads=4,
                intermediate_dim=64,
                max_sequence_length=32,
            ),
            # distil_bert_base_en_uncased: 12 heads, which an 8-way axis
            # does not divide; non-default dropout.
            "twelve_heads": dict(
                _ONE_BLOCK,
                vocabulary_size=98,
                num_heads=12,
                hidden_dim=96,
                intermediate_dim=128,
                max_sequence_length=16,
                dropout=0.0,
            ),
        },
        kind=ENCODER,
    ),
    "FNetBackbone": Enrolment(
        "keras_nlp.models.f_net.f_net_backbone",
        {
            # No heads, no mask; a vocabulary divisible by 32 like 32000.
            "tiny": dict(
                _SMALL,
                intermediate_dim=64,
                max_sequence_length=32,
                num_segments=4,
            ),
            # f_net_base_en: a hidden width of 3 x 2^k like 768, so the
            # Fourier transform's hidden axis is not a power of two;
            # non-default options.
            "hidden_3x16": dict(
                _ONE_BLOCK,
                hidden_dim=48,
                intermediate_dim=192,
                max_sequence_length=16,
                num_segments=2,
                dropout=0.0,
            ),
        },
        kind=ENCODER,
        inputs=("token_ids", "segment_ids"),
        pooled=True,
    ),
    "DebertaV3Backbone": Enrolment(
        "keras_nlp.models.deberta_v3.deberta_v3_backbone",
        {
            # Offsets beyond bucket_size // 2 = 2 share log buckets in the
            # 12-token inputs.
            "tiny": dict(
                _SMALL,
                num_heads=4,
                intermediate_dim=64,
                max_sequence_length=16,
                bucket_size=4,
            ),
            # deberta_v3_extra_small_en: 6 heads, which the model axes 4
            # and 8 do not divide; a vocabulary that divides by 4 but not
            # 8 like 128100. Inputs longer than max_sequence_length: far
            # offsets clip to the last bucket. Non-default dropout.
            "six_heads": dict(
                _ONE_BLOCK,
                vocabulary_size=100,
                num_heads=6,
                hidden_dim=48,
                intermediate_dim=64,
                max_sequence_length=8,
                bucket_size=4,
                dropout=0.0,
            ),
            # deberta_v3_base_en: 12 heads, which an 8-way axis does not
            # divide.
            "twelve_heads": dict(
                _ONE_BLOCK,
                vocabulary_size=100,
                num_heads=12,
                hidden_dim=96,
                intermediate_dim=128,
                max_sequence_length=16,
                bucket_size=8,
            ),
        },
        kind=ENCODER,
    ),
    "BartBackbone": Enrolment(
        "keras_nlp.models.bart.bart_backbone",
        {
            # An odd vocabulary, like 50265: no model axis divides it.
            "tiny": dict(
                _SMALL,
                vocabulary_size=97,
                num_heads=4,
                intermediate_dim=64,
                max_sequence_length=32,
            ),
            # bart_base_en: 12 heads, which an 8-way axis does not divide,
            # in the encoder, decoder and cross-attention; no dropout.
            "twelve_heads": dict(
                _ONE_BLOCK,
                vocabulary_size=97,
                num_heads=12,
                hidden_dim=96,
                intermediate_dim=128,
                max_sequence_length=16,
                dropout=0.0,
            ),
        },
        **_SEQ2SEQ,
    ),
    "Gemma4Backbone": Enrolment(
        "keras_nlp.models.gemma4.gemma4_backbone",
        {
            # Every option at once, the experts too (so that the expert
            # parallel checks take it); three blocks: local, global, and a
            # local one reading block 0's keys and values. Every token
            # takes every expert, with its own weights: a near tie of the
            # router's small logits would pick other experts in bfloat16
            # (the oracle rows pick 2 of 4).
            "tiny": gemma4_config(
                vocabulary_size=96,
                hidden_dim=32,
                intermediate_dim=48,
                num_layers=3,
                num_kv_shared_layers=1,
                enable_moe_block=True,
                num_experts=4,
                expert_intermediate_dim=16,
                num_experts_per_token=4,
            ),
            "dense": gemma4_config(
                vocabulary_size=96, hidden_dim=32, intermediate_dim=48
            ),
        },
        distinct_blocks=_gemma4_lora_blocks,
    ),
    "Qwen3_5Backbone": Enrolment(
        "keras_nlp.models.qwen3_5.qwen3_5_backbone",
        {
            "tiny": qwen3_5_config(
                vocabulary_size=96, hidden_dim=32, intermediate_dim=48
            ),
        },
        distinct_blocks=_qwen3_5_lora_blocks,
    ),
    # Every token takes every expert (their own weights): a near tie of
    # the router's small logits would pick other experts in bfloat16 (the
    # oracle rows pick 2 of 4).
    "Qwen3_5MoeBackbone": Enrolment(
        "keras_nlp.models.qwen3_5_moe.qwen3_5_moe_backbone",
        {
            "tiny": qwen3_5_config(
                vocabulary_size=96,
                hidden_dim=32,
                **dict(QWEN3_5_MOE_OPTIONS, top_k=4),
            ),
        },
        distinct_blocks=_qwen3_5_lora_blocks,
    ),
    "SmolLM3Backbone": Enrolment(
        "keras_nlp.models.smollm3.smollm3_backbone",
        {
            # The second layer has no RoPE.
            "tiny": smollm3_config(
                4,
                2,
                (True, False),
                vocabulary_size=96,
                hidden_dim=32,
                intermediate_dim=48,
            ),
            # smollm3_3b_en: 16:4, every fourth layer without RoPE; with
            # biases, dropout and another RoPE base, which must round-trip.
            "gqa_16_4_bias": dict(
                smollm3_config(
                    16,
                    4,
                    (True, True, True, False),
                    vocabulary_size=256,
                    hidden_dim=64,
                    intermediate_dim=96,
                ),
                attention_bias=True,
                mlp_bias=True,
                attention_dropout=0.1,
                rope_theta=500.0,
                layer_norm_epsilon=1e-4,
            ),
        },
    ),
    "T5GemmaBackbone": Enrolment(
        "keras_nlp.models.t5gemma.t5gemma_backbone",
        {
            "tiny": _T5GEMMA_TINY,
            # t5gemma_9b_2b: an encoder wider than the decoder, whose
            # cross-attention projects keys and values from it; 8:4 and
            # 4:1 heads, biases, an untied output, dropout.
            "wide_encoder_bias_untied": t5gemma_config(
                (48, 64, 8, 4, 8),
                (32, 48, 4, 1, 8),
                _SLIDING_FULL,
                sliding_window=5,
                query_pre_attn_scalar=16.0,
                attention_bias=True,
                tie_word_embeddings=False,
                dropout_rate=0.1,
                attention_dropout=0.1,
                rope_max_wavelength=500.0,
                cross_attention_hidden_size=48,
            ),
        },
        **dict(
            _SEQ2SEQ,
            distinct_blocks=lambda c: 3 * c["encoder_num_layers"],
            output_shapes=_t5gemma_output_shapes,
        ),
    ),
    "T5Gemma2Backbone": Enrolment(
        "keras_nlp.models.t5gemma2.t5gemma2_backbone",
        {
            "tiny": t5gemma_config(
                (32, 48, 4, 2, 8),
                (32, 48, 4, 2, 8),
                _SLIDING_FULL,
                sliding_window=4,
                query_pre_attn_scalar=8.0,
            ),
            # t5gemma2_270m / 1b's 4:1 heads; the 4b's scaled global RoPE;
            # an odd window, the encoder's own RoPE options, biases, an
            # untied output, soft caps and dropout.
            "mqa_4_1_options": t5gemma_config(
                (32, 48, 4, 1, 8),
                (32, 48, 4, 1, 8),
                _SLIDING_FULL,
                sliding_window=3,
                query_pre_attn_scalar=16.0,
                global_rope_scaling_factor=8.0,
                encoder_rope_max_wavelength=500.0,
                encoder_global_rope_scaling_factor=2.0,
                attention_bias=True,
                tie_word_embeddings=False,
                attn_logit_softcapping=50.0,
                final_logit_softcapping=30.0,
                dropout_rate=0.1,
            ),
        },
        **dict(
            _SEQ2SEQ,
            # One merged attention per decoder block.
            distinct_blocks=lambda c: 2 * c["encoder_num_layers"],
            output_shapes=_t5gemma_output_shapes,
        ),
    ),
    "T5Backbone": Enrolment(
        "keras_nlp.models.t5.t5_backbone",
        {
            # flan_small_multi: gated GELU, untied, 6 heads of a width
            # (key_value_dim) that does not give hidden_dim, so the flat
            # heads (48) divide by 4 and 8 while the heads don't.
            "tiny": dict(
                _SMALL,
                num_heads=6,
                key_value_dim=8,
                intermediate_dim=48,
                activation="gelu",
                use_gated_activation=True,
                tie_embedding_weights=False,
            ),
            # t5_small_multi: ReLU, not gated, tied, 8 heads that every
            # model axis divides; non-default epsilon and no dropout.
            "relu_tied_8_heads": dict(
                _ONE_BLOCK,
                num_heads=8,
                hidden_dim=64,
                intermediate_dim=128,
                activation="relu",
                use_gated_activation=False,
                tie_embedding_weights=True,
                layer_norm_epsilon=1e-5,
                dropout=0.0,
            ),
        },
        **_SEQ2SEQ,
    ),
    "XLNetBackbone": Enrolment(
        "keras_nlp.models.xlnet.xlnet_backbone",
        {
            # 4 heads, which the 8-way axis does not divide; a vocabulary
            # divisible by 32 like 32000.
            "tiny": dict(_SMALL, num_heads=4, intermediate_dim=64),
            # xlnet_base_like (keras-hub has no preset): 12 heads, which an
            # 8-way axis does not divide; non-default dropout.
            "twelve_heads": dict(
                _ONE_BLOCK,
                num_heads=12,
                hidden_dim=96,
                intermediate_dim=128,
                dropout=0.1,
            ),
        },
        kind=ENCODER,
        inputs=("token_ids", "padding_mask", "segment_ids"),
    ),
    "PaliGemmaBackbone": Enrolment(
        "keras_nlp.models.pali_gemma.pali_gemma_backbone",
        {
            # PaliGemma 1 (Gemma 2B's 8:1 heads, here 4:1); the vision
            # tower's 8 heads divide every model axis, like SigLIP's 16.
            "tiny": dict(
                _SMALL,
                **_heads(4, 1),
                intermediate_dim=64,
                head_dim=8,
                image_size=16,
                vit_patch_size=4,
                vit_num_heads=8,
                vit_hidden_dim=32,
                vit_num_layers=2,
                vit_intermediate_dim=64,
            ),
            # PaliGemma 2 (Gemma 2 2B's 8:4 heads): post-norms, soft caps,
            # a window shorter than the 16 patches + 12 tokens; SigLIP's 16
            # vision heads.
            "gemma2_8_4": dict(
                _ONE_BLOCK,
                **_heads(8, 4),
                hidden_dim=64,
                intermediate_dim=128,
                head_dim=8,
                image_size=16,
                vit_patch_size=4,
                vit_num_heads=16,
                vit_hidden_dim=32,
                vit_num_layers=1,
                vit_intermediate_dim=48,
                use_post_ffw_norm=True,
                use_post_attention_norm=True,
                attention_logit_soft_cap=50.0,
                final_logit_soft_cap=30.0,
                use_sliding_window_attention=True,
                sliding_window_size=6,
            ),
        },
        kind=ENCODER,
        inputs=("images", "token_ids", "padding_mask", "response_mask"),
        # Text `query`/`value` and vision `query_proj`/`value_proj` adapters:
        # both configs have as many vision blocks as text blocks.
        make_inputs=_image_text_inputs,
        output_shapes=_image_text_output_shapes,
    ),
    "WhisperBackbone": Enrolment(
        "keras_nlp.models.whisper.whisper_backbone",
        {
            # The English vocabulary, like 51864, divides every model axis.
            "tiny": dict(
                _SMALL,
                num_heads=4,
                intermediate_dim=64,
                num_mels=8,
                max_encoder_sequence_length=32,
                max_decoder_sequence_length=16,
            ),
            # whisper_tiny_multi: 6 heads, which the model axes 4 and 8 do
            # not divide, and the odd multilingual vocabulary (51865).
            "six_heads_odd_vocab": dict(
                _ONE_BLOCK,
                vocabulary_size=97,
                num_heads=6,
                hidden_dim=48,
                intermediate_dim=64,
                num_mels=8,
                max_encoder_sequence_length=32,
                max_decoder_sequence_length=16,
                dropout=0.1,
            ),
        },
        kind=ENCODER,
        inputs=(
            "encoder_features",
            "decoder_token_ids",
            "decoder_padding_mask",
        ),
        # Encoder self-attention, decoder self- and cross-attention.
        distinct_blocks=lambda c: 3 * c["num_layers"],
        make_inputs=_whisper_inputs,
        output_shapes=_whisper_output_shapes,
    ),
}


def backbone_class(name):
    return getattr(importlib.import_module(TINY_CONFIGS[name].module), name)


def tiny(name, config_name="tiny"):
    """`(backbone class, a copy of its tiny config)` for a class name."""
    config = TINY_CONFIGS[name].configs[config_name]
    return backbone_class(name), dict(config)


def tiny_configs(name):
    """Config name -> a copy of each tiny config of the class `name`."""
    return {key: dict(c) for key, c in TINY_CONFIGS[name].configs.items()}


def all_tiny_configs():
    """`(class name, config name)` of every tiny config of every class."""
    return [
        (name, config_name)
        for name in sorted(TINY_CONFIGS)
        for config_name in TINY_CONFIGS[name].configs
    ]
