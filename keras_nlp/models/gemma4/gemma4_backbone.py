"""Gemma 4 decoder backbone (text)."""

import keras
from keras import ops

from keras_nlp.distribution.dims import declare_dims
from keras_nlp.distribution.rules import DATA
from keras_nlp.distribution.rules import EXPERT
from keras_nlp.distribution.rules import MODEL
from keras_nlp.layers.dense import named_dense
from keras_nlp.layers.expert_bank import EXPERT_INPUT_DIMS
from keras_nlp.layers.expert_bank import EXPERT_OUTPUT_DIMS
from keras_nlp.layers.layout_rules import attention_rules
from keras_nlp.layers.layout_rules import feedforward_rules
from keras_nlp.layers.layout_rules import named_rule
from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.layers.sparse_moe import ROUTER_DIMS
from keras_nlp.layers.token_and_position_embedding import TOKEN_EMBEDDING_DIMS
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.decoder import DecoderStack
from keras_nlp.models.functional import init_functional
from keras_nlp.models.gemma.gemma_decoder_block import FEEDFORWARD_NAMES
from keras_nlp.models.gemma3.gemma3_backbone import LAYER_TYPES
from keras_nlp.models.gemma4.gemma4_attention import Gemma4Attention
from keras_nlp.models.gemma4.gemma4_attention import ProportionalRotaryEmbedding
from keras_nlp.models.gemma4.gemma4_decoder_block import PER_LAYER_GATE_DIMS
from keras_nlp.models.gemma4.gemma4_decoder_block import PER_LAYER_UP_DIMS
from keras_nlp.models.gemma4.gemma4_decoder_block import Gemma4DecoderBlock
from keras_nlp.models.gemma4.gemma4_presets import GEMMA4_PRESETS

LOCAL_ROPE_WAVELENGTH = 10_000.0
GLOBAL_ROPE_WAVELENGTH = 1_000_000.0
# The per-layer inputs' tables: a token's row holds every layer's input.
PER_LAYER_EMBEDDING_DIMS = ("vocab", "per_layer")
PER_LAYER_PROJECTION_DIMS = ("hidden", "per_layer")


def global_layers(num_layers, sliding_window_pattern, layer_types=None):
    """Whether each block is global (full attention): as `layer_types`
    says, else the last of every `sliding_window_pattern` blocks.

    Raises:
        ValueError: `layer_types` is not `num_layers` of `LAYER_TYPES`.
    """
    if layer_types is None:
        period = sliding_window_pattern
        return [i % period == period - 1 for i in range(num_layers)]
    if (
        not isinstance(layer_types, (list, tuple))
        or len(layer_types) != num_layers
        or not all(t in LAYER_TYPES for t in layer_types)
    ):
        raise ValueError(
            f"`layer_types` must be a list of {num_layers} (num_layers) of "
            f"{LAYER_TYPES}, or None. Received: layer_types={layer_types!r}."
        )
    return [t == "full_attention" for t in layer_types]


def key_value_sources(is_global, num_kv_shared_layers):
    """`{block: earlier block}`: each of the last `num_kv_shared_layers`
    blocks attends to the keys and values of the last block before them of
    its kind (global or local).

    Raises:
        ValueError: no block would keep its own keys, or a sharing block
            has no earlier block of its kind.
    """
    first_shared = len(is_global) - num_kv_shared_layers
    if num_kv_shared_layers and first_shared <= 0:
        raise ValueError(
            "`num_kv_shared_layers` must leave at least one block with its "
            f"own keys and values: it must be below num_layers="
            f"{len(is_global)}. Received: num_kv_shared_layers="
            f"{num_kv_shared_layers}."
        )
    sources = {}
    for index in range(first_shared, len(is_global)):
        owners = [
            j for j in range(first_shared) if is_global[j] == is_global[index]
        ]
        if not owners:
            kind = "global" if is_global[index] else "local"
            raise ValueError(
                f"Block {index} ({kind}) shares the keys and values of the "
                f"last {kind} block before block {first_shared}, but there "
                "is none: lower `num_kv_shared_layers` or change "
                "`layer_types`."
            )
        sources[index] = owners[-1]
    return sources


