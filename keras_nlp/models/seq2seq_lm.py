"""Sequence-to-sequence language models: an encoder-decoder and its head.

`Seq2SeqLM` turns an encoder-decoder backbone (BART, T5) into a model that
predicts the decoder's next token from a source: `fit` with teacher
forcing, and `generate`, which runs the encoder once, computes every
decoder block's cross-attention keys and values once from its output,
and then decodes one token per step in one compiled loop over
preallocated self-attention caches.

The backbone supplies the family's pieces: `encode(token_ids,
padding_mask)` (or of the family's encoder inputs, `encoder_input_names`,
as the task's `_encode` passes them), `decode_with_cache(...)` and its
`decoder_transformer_layers`, whose blocks compute
`cross_attention_cache(encoder_output)` and whose `self_attention` and
`cross_attention` layers tell their cache's shape (`cache_shape`) and
the kernel it follows (`cache_kernel`).

Under `keras.distribution.ModelParallel` with the backbone's layout map,
both kinds of caches take the layout the plan gives a decoder's caches
(`keras_nlp.distribution.kv_cache.plan_kv_caches`, from each attention's
key kernel): heads where the key kernel has them on the model axis, the
batch on the batch axes.
"""

import keras

from keras_nlp.distribution.activations import batch_size_scope
from keras_nlp.distribution.activations import unpinned_outputs
from keras_nlp.distribution.array_placement import allocate_caches
from keras_nlp.distribution.array_placement import planned_cache_specs
from keras_nlp.distribution.kv_cache import AttentionCache
from keras_nlp.distribution.kv_cache import plan_kv_caches
from keras_nlp.distribution.layout_map import active_layout_map
from keras_nlp.distribution.layout_map import constrain
from keras_nlp.models.backbone import BackboneTaskConfig
from keras_nlp.models.causal_lm import RESIDUAL_STREAM
from keras_nlp.models.sampling import get_sampler
from keras_nlp.models.seq2seq_generation import Seq2SeqGenerationMixin
from keras_nlp.models.task_checks import check_backbone
from keras_nlp.models.task_preprocessing import PreprocessorAttribute
from keras_nlp.models.task_preprocessing import TextInputsMixin
from keras_nlp.models.task_preprocessing import end_token_ids
from keras_nlp.models.task_preprocessing import is_text_columns
from keras_nlp.models.task_preprocessing import preprocess_samples
from keras_nlp.models.task_preprocessing import preset_token_id
from keras_nlp.models.task_preprocessing import preset_tokenizer
from keras_nlp.models.task_preprocessing import save_task_preset
from keras_nlp.models.task_preprocessing import tokenizer_of
from keras_nlp.models.task_training import NextTokenTraining


def describe_attention_cache(attention):
    """The `AttentionCache` of an attention layer with `cache_shape` and
    `cache_kernel` (an `EinsumDense` key kernel, or a flat `Dense` one
    whose output dimension is the heads')."""
    dense, heads_letter, head_dim_letter = attention.cache_kernel()
    # `_kernel` is the variable itself where `kernel` is a LoRA sum.
    kernel = getattr(dense, "_kernel", None)
    if kernel is None:
        kernel = dense.kernel
    if hasattr(dense, "equation"):
        operand = dense.equation.split(",")[1].split("->")[0]
        letters = "".join(
            {heads_letter: "k", head_dim_letter: "h"}.get(letter, ".")
            for letter in operand
        )
    else:
        letters = ".k"
    _, _, _, kv_heads, head_dim = attention.cache_shape(1, 1)
    return AttentionCache(
        path=f"{attention.path}/cache",
        key_kernel=kernel.path,
        kernel_letters=letters,
        kv_heads=kv_heads,
        head_dim=head_dim,
    )


