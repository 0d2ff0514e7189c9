"""Causal language models: a decoder backbone plus its output head.

`CausalLM` turns any decoder backbone of this library (one that keeps a
`decoder_stack`, see `keras_nlp.models.decoder`) into a model that predicts
the next token: `fit` on token ids, and `generate` with a preallocated
key/value cache in one compiled loop. This module holds the model: its
forward pass with and without caches, the caches, the loss and presets;
`generate` and its loop are `causal_lm_generation.GenerationMixin`'s. Each
family's subclass (`GemmaCausalLM`, `LlamaCausalLM`, ...) only names its
backbone class (`family_causal_lms`).

Under `keras.distribution.ModelParallel` with a layout map from
`get_layout_map`, generation runs sharded: the prompts are split over the
batch axes, the weights stay where the plan put them, and each attention's
cache gets its planned layout (`LayoutPlan.kv_caches`, see
`keras_nlp.distribution.kv_cache`), which `generate` verifies on the caches
the loop returns.
"""

import keras
from keras import ops

from keras_nlp.distribution.activations import FREE
from keras_nlp.distribution.activations import batch_size_scope
from keras_nlp.distribution.activations import unpinned_outputs
from keras_nlp.distribution.array_placement import allocate_caches
from keras_nlp.distribution.array_placement import planned_cache_specs
from keras_nlp.distribution.layout_map import active_layout_map
from keras_nlp.distribution.layout_map import constrain
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.backbone import BackboneTaskConfig
from keras_nlp.models.causal_lm_generation import GenerationMixin
from keras_nlp.models.task_checks import TaskRegistry
from keras_nlp.models.task_checks import check_backbone
from keras_nlp.models.task_preprocessing import PreprocessorAttribute
from keras_nlp.models.task_preprocessing import TextInputsMixin
from keras_nlp.models.task_preprocessing import is_packing_preprocessor
from keras_nlp.models.task_preprocessing import preset_tokenizer
from keras_nlp.models.task_preprocessing import save_task_preset
from keras_nlp.models.task_preprocessing import tokenizer_of
from keras_nlp.models.task_training import NextTokenTraining

# The residual stream's layout while decoding, as the plan pins it.
RESIDUAL_STREAM = (FREE, None, None)

_CAUSAL_LMS = TaskRegistry("causal LM", "decoder")


def causal_lm_class(backbone_cls):
    """The `CausalLM` subclass of a backbone class.

    Raises:
        ValueError: if the backbone has none (an encoder, say).
    """
    return _CAUSAL_LMS.lookup(backbone_cls)