class Gemma4Backbone(Backbone):
    """Gemma 4's text decoder mapping token ids to hidden states.

    Gemma 3's interleaved local (sliding-window) and global attention
    blocks, with Gemma 4's changes: every block has pre- and post-norms on
    both branches (RMS norms `x * scale`), RMS-normalized query and key
    heads and unit-RMS values, unscaled queries, and a non-trainable
    `layer_scalar` on its output. Global blocks may have their own head
    size (`global_head_dim`), their own key/value heads
    (`num_global_key_value_heads`, whose keys are also the values: no
    value kernel), their own RoPE wavelength and rotate only part of each
    head (`global_rope_partial_rotary_factor`). The last
    `num_kv_shared_layers` blocks have no key or value projections: each
    attends to the keys and values of the last earlier block of its kind,
    and decoding keeps no cache for it. The small sizes (E2B, E4B) add a
    per-layer input: a second token table gives each block a vector that
    gates a residual branch (`hidden_size_per_layer_input`), and
    `use_double_wide_mlp` doubles the sharing blocks' feed-forward. The
    mixture-of-experts size (26B-A4B, `enable_moe_block`) runs a mixture
    of `num_experts` tanh-GELU experts beside each block's dense
    feed-forward.

    This is the text backbone: keras-hub's vision and audio encoders are
    not built (passing one raises), nor its embedding-model head. Inputs
    are `token_ids` and `padding_mask`; RoPE reads each token's index in
    the sequence. keras-hub's extra `position_ids` input `(batch, seq)`
    is accepted: given, RoPE reads those positions instead (keras-hub's
    preprocessors pass each token's index, the same outputs). Variable
    paths and shapes are keras-hub's.

    Args:
        vocabulary_size: int. Rows of the tied token embedding.
        image_size: `None` (no vision encoder). Kept for keras-hub's
            signature.
        num_layers: int. Number of decoder blocks.
        num_query_heads: int. Query heads of every block.
        num_key_value_heads: int. Key/value heads of local blocks (and of
            global blocks without `num_global_key_value_heads`).
        hidden_dim: int. Width of the residual stream.
        intermediate_dim: int. Width of each feed-forward branch.
        head_dim: int. Size of the local blocks' heads.
        query_head_dim_normalize: bool. Unused (queries are not scaled),
            as in keras-hub. Defaults to `True`.
        attention_logit_soft_cap: float or `None`. Defaults to `None`.
        final_logit_soft_cap: float or `None`. Soft cap of the logits of
            the reversed token embedding. Defaults to `None`.
        use_sliding_window_attention: bool. Local blocks attend within the
            window. Defaults to `True`.
        sliding_window_size: int. Defaults to `512`.
        sliding_window_pattern: int. Without `layer_types`, the last of
            every this many blocks is global. Defaults to `6`.
        layer_types: list of `"sliding_attention"` / `"full_attention"`,
            one per block, or `None`. Defaults to `None`.
        global_head_dim: int or `None`. Size of the global blocks' heads;
            `None` means `head_dim`. Defaults to `None`.
        local_rope_scaling_factor: float. Defaults to `1.0`.
        global_rope_scaling_factor: float. Defaults to `1.0`.
        vision_encoder: must be `None`. Defaults to `None`.
        audio_encoder: must be `None`. Defaults to `None`.
        num_audio_tokens_per_clip: must be `None`. Defaults to `None`.
        layer_norm_epsilon: float. Defaults to `1e-6`.
        use_bidirectional_attention: must be `False`. Defaults to `False`.
        use_vision_bidirectional_attention: bool. Concerns image tokens
            only: no effect on text. Defaults to `False`.
        dropout: float. Defaults to `0`.
        is_embedding_model: must be `False`. Defaults to `False`.
        pooling_intermediate_dim: must be `None`.
        embedding_dim: must be `None`.
        num_kv_shared_layers: int. Defaults to `0`.
        num_global_key_value_heads: int or `None`. Defaults to `None`.
        hidden_size_per_layer_input: int. `0` for no per-layer input.
            Defaults to `0`.
        vocab_size_per_layer_input: int or `None`. Rows of the per-layer
            table; `None` means `vocabulary_size`. Defaults to `None`.
        global_rope_wavelength: float or `None`. `None` means 1M.
        local_rope_wavelength: float or `None`. `None` means 10k.
        global_rope_partial_rotary_factor: float or `None`. Fraction of
            each global head that RoPE turns. Defaults to `1.0`.
        use_double_wide_mlp: bool. Defaults to `False`.
        enable_moe_block: bool. Defaults to `False`.
        num_experts: int or `None`. Required with `enable_moe_block`.
        expert_intermediate_dim: int or `None`. Required with
            `enable_moe_block`.
        num_experts_per_token: int. Defaults to `8`.
        dtype: string or `keras.DTypePolicy`.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.gemma4.gemma4_backbone import Gemma4Backbone

    model = Gemma4Backbone(
        vocabulary_size=64,
        image_size=None,
        num_layers=4,
        num_query_heads=4,
        num_key_value_heads=2,
        hidden_dim=32,
        intermediate_dim=48,
        head_dim=8,
        global_head_dim=16,
        sliding_window_size=3,
        sliding_window_pattern=2,
        num_kv_shared_layers=2,
        num_global_key_value_heads=1,
    )
    inputs = {
        "token_ids": np.array([[5, 9, 2, 7], [0, 0, 3, 4]], dtype="int32"),
        "padding_mask": np.array([[1, 1, 1, 1], [0, 0, 1, 1]], dtype="int32"),
    }
    hidden_states = model(inputs)  # shape (2, 4, 32)
    ```
    """

    presets = GEMMA4_PRESETS

    def call(self, inputs, training=None, mask=None, **kwargs):
        if isinstance(inputs, dict) and "position_ids" in inputs:
            # Not a graph input (ours and keras-hub's callers omit it or
            # pass the indices): the same blocks, run at these positions.
            x, per_layer = self.embed_with_per_layer_inputs(inputs["token_ids"])
            x = self._run_blocks(
                x,
                per_layer,
                inputs["padding_mask"],
                positions=inputs["position_ids"],
                training=training,
            )
            return self.layer_norm(x)
        return super().call(inputs, training=training, mask=mask, **kwargs)

    def _run_blocks(self, x, per_layer, padding_mask, **block_arguments):
        """The blocks in order, each sharing block reading its source's
        keys and values."""
        keys_values = {}
        for index, layer in enumerate(self.transformer_layers):
            x, key, value = layer(
                x,
                padding_mask=padding_mask,
                per_layer_input=per_layer[index],
                shared_key_value=keys_values.get(
                    self.key_value_sources.get(index)
                ),
                return_key_value=True,
                **block_arguments,
            )
            keys_values[index] = (key, value)
        return x

    @staticmethod
    def _layout_rules(config):
        # Local and global attention kernels share their paths but not
        # their shapes (kv heads, head_dim): the resolver places each
        # variable on its own shape. Global key/value heads too few for
        # the model axis put hidden on both axes rather than replicating.
        block = r"decoder_block_\d+/"
        rules = [
            *token_embedding_rules("token_embedding/", tied=True),
            *attention_rules(
                block + "attention/",
                heads_first=True,
                hidden_if_heads_indivisible=True,
            ),
            *feedforward_rules(block, sublayer_names=FEEDFORWARD_NAMES),
        ]
        if config.get("hidden_size_per_layer_input"):
            per_layer = {"per_layer": MODEL, "hidden": DATA}
            rules += [
                named_rule(
                    "per_layer_token_embedding/embeddings",
                    PER_LAYER_EMBEDDING_DIMS,
                    {"vocab": MODEL, "per_layer": DATA},
                    {"vocab": DATA, "per_layer": MODEL},
                ),
                named_rule(
                    "per_layer_model_projection/kernel",
                    PER_LAYER_PROJECTION_DIMS,
                    per_layer,
                ),
                named_rule(
                    block + "per_layer_input_gate/kernel",
                    PER_LAYER_GATE_DIMS,
                    per_layer,
                ),
                named_rule(
                    block + "per_layer_up_proj/kernel",
                    PER_LAYER_UP_DIMS,
                    per_layer,
                ),
            ]
        if config.get("enable_moe_block"):
            experts = block + "moe_expert_bank/"
            roles = {"experts": EXPERT, "hidden": DATA, "ffw": MODEL}
            rules += [
                # Small and read by every token: replicated.
                named_rule(block + "moe_router/proj/kernel", ROUTER_DIMS, {}),
                named_rule(
                    experts + "(gate_proj|up_proj)", EXPERT_INPUT_DIMS, roles
                ),
                named_rule(experts + "down_proj", EXPERT_OUTPUT_DIMS, roles),
                # Each expert's output scale goes with its expert.
                named_rule(experts + "per_expert_scale", ("experts",), roles),
            ]
        return rules

    def __init__(
        self,
        vocabulary_size,
        image_size: int | None,
        num_layers,
        num_query_heads,
        num_key_value_heads,
        hidden_dim,
        intermediate_dim,
        head_dim,
        query_head_dim_normalize=True,
        attention_logit_soft_cap=None,
        final_logit_soft_cap=None,
        use_sliding_window_attention=True,
        sliding_window_size=512,
        sliding_window_pattern=6,
        layer_types=None,
        global_head_dim=None,
        local_rope_scaling_factor=1.0,
        global_rope_scaling_factor=1.0,
        vision_encoder=None,
        audio_encoder=None,
        num_audio_tokens_per_clip=None,
        layer_norm_epsilon=1e-6,
        use_bidirectional_attention=False,
        use_vision_bidirectional_attention=False,
        dropout=0,
        is_embedding_model=False,
        pooling_intermediate_dim=None,
        embedding_dim=None,
        num_kv_shared_layers=0,
        num_global_key_value_heads=None,
        hidden_size_per_layer_input=0,
        vocab_size_per_layer_input=None,
        global_rope_wavelength=None,
        local_rope_wavelength=None,
        global_rope_partial_rotary_factor=1.0,
        use_double_wide_mlp=False,
        enable_moe_block=False,
        num_experts=None,
        expert_intermediate_dim=None,
        num_experts_per_token=8,
        dtype=None,
        **kwargs,
    ):
        unsupported = {
            "vision_encoder": (vision_encoder, None),
            "audio_encoder": (audio_encoder, None),
            "num_audio_tokens_per_clip": (num_audio_tokens_per_clip, None),
            "image_size": (image_size, None),
            "is_embedding_model": (is_embedding_model, False),
            "pooling_intermediate_dim": (pooling_intermediate_dim, None),
            "embedding_dim": (embedding_dim, None),
            "use_bidirectional_attention": (use_bidirectional_attention, False),
        }
        for name, (value, allowed) in unsupported.items():
            if value is not allowed and value != allowed:
                raise ValueError(
                    "Gemma4Backbone builds the text decoder only: no vision "
                    "or audio encoder, embedding head or bidirectional "
                    f"attention. `{name}` must be {allowed!r}. Received: "
                    f"{name}={value!r}."
                )
        if enable_moe_block and not (num_experts and expert_intermediate_dim):
            raise ValueError(
                "`enable_moe_block=True` needs `num_experts` and "
                "`expert_intermediate_dim`. Received: "
                f"num_experts={num_experts!r}, "
                f"expert_intermediate_dim={expert_intermediate_dim!r}."
            )
        is_global = global_layers(
            num_layers, sliding_window_pattern, layer_types
        )
        sources = key_value_sources(is_global, num_kv_shared_layers)
        rotary_fraction = global_rope_partial_rotary_factor or 1.0

        def block(index):
            glob = is_global[index]
            shared = index in sources
            attention = Gemma4Attention(
                num_query_heads=num_query_heads,
                num_key_value_heads=(
                    num_global_key_value_heads
                    if glob and num_global_key_value_heads
                    else num_key_value_heads
                ),
                head_dim=(global_head_dim or head_dim) if glob else head_dim,
                rotary_embedding=ProportionalRotaryEmbedding(
                    rotary_fraction=rotary_fraction if glob else 1.0,
                    max_wavelength=(
                        (global_rope_wavelength or GLOBAL_ROPE_WAVELENGTH)
                        if glob
                        else (local_rope_wavelength or LOCAL_ROPE_WAVELENGTH)
                    ),
                    scaling_factor=(
                        global_rope_scaling_factor
                        if glob
                        else local_rope_scaling_factor
                    ),
                    dtype=dtype,
                    name="rotary",
                ),
                use_query_key_norm=True,
                layer_norm_epsilon=layer_norm_epsilon,
                heads_first=True,
                sliding_window_size=(
                    sliding_window_size
                    if use_sliding_window_attention and not glob
                    else None
                ),
                logit_soft_cap=attention_logit_soft_cap,
                query_scale=1.0,
                dropout=dropout,
                sublayer_names={
                    "query_norm": "query_norm",
                    "key_norm": "key_norm",
                },
                key_is_value=bool(glob and num_global_key_value_heads),
                shares_key_value=shared,
                dtype=dtype,
                name="attention",
            )
            wide = use_double_wide_mlp and shared
            return Gemma4DecoderBlock(
                attention=attention,
                hidden_dim=hidden_dim,
                intermediate_dim=intermediate_dim * (2 if wide else 1),
                layer_norm_epsilon=layer_norm_epsilon,
                num_experts=num_experts if enable_moe_block else None,
                expert_intermediate_dim=expert_intermediate_dim,
                num_experts_per_token=num_experts_per_token,
                hidden_size_per_layer_input=hidden_size_per_layer_input,
                dropout=dropout,
                dtype=dtype,
                name=f"decoder_block_{index}",
            )

        self.token_embedding = keras.layers.ReversibleEmbedding(
            vocabulary_size,
            hidden_dim,
            tie_weights=True,
            embeddings_initializer=keras.initializers.VarianceScaling(
                scale=1.0, mode="fan_in", distribution="untruncated_normal"
            ),
            logit_soft_cap=final_logit_soft_cap,
            dtype=dtype,
            name="token_embedding",
        )
        declare_dims(self.token_embedding, embeddings=TOKEN_EMBEDDING_DIMS)
        per_layer_width = num_layers * hidden_size_per_layer_input
        if hidden_size_per_layer_input:
            self.per_layer_token_embedding = keras.layers.Embedding(
                vocab_size_per_layer_input or vocabulary_size,
                per_layer_width,
                dtype=dtype,
                name="per_layer_token_embedding",
            )
            declare_dims(
                self.per_layer_token_embedding,
                embeddings=PER_LAYER_EMBEDDING_DIMS,
            )
            self.per_layer_model_projection = named_dense(
                per_layer_width,
                PER_LAYER_PROJECTION_DIMS,
                name="per_layer_model_projection",
                use_bias=False,
                dtype=dtype,
            )
            self.per_layer_projection_norm = keras.layers.RMSNormalization(
                epsilon=layer_norm_epsilon,
                dtype=dtype,
                name="per_layer_projection_norm",
            )
        self.transformer_layers = [block(i) for i in range(num_layers)]
        self.layer_norm = keras.layers.RMSNormalization(
            epsilon=layer_norm_epsilon, dtype=dtype, name="final_normalization"
        )
        self.key_value_sources = sources

        def embed(token_ids):
            """The first hidden states, and each block's per-layer input
            (`None`s without)."""
            x = self.token_embedding(token_ids)
            x = x * ops.cast(ops.sqrt(float(hidden_dim)), x.dtype)
            if not hidden_size_per_layer_input:
                return x, [None] * num_layers
            width = hidden_size_per_layer_input
            rows = self.per_layer_token_embedding(token_ids)
            rows = rows * ops.cast(float(width) ** 0.5, rows.dtype)
            projected = self.per_layer_model_projection(x)
            projected = projected * ops.cast(
                float(hidden_dim) ** -0.5, projected.dtype
            )
            per_layer = []
            for i in range(num_layers):
                part = slice(i * width, (i + 1) * width)
                norm = self.per_layer_projection_norm(projected[..., part])
                per_layer.append(
                    (norm + rows[..., part]) * ops.cast(2.0**-0.5, x.dtype)
                )
            return x, per_layer

        self.embed_with_per_layer_inputs = embed
        int_input = dict(shape=(None,), dtype="int32")
        inputs = {
            "token_ids": keras.Input(name="token_ids", **int_input),
            "padding_mask": keras.Input(name="padding_mask", **int_input),
        }
        self.decoder_stack = DecoderStack(
            lambda ids: embed(ids)[0], self.transformer_layers, self.layer_norm
        )
        x, per_layer = embed(inputs["token_ids"])
        x = self._run_blocks(x, per_layer, inputs["padding_mask"])
        init_functional(
            self,
            inputs=inputs,
            outputs=self.layer_norm(x),
            dtype=dtype,
            **kwargs,
        )