class Seq2SeqLM(
    Seq2SeqGenerationMixin,
    PreprocessorAttribute,
    TextInputsMixin,
    NextTokenTraining,
    BackboneTaskConfig,
    keras.Model,
):
    """An encoder-decoder backbone and its head: the decoder's logits.

    Calling the model on `{"encoder_token_ids", "encoder_padding_mask",
    "decoder_token_ids", "decoder_padding_mask"}` returns logits
    `(batch, decoder_length, vocab)`.

    - `fit` takes the same dicts without targets: each decoder position
      learns the next decoder token, where both are real. `compile()`
      with no arguments uses AdamW, cross-entropy from logits and
      accuracy.
    - `generate` continues right-padded decoder prompts (token ids, as
      keras-hub's `generate` takes them without a preprocessor), greedy
      or sampled, in one compiled loop; or takes text (a str or a list)
      when the model has a tokenizer or a packing preprocessor, and
      returns text.
    - `fit`, `evaluate` and `predict` also take raw text columns
      (`{"encoder_text": [...], "decoder_text": [...]}`) when the model
      has a packing preprocessor, which packs them as in keras-hub.
    - `from_preset` and `save_to_preset` read and write preset
      directories (ours, keras-hub's, Hugging Face checkpoints), with
      the tokenizer files when there are some.

    Args:
        backbone: the family's encoder-decoder backbone.
        preprocessor: optional, for text in and out: our `Tokenizer`
            (or a `TextPreprocessor` holding one), whose end-of-sequence
            ids are `generate`'s stop ids by default and whose pad id
            fills finished rows; or a preprocessor that packs text itself
            (keras-hub's `BartSeq2SeqLMPreprocessor`, recognised by its
            `generate_preprocess` and `generate_postprocess`).
        tokenizer: optional `Tokenizer`, the same (keyword only; give one
            of the two).
        decoder_start_token_id: optional int (keyword only), the token
            text generation starts the decoder with; by default the
            family's (`decoder_start_token`).
        compile: bool (keyword only), `compile()` with its defaults at
            construction, as keras-hub's tasks do.
        **kwargs: forwarded to `keras.Model` (`name`, ...).

    Example:

    ```python
    import numpy as np
    import keras_nlp

    # A family's Seq2SeqLM subclass (BartSeq2SeqLM, T5Seq2SeqLM).
    backbone = keras_nlp.models.BartBackbone(
        vocabulary_size=64, num_layers=1, num_heads=2, hidden_dim=16,
        intermediate_dim=32, max_sequence_length=16,
    )
    seq2seq_lm = keras_nlp.models.BartSeq2SeqLM(backbone)
    inputs = {
        "encoder_token_ids": np.array([[0, 5, 6, 2]], "int32"),
        "encoder_padding_mask": np.array([[1, 1, 1, 1]], "int32"),
        "decoder_token_ids": np.array([[2, 0, 7]], "int32"),
        "decoder_padding_mask": np.array([[1, 1, 1]], "int32"),
    }
    seq2seq_lm(inputs).shape  # (1, 3, 64)
    seq2seq_lm.fit(inputs, epochs=1, verbose=0)  # teacher forcing
    ```
    """

    # The backbone class a subclass serves; `None` on `Seq2SeqLM` itself.
    backbone_cls = None
    # What the encoder reads, as `generate` takes it (`_encoder_arrays`,
    # `_encode`): Whisper's is audio features.
    encoder_input_names = ("encoder_token_ids", "encoder_padding_mask")

    def __init__(
        self,
        backbone,
        preprocessor=None,
        *,
        tokenizer=None,
        decoder_start_token_id=None,
        compile=True,
        **kwargs,
    ):
        if preprocessor is not None and tokenizer is not None:
            raise ValueError(
                "Pass a `preprocessor` or a `tokenizer`, not both."
            )
        tokenizer_of(preprocessor, type(self).__name__)
        if self.backbone_cls is None:
            # The head differs by family (T5's tied one is scaled).
            raise ValueError(
                "Seq2SeqLM is the base class: use the family's subclass, "
                "BartSeq2SeqLM or T5Seq2SeqLM. Received a "
                f"{type(backbone).__name__}."
            )
        check_backbone(type(self).__name__, self.backbone_cls, backbone)
        super().__init__(**kwargs)
        self.backbone = backbone
        if preprocessor is not None:
            self.preprocessor = preprocessor
        else:
            self.tokenizer = tokenizer
        self._decoder_start_token_id = decoder_start_token_id
        self.sampler = get_sampler("greedy")
        self._reset_generate_functions()
        # How many times the generation loop was traced: once per new
        # combination of settings and input shapes.
        self.generate_traces = 0
        if compile:
            self.compile()

    def _reset_generate_functions(self):
        self._generate_functions = {}

    # === Forward pass ===

    def call(self, inputs, training=None):
        outputs = self.backbone(inputs, training=training)
        return self.logits(outputs["decoder_sequence_output"])

    def logits(self, hidden_states):
        """Next-token logits `(..., vocab)` of the decoder's final hidden
        states: the token embedding run in reverse."""
        return self.backbone.token_embedding(hidden_states, reverse=True)

    # === Training ===

    # T5's layer norms keep their scales as `weight`.
    no_weight_decay = NextTokenTraining.no_weight_decay + ("weight",)
    # Teacher forcing: the decoder's tokens are the targets.
    target_inputs = ("decoder_token_ids", "decoder_padding_mask")

    # === Caches ===

    def _cache_plans(self):
        """`(self-attention plans, cross-attention plans)`, one
        `CachePlan` per block each, or `None` when unplanned."""
        plan = getattr(self.backbone, "layout_plan", None)
        layout_map = active_layout_map()
        if plan is None or layout_map is None:
            return None
        described = [
            describe_attention_cache(attention)
            for block in self.backbone.decoder_transformer_layers
            for attention in (block.self_attention, block.cross_attention)
        ]
        plans = plan_kv_caches(
            described,
            plan.weights,
            model_axes=(plan.model_axis,),
            batch_axes=layout_map.batch_axes,
        )
        if len(plans) != len(described):
            return None
        return plans[0::2], plans[1::2]

    def cache_shapes(self, batch_size, max_length):
        """The shape of each decoder block's self-attention cache."""
        return [
            block.self_attention.cache_shape(batch_size, max_length)
            for block in self.backbone.decoder_transformer_layers
        ]

    def init_cache(self, batch_size, max_length):
        """Zero self-attention caches, one per decoder block, each
        allocated in the shards the plan gives it (plain arrays
        unplanned)."""
        plans = self._cache_plans()
        return allocate_caches(
            self.cache_shapes(batch_size, max_length),
            self.backbone.compute_dtype,
            planned_cache_specs(plans and plans[0], batch_size),
        )

    def _pin(self, batch_size):
        """The `pin` of `decode_with_cache`: each block's output and
        cache constrained to their planned layouts (`None` unplanned)."""
        plans = self._cache_plans()
        if plans is None:
            return None, None
        self_specs = planned_cache_specs(plans[0], batch_size)
        cross_specs = planned_cache_specs(plans[1], batch_size)

        def pin(number, x, cache):
            return constrain(x, RESIDUAL_STREAM), constrain(
                cache, self_specs[number]
            )

        return pin, cross_specs

    def call_with_cache(
        self,
        decoder_token_ids,
        self_attention_caches,
        cross_attention_caches,
        cache_update_index,
        encoder_padding_mask,
    ):
        """One decoding step: tokens through the decoder with the caches.

        Args:
            decoder_token_ids: int `(batch, seq)` of slots
                `cache_update_index ... + seq - 1`.
            self_attention_caches: one `(batch, 2, max_length, heads,
                head_dim)` per block (`init_cache`).
            cross_attention_caches: one per block, from
                `cross_attention_caches`.
            cache_update_index: int or scalar tensor.
            encoder_padding_mask: `(batch, source_len)`, or `None` where
                every encoder position is real (Whisper's frames).

        Returns:
            `(logits, hidden_states, self_attention_caches)`.
        """
        batch_size = decoder_token_ids.shape[0]
        pin, _ = self._pin(batch_size)
        blocks = self.backbone.decoder_transformer_layers
        # A block given a cache returns (outputs, cache): `pin` lays out
        # the two.
        keys = [f"{block.path}/output" for block in blocks]
        with batch_size_scope(batch_size), unpinned_outputs(keys):
            hidden, caches = self.backbone.decode_with_cache(
                decoder_token_ids,
                self_attention_caches,
                cross_attention_caches,
                cache_update_index,
                encoder_padding_mask,
                pin=pin,
            )
        return self.logits(hidden), hidden, caches

    def cross_attention_caches(self, encoder_output):
        """Each decoder block's cross-attention keys and values of the
        encoder's output, laid out as planned."""
        batch_size = encoder_output.shape[0]
        _, specs = self._pin(batch_size)
        caches = []
        with batch_size_scope(batch_size):
            for number, block in enumerate(
                self.backbone.decoder_transformer_layers
            ):
                cache = block.cross_attention_cache(encoder_output)
                if specs:
                    cache = constrain(cache, specs[number])
                caches.append(cache)
        return caches

    # === Text and presets ===

    # Which token starts the decoder for text prompts: the tokenizer's
    # `"pad"` id (T5's) or its first `"eos"` id (BART's `</s>`).
    decoder_start_token = "pad"

    @property
    def decoder_start_token_id(self):
        """The id text generation starts the decoder with: the one given
        (or a Hugging Face preset's `decoder_start_token_id`), else the
        family's `decoder_start_token` of the tokenizer (or of a packing
        preprocessor's, which packs its own start tokens); `None` for a
        model of token ids only."""
        if self._decoder_start_token_id is not None:
            return int(self._decoder_start_token_id)
        packer = self._packer()
        if self.tokenizer is None and packer is None:
            return None
        if self.decoder_start_token == "eos":
            if packer is not None:
                return end_token_ids(packer)[0]
            if self.tokenizer.eos_token_ids:
                return int(self.tokenizer.eos_token_ids[0])
        return self._pad_id()

    def head_config(self):
        return {"decoder_start_token_id": self._decoder_start_token_id}

    def _sample_preprocessor(self):
        # Raw text columns are packed only by a packing preprocessor.
        return self._packer()

    def _input_names(self):
        return (*self.encoder_input_names, *self.target_inputs)

    def _preprocessed(self, x, y, sample_weight):
        packer = self._packer()
        if packer is not None and is_text_columns(x):
            return preprocess_samples(
                packer, x, y, sample_weight, self._input_names()
            )
        return super()._preprocessed(x, y, sample_weight)

    @classmethod
    def from_preset(cls, preset, load_weights=True, **kwargs):
        """Builds the task from a preset directory or built-in preset.

        The backbone is built as `Backbone.from_preset` builds it (ours,
        keras-hub's or a Hugging Face directory; inside a `ModelParallel`
        scope, straight into its shards), with the tokenizer found in the
        directory (`keras_nlp.tokenizers.find_tokenizer`) and a Hugging
        Face preset's `decoder_start_token_id`.

        Args:
            preset: a preset directory, or a built-in preset name (configs
                only: with `load_weights=False`).
            load_weights: bool.
            **kwargs: `preprocessor` (used instead of the directory's
                tokenizer: keras-hub's `BartSeq2SeqLMPreprocessor` for a
                keras-hub preset, whose byte-pair tokenizer files are not
                read here), and the backbone's `from_preset` arguments.
        """
        preprocessor = kwargs.pop("preprocessor", None)
        if cls.backbone_cls is None:
            raise ValueError(
                "Seq2SeqLM is the base class: call from_preset on the "
                "family's subclass, BartSeq2SeqLM or T5Seq2SeqLM."
            )
        backbone = cls.backbone_cls.from_preset(
            preset, load_weights=load_weights, **kwargs
        )
        if preprocessor is None:
            preprocessor = preset_tokenizer(preset)
        return cls(
            backbone,
            preprocessor,
            decoder_start_token_id=preset_token_id(
                preset, "decoder_start_token_id"
            ),
        )

    def save_to_preset(self, preset_dir, **kwargs):
        """Saves the backbone (see `Backbone.save_to_preset`) and the
        tokenizer's files.

        Args:
            preset_dir: the directory.
            **kwargs: forwarded to the backbone's `save_to_preset`
                (`format=`, `max_shard_size=`).
        """
        save_task_preset(self, preset_dir, **kwargs)