class CausalLM(
    PreprocessorAttribute,
    TextInputsMixin,
    GenerationMixin,
    NextTokenTraining,
    BackboneTaskConfig,
    keras.Model,
):
    """A decoder backbone and its output head: next-token logits.

    The head is the backbone's token embedding run in reverse (the tied
    table, or the untied output embedding), with the backbone's final logit
    soft cap where it has one (Gemma 2). Calling the model on
    `{"token_ids", "padding_mask"}` returns logits `(batch, seq, vocab)`.

    - `fit` takes the same dicts without targets: each position learns the
      next token, where both are real (`padding_mask`). `compile()` with no
      arguments uses AdamW, cross-entropy from logits and accuracy.
    - `generate` continues prompts (text when the model has a tokenizer,
      else token ids) with greedy or sampled decoding, one compiled loop
      over a preallocated key/value cache.
    - `from_preset` and `save_to_preset` read and write preset directories
      (ours, keras-hub's, Hugging Face checkpoints), with the tokenizer
      files when there are some.
    - `enable_lora` adds LoRA adapters to the backbone.

    keras-hub users' code runs unchanged: the constructor takes
    keras-hub's preprocessors (`LlamaCausalLMPreprocessor`, ...), which then
    pack text for `generate`, `fit`, `evaluate` and `predict` as in
    keras-hub; `score` returns per-token logits or losses;
    `generate_function` is the compiled loop; the model is compiled at
    construction unless `compile=False`.

    Args:
        backbone: a decoder backbone of this library.
        preprocessor: optional, where keras-hub takes its preprocessor: a
            `keras_nlp.tokenizers.TextPreprocessor` or `Tokenizer`, or a
            preprocessor that packs text itself (keras-hub's, recognised
            by its `generate_preprocess` and `generate_postprocess`), for
            text in and out of the model.
        tokenizer: optional `keras_nlp.tokenizers.Tokenizer`, the same
            (keyword only; give one of the two).
        compile: bool (keyword only), `compile()` with its defaults at
            construction, as keras-hub's tasks do.
        **kwargs: forwarded to `keras.Model` (`name`, ...).

    Example:

    ```python
    import numpy as np
    import keras_nlp

    backbone = keras_nlp.models.LlamaBackbone(
        vocabulary_size=64, num_layers=2, num_query_heads=4,
        num_key_value_heads=2, hidden_dim=16, intermediate_dim=32,
    )
    causal_lm = keras_nlp.models.LlamaCausalLM(backbone)
    prompts = {
        "token_ids": np.array([[0, 5, 6], [7, 8, 9]], "int32"),
        "padding_mask": np.array([[0, 1, 1], [1, 1, 1]], "int32"),
    }
    causal_lm.generate(prompts, max_length=6)["token_ids"].shape  # (2, 6)
    ```
    """

    # The backbone class a subclass serves; `None` on `CausalLM` itself.
    backbone_cls = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _CAUSAL_LMS.register(cls)

    def __init__(
        self,
        backbone,
        preprocessor=None,
        *,
        tokenizer=None,
        compile=True,
        **kwargs,
    ):
        if preprocessor is not None and tokenizer is not None:
            raise ValueError(
                "Pass a `preprocessor` or a `tokenizer`, not both."
            )
        tokenizer_of(preprocessor, type(self).__name__)
        expected = self.backbone_cls or Backbone
        check_backbone(type(self).__name__, expected, backbone)
        if getattr(backbone, "decoder_stack", None) is None:
            raise ValueError(
                f"{type(backbone).__name__} is not a decoder backbone (it "
                "keeps no `decoder_stack`), so it cannot generate. Use a "
                "decoder such as GemmaBackbone or LlamaBackbone."
            )
        super().__init__(**kwargs)
        self.backbone = backbone
        self._init_generation()
        if preprocessor is not None:
            self.preprocessor = preprocessor
        else:
            self.tokenizer = tokenizer
        if compile:
            self.compile()

    # === Forward pass ===

    def call(self, inputs, training=None):
        return self.logits(self.backbone(inputs, training=training))

    def logits(self, hidden_states):
        """Next-token logits `(..., vocab)` of final hidden states."""
        return self.backbone.token_embedding(hidden_states, reverse=True)

    def call_with_cache(
        self,
        token_ids,
        cache,
        cache_update_index,
        padding_mask=None,
        positions=None,
    ):
        """Runs tokens through the decoder, reading and writing the caches.

        Args:
            token_ids: int `(batch, seq)`, the tokens at cache positions
                `cache_update_index ... cache_update_index + seq - 1`.
            cache: list of one `(batch, 2, max_length, kv_heads, head_dim)`
                cache per block (see `init_cache`).
            cache_update_index: int or scalar tensor.
            padding_mask: optional `(batch, max_length)` mask over the
                whole cache, 0 where a key must never be attended (left
                padding).
            positions: optional int `(batch, seq)` positions of the tokens;
                by default their cache indices (`cache_update_index`
                onwards), in the token embedding's table of learned
                positions (GPT-2, OPT) as in the attention.

        Returns:
            `(logits, hidden_states, cache)`: logits `(batch, seq, vocab)`,
            the final hidden states, and the updated caches.
        """
        if positions is None:
            batch_size, length = ops.shape(token_ids)[:2]
            index = ops.cast(cache_update_index, "int32")
            positions = ops.broadcast_to(
                ops.arange(length, dtype="int32")[None, :] + index,
                (batch_size, length),
            )
        hidden, cache = self._decode(
            token_ids, cache, cache_update_index, padding_mask, positions
        )
        return self.logits(hidden), hidden, cache

    def _decode(self, token_ids, caches, index, padding_mask, positions):
        """`(final hidden states, caches)` of tokens run with the caches.

        What `call_with_cache` and every generation step run; arguments as
        `call_with_cache`'s. A subclass whose cache holds more than the
        text (PaliGemma's image tokens) overrides it.
        """
        with batch_size_scope(token_ids.shape[0]):
            x = self.backbone.decoder_stack.embed(
                token_ids, positions=positions
            )
        return self._run_blocks(
            x,
            caches,
            index,
            lambda number: {
                "padding_mask": padding_mask,
                "positions": positions,
            },
        )

    def _run_blocks(self, x, caches, index, block_arguments):
        """Runs hidden states `x` through the blocks, reading and writing
        the caches from slot `index` on, then the final norm.

        Hook for subclasses that embed their own inputs (`_prefill`,
        `_decode`): the residual stream and each cache are pinned to their
        planned layouts. `block_arguments(number)` gives the further keyword
        arguments of block `number` (`padding_mask` and `positions`, or an
        `attention_mask`).

        Returns:
            `(final hidden states, updated caches)`.
        """
        stack = self.backbone.decoder_stack
        batch_size = x.shape[0]
        specs = planned_cache_specs(
            self._cache_plans(), batch_size, caches[0].shape[2]
        )
        # A block given a cache returns (outputs, cache); pin both here.
        blocks = [f"{block.path}/output" for block in stack.blocks]
        with batch_size_scope(batch_size), unpinned_outputs(blocks):
            updated = []
            for number, (block, cache) in enumerate(
                zip(stack.blocks, caches, strict=True)
            ):
                x, cache = block(
                    x,
                    cache=cache,
                    cache_update_index=index,
                    **block_arguments(number),
                )
                x = constrain(x, RESIDUAL_STREAM)
                if specs:
                    cache = constrain(cache, specs[number])
                updated.append(cache)
            return stack.final_norm(x), updated

    def _prefill(self, token_ids, caches, padding_mask, positions, inputs):
        """Runs the left-padded prompts into empty caches: the first step
        of `generate`.

        Hook for subclasses whose prompts carry more than token ids (see
        `_generation_inputs`); by default the prompts are decoded from
        cache slot 0 like any other tokens.

        Args:
            token_ids: int `(batch, prompt_length)`, the left-padded prompts.
            caches: the empty caches (`init_cache`).
            padding_mask: int `(batch, total)` over the text slots: 0 on the
                left padding, 1 on the prompts and every slot after them.
            positions: int `(batch, prompt_length)` token positions,
                counted from each row's first real token (negative on its
                padding).
            inputs: dict of the extra arrays of `_generation_inputs`.

        Returns:
            `(hidden, caches)`: final hidden states whose last position is
            the last prompt token's, and the updated caches.
        """
        del inputs
        return self._decode(token_ids, caches, 0, padding_mask, positions)

    # === Key/value caches ===

    def _cache_plans(self):
        """The plan's `CachePlan`s, one per block, or `None` unplanned."""
        plan = getattr(self.backbone, "layout_plan", None)
        if plan is None or active_layout_map() is None:
            return None
        if len(plan.kv_caches) != len(self.backbone.decoder_stack.blocks):
            return None
        return plan.kv_caches

    def cache_shapes(self, batch_size, max_length):
        """The shape of each block's cache for a batch and a length."""
        return [
            block.attention.cache_shape(batch_size, max_length)
            for block in self.backbone.decoder_stack.blocks
        ]

    def init_cache(self, batch_size, max_length):
        """Zero key/value caches, laid out as the plan says.

        Args:
            batch_size: int.
            max_length: int, positions per cache.

        Returns:
            A list of one `(batch_size, 2, max_length, kv_heads,
            head_dim)` cache per block, in the compute dtype. Under a
            planned `ModelParallel`, each is allocated in its shards
            (`LayoutPlan.kv_caches`), never whole on one device.
        """
        return allocate_caches(
            self.cache_shapes(batch_size, max_length),
            self.backbone.compute_dtype,
            planned_cache_specs(self._cache_plans(), batch_size, max_length),
        )

    # === Training ===

    def _sample_preprocessor(self):
        # Raw training text is packed only by a packing preprocessor (ours
        # take text in `generate`, and token arrays in `fit`).
        if is_packing_preprocessor(self.preprocessor):
            return self.preprocessor
        return None

    # === Scoring ===

    def score(
        self,
        token_ids,
        padding_mask=None,
        scoring_mode="logits",
        layer_intercept_fn=None,
        target_ids=None,
    ):
        """Scores token sequences: logits, or the loss of given targets.

        The forward pass of the model, run block by block so that
        `layer_intercept_fn` may read or change the hidden states between
        blocks (interpretability, activation patching), as keras-hub's
        `score` does.

        Args:
            token_ids: int `(batch, seq)`, e.g. `generate`'s output.
            padding_mask: optional `(batch, seq)`, 0 on padding; by default
                every token is real.
            scoring_mode: `"logits"` (`(batch, seq, vocab)`) or `"loss"`
                (per-token cross-entropy `(batch, seq)` against
                `target_ids`).
            layer_intercept_fn: optional `fn(hidden, index) -> hidden`,
                called on the embeddings (index -1) and after each block
                (index 0, 1, ...); what it returns goes on.
            target_ids: int `(batch, seq)`, the token each position should
                predict; required for `"loss"` (e.g. `token_ids` rolled by
                one to the left).

        Returns:
            Logits `(batch, seq, vocab)` or losses `(batch, seq)`.

        Example:

        ```python
        import numpy as np
        import keras_nlp

        backbone = keras_nlp.models.GemmaBackbone(
            vocabulary_size=32, num_layers=2, num_query_heads=2,
            num_key_value_heads=1, hidden_dim=8, intermediate_dim=16,
            head_dim=4,
        )
        causal_lm = keras_nlp.models.GemmaCausalLM(backbone)
        token_ids = np.array([[1, 5, 7, 2]], "int32")
        losses = causal_lm.score(
            token_ids,
            scoring_mode="loss",
            target_ids=np.roll(token_ids, -1, axis=1),
        )
        losses.shape  # (1, 4)
        ```
        """
        if scoring_mode not in ("logits", "loss"):
            raise ValueError(
                "`scoring_mode` must be 'logits' or 'loss'. Received: "
                f"{scoring_mode!r}."
            )
        if scoring_mode == "loss" and target_ids is None:
            raise ValueError(
                "`scoring_mode='loss'` needs `target_ids`: the token each "
                "position should predict, e.g. `token_ids` rolled left by "
                "one."
            )
        token_ids = ops.convert_to_tensor(token_ids, "int32")
        if len(token_ids.shape) != 2:
            raise ValueError(
                "`token_ids` must be 2D `(batch, seq)`. Received shape "
                f"{tuple(token_ids.shape)}."
            )
        if padding_mask is None:
            padding_mask = ops.ones_like(token_ids)
        padding_mask = ops.cast(padding_mask, "int32")
        intercept = layer_intercept_fn or (lambda hidden, index: hidden)
        logits = self.logits(
            self._intercepted_forward(token_ids, padding_mask, intercept)
        )
        if scoring_mode == "logits":
            return logits
        loss = keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction="none"
        )
        return loss(ops.convert_to_tensor(target_ids, "int32"), logits)

    def _intercepted_forward(self, token_ids, padding_mask, intercept):
        """`score`'s forward pass, block by block: the final hidden states,
        `intercept(hidden, index)` applied to the embeddings (index -1) and
        to each block's outputs. A subclass whose blocks take more than
        the padding mask (Gemma 4) overrides it."""
        stack = self.backbone.decoder_stack
        x = intercept(stack.embed(token_ids), -1)
        for index, block in enumerate(stack.blocks):
            x = intercept(block(x, padding_mask=padding_mask), index)
        return stack.final_norm(x)

    # === Quantization ===

    def get_quantization_layer_structure(self, mode):
        """The layers Keras's layer-wise quantizers (GPTQ, AWQ) walk.

        Args:
            mode: a quantization mode.

        Returns:
            For `"gptq"` and `"awq"`, `{"pre_block_layers": [embedding],
            "sequential_blocks": [the decoder blocks]}`: what maps token
            ids to the first hidden states (the embedding layer, or for
            token and position tables, a function of the two), then the
            blocks in order. `None` for other modes, which quantize each
            layer alone.
        """
        if mode not in ("gptq", "awq"):
            return None
        stack = self.backbone.decoder_stack
        embed = stack._embed
        return {
            "pre_block_layers": [
                embed if isinstance(embed, keras.layers.Layer) else stack.embed
            ],
            "sequential_blocks": list(stack.blocks),
        }

    def enable_lora(self, rank, target_layer_names=None):
        """Adds LoRA adapters to the backbone (see `Backbone.enable_lora`)."""
        self.backbone.enable_lora(rank, target_layer_names=target_layer_names)

    # === Presets ===

    @classmethod
    def from_preset(cls, preset, load_weights=True, **kwargs):
        """Builds a causal LM from a preset directory or built-in preset.

        The backbone is built as `Backbone.from_preset` builds it (ours,
        keras-hub's or a Hugging Face directory; inside a `ModelParallel`
        scope, straight into its shards). A tokenizer (`tokenizer.json` or
        `tokenizer.model`) in the directory is loaded too. On `CausalLM`
        itself, the subclass comes from the preset's backbone.

        Args:
            preset: a preset directory, or a built-in preset name (configs
                only: with `load_weights=False`).
            load_weights: bool.
            **kwargs: forwarded to the backbone's `from_preset`.
        """
        backbone_cls = cls.backbone_cls or Backbone
        backbone = backbone_cls.from_preset(
            preset, load_weights=load_weights, **kwargs
        )
        task_cls = cls if cls.backbone_cls else causal_lm_class(type(backbone))
        return task_cls(backbone=backbone, tokenizer=preset_tokenizer(preset))

    def save_to_preset(self, preset_dir, **kwargs):
        """Saves the backbone (see `Backbone.save_to_preset`) and tokenizer.

        With `format="huggingface"`, `config.json` holds the tokenizer's
        BOS, EOS and PAD ids.

        Args:
            preset_dir: the directory.
            **kwargs: forwarded to the backbone's `save_to_preset`
                (`format=`, `max_shard_size=`).
        """
        save_task_preset(self, preset_dir, **kwargs)


class PreprocessorFirstCausalLM(CausalLM):
    """A `CausalLM` taking keras-hub's order `(preprocessor, backbone)`.

    keras-hub's multimodal causal LMs (Gemma 3, PaliGemma) take their
    preprocessor first. Their subclasses here keep that order, and also
    accept the backbone alone as the first argument, as the others do.

    Args:
        preprocessor: optional `TextPreprocessor` or `Tokenizer` (see
            `CausalLM`), or the backbone.
        backbone: the backbone, unless given first.
        tokenizer: optional `Tokenizer` (keyword only).
        **kwargs: forwarded to `keras.Model`.
    """

    def __init__(
        self,
        preprocessor=None,
        backbone=None,
        *,
        tokenizer=None,
        compile=True,
        **kwargs,
    ):
        if isinstance(preprocessor, Backbone) and backbone is None:
            preprocessor, backbone = None, preprocessor
        if backbone is None:
            raise ValueError(
                f"{type(self).__name__} needs a backbone: "
                f"{type(self).__name__}(backbone) or "
                f"{type(self).__name__}(preprocessor, backbone)."
            )
        super().__init__(
            backbone,
            preprocessor,
            tokenizer=tokenizer,
            compile=compile,
            **kwargs,
        )
