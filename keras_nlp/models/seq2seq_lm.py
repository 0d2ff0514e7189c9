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

import dataclasses

import keras
import numpy as np
from keras import ops

from keras_nlp.distribution.activations import batch_size_scope
from keras_nlp.distribution.activations import unpinned_outputs
from keras_nlp.distribution.array_placement import allocate_caches
from keras_nlp.distribution.array_placement import planned_cache_specs
from keras_nlp.distribution.array_placement import shard_batch
from keras_nlp.distribution.kv_cache import AttentionCache
from keras_nlp.distribution.kv_cache import plan_kv_caches
from keras_nlp.distribution.kv_cache import verify_cache_layouts
from keras_nlp.distribution.layout_map import active_layout_map
from keras_nlp.distribution.layout_map import bind_active_layout_map
from keras_nlp.distribution.layout_map import constrain
from keras_nlp.models.backbone import BackboneTaskConfig
from keras_nlp.models.causal_lm import RESIDUAL_STREAM
from keras_nlp.models.causal_lm_prompts import check_token_ids
from keras_nlp.models.compiled_loop import compile_loop
from keras_nlp.models.sampling import get_sampler
from keras_nlp.models.sampling import next_tokens
from keras_nlp.models.task_checks import check_backbone
from keras_nlp.models.task_preprocessing import PreprocessorAttribute
from keras_nlp.models.task_preprocessing import TextInputsMixin
from keras_nlp.models.task_preprocessing import end_token_ids
from keras_nlp.models.task_preprocessing import is_text
from keras_nlp.models.task_preprocessing import is_text_columns
from keras_nlp.models.task_preprocessing import preprocess_samples
from keras_nlp.models.task_preprocessing import preset_token_id
from keras_nlp.models.task_preprocessing import preset_tokenizer
from keras_nlp.models.task_preprocessing import save_task_preset
from keras_nlp.models.task_preprocessing import texts_of
from keras_nlp.models.task_preprocessing import tokenizer_of
from keras_nlp.models.task_training import NextTokenTraining

# The decoder width `generate` fills for text prompts by default (less
# where the backbone learned fewer positions).
DEFAULT_TEXT_LENGTH = 128
# How many compiled loops a model keeps (greedy and a sampler, say).
_MAX_COMPILED_LOOPS = 8


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
        bind_active_layout_map(backbone)
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

    def _generate_text(self, inputs, max_length, **settings):
        """`generate` on text: a str (a str back) or a list of str, or a
        packing preprocessor's `{"encoder_text", "decoder_text"}`."""
        single = isinstance(inputs, str) or (
            isinstance(inputs, dict)
            and all(isinstance(value, str) for value in inputs.values())
        )
        packer = self._packer()
        if packer is not None:
            # keras-hub's way: its preprocessor packs the prompts (its
            # own start tokens) and writes the text back.
            if isinstance(inputs, dict):
                texts = {
                    key: [value] if single else list(value)
                    for key, value in inputs.items()
                }
            else:
                texts = [inputs] if single else list(inputs)
            packed = packer.generate_preprocess(
                texts, sequence_length=max_length
            )
            arrays = {
                key: np.asarray(value).astype("int32")
                for key, value in packed.items()
            }
            outputs = self.generate(arrays, **settings)
            return texts_of(packer.generate_postprocess(outputs), single)
        if self.tokenizer is None or isinstance(inputs, dict):
            raise ValueError(
                f"{type(self).__name__}.generate takes text with a "
                "tokenizer (a list of str or a str), or with a packing "
                "preprocessor; this model has "
                f"{'neither' if self.tokenizer is None else 'a tokenizer'}."
                " Pass token ids, or give the model a `preprocessor`."
            )
        encoded = self.tokenizer.encode([inputs] if single else list(inputs))
        width = max(len(ids) for ids in encoded)
        pad_id = self._pad_id()
        encoder_ids = np.full((len(encoded), width), pad_id, "int32")
        encoder_mask = np.zeros((len(encoded), width), "int32")
        for row, ids in enumerate(encoded):
            encoder_ids[row, : len(ids)] = ids
            encoder_mask[row, : len(ids)] = 1
        if max_length is None:
            limit = getattr(self.backbone, "max_sequence_length", None)
            max_length = DEFAULT_TEXT_LENGTH
            if isinstance(limit, int):
                max_length = min(limit, max_length)
        decoder_ids = np.full((len(encoded), 1), self.decoder_start_token_id)
        outputs = self.generate(
            {
                "encoder_token_ids": encoder_ids,
                "encoder_padding_mask": encoder_mask,
                "decoder_token_ids": decoder_ids.astype("int32"),
                "decoder_padding_mask": np.ones_like(decoder_ids, "int32"),
            },
            max_length,
            **settings,
        )
        rows = [
            ids[mask]
            for ids, mask in zip(
                outputs["decoder_token_ids"],
                outputs["decoder_padding_mask"],
                strict=True,
            )
        ]
        texts = self.tokenizer.decode(rows)
        return texts[0] if single else texts

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

    # === Generation ===

    def generate(
        self,
        inputs,
        max_length=None,
        *,
        sampler=None,
        stop_token_ids="auto",
        seed=None,
    ):
        """Continues each row's decoder prompt, token by token.

        As keras-hub's `generate` with token ids: the decoder prompts are
        right-padded in `decoder_token_ids`, `decoder_padding_mask`
        marking each row's prompt (at least one token, e.g. the start
        token). Each slot past a row's prompt gets the next token of
        that row, until the row writes a stop token or the width is
        filled. The encoder runs once, the cross-attention keys and
        values are computed once, and the loop (traced once per settings
        and shapes, `generate_traces`) decodes one slot per step.

        Args:
            inputs: dict of the encoder's inputs (`encoder_input_names`:
                `encoder_token_ids` and `encoder_padding_mask`, default all
                real; Whisper's `encoder_features`), `decoder_token_ids` and
                `decoder_padding_mask` (default: all real). Or text (a
                str or a list of str) when the model has a tokenizer or a
                packing preprocessor: see `_generate_text`.
            max_length: int, the decoder width to fill; defaults to the
                width of `decoder_token_ids` (padded on the right with
                the pad id when larger).
            sampler: a sampler name, dict or `Sampler` (see
                `keras_nlp.models.sampling`); defaults to `compile`'s.
            stop_token_ids: ids that end a row (kept, then padding);
                `"auto"`: the tokenizer's end-of-sequence ids, none
                without one; `None` or `()` for none.
            seed: int, seed of a sampling sampler.

        Returns:
            dict of NumPy `decoder_token_ids` `(batch, width)` and bool
            `decoder_padding_mask`: true up to each row's stop token (or
            everywhere), as keras-hub returns them. For text, the
            generated text: a str for a str, else a list.
        """
        if is_text(inputs) or is_text_columns(inputs):
            return self._generate_text(
                inputs,
                max_length,
                sampler=sampler,
                stop_token_ids=stop_token_ids,
                seed=seed,
            )
        arrays = self._generation_arrays(inputs, max_length)
        sampler = get_sampler(self.sampler if sampler is None else sampler)
        if seed is not None:
            sampler = dataclasses.replace(sampler, seed=seed)
        seed = sampler.seed
        if seed is None:
            seed = int(np.random.randint(0, 2**31 - 1))
        stop_ids = self._stop_ids(stop_token_ids)
        pad_id = self._pad_id()
        tokens = arrays["decoder_token_ids"]
        batch_size, width = tokens.shape
        start = int(arrays["decoder_padding_mask"].sum(axis=1).min())
        if start >= width:
            return {
                "decoder_token_ids": tokens,
                "decoder_padding_mask": np.ones(tokens.shape, bool),
            }
        function = self._generate_function(sampler, stop_ids, pad_id)
        caches = self.init_cache(batch_size, width)
        encoder_inputs = {
            name: shard_batch(arrays[name]) for name in self.encoder_input_names
        }
        tokens, out_mask, caches = function(
            encoder_inputs,
            shard_batch(tokens),
            caches,
            np.asarray(seed, "int32"),
            shard_batch(arrays["decoder_padding_mask"]),
            np.asarray(start, "int32"),
        )
        plans = self._cache_plans()
        if plans:
            verify_cache_layouts(
                caches,
                plans[0],
                planned_cache_specs(plans[0], batch_size),
                active_layout_map().device_mesh,
            )
        del caches
        return {
            "decoder_token_ids": np.asarray(tokens),
            "decoder_padding_mask": np.asarray(out_mask).astype(bool),
        }

    def _generation_arrays(self, inputs, max_length):
        """`generate`'s inputs as NumPy arrays, checked."""
        required = {self.encoder_input_names[0], "decoder_token_ids"}
        if not isinstance(inputs, dict) or not required <= set(inputs):
            raise ValueError(
                f"{type(self).__name__}.generate takes a dict with "
                f"`{self.encoder_input_names[0]}` and `decoder_token_ids` "
                "(and their padding masks). Received: "
                f"{sorted(inputs) if isinstance(inputs, dict) else inputs!r}."
            )
        arrays = self._encoder_arrays(inputs)
        arrays.update(self._token_arrays(inputs, "decoder"))
        prompt = arrays["decoder_padding_mask"]
        lengths = prompt.sum(axis=1)
        prefix = np.arange(prompt.shape[1])[None] < lengths[:, None]
        if (lengths < 1).any() or (prompt != prefix).any():
            raise ValueError(
                "Each row's decoder prompt must be one or more tokens on "
                "the left of `decoder_padding_mask` (right padding, at "
                "least a start token). Received masks: "
                f"{prompt.tolist()}."
            )
        width = prompt.shape[1]
        if max_length is not None:
            if not isinstance(max_length, int) or max_length < width:
                raise ValueError(
                    "`max_length` must be an int of at least the decoder "
                    f"width {width}. Received: max_length={max_length!r}."
                )
            extra = ((0, 0), (0, max_length - width))
            pad = self._pad_id()
            for name, value in (("token_ids", pad), ("padding_mask", 0)):
                key = f"decoder_{name}"
                arrays[key] = np.pad(arrays[key], extra, constant_values=value)
        for name, (argument, limit) in self._length_limits().items():
            length = arrays[name].shape[1]
            if isinstance(limit, int) and length > limit:
                raise ValueError(
                    f"The length {length} of `{name}` exceeds the "
                    f"{type(self.backbone).__name__}'s learned positions "
                    f"({argument}={limit})."
                )
        return arrays

    def _length_limits(self):
        """Input name -> `(backbone argument, the longest it takes)`."""
        limit = getattr(self.backbone, "max_sequence_length", None)
        return {
            f"{side}_token_ids": ("max_sequence_length", limit)
            for side in ("encoder", "decoder")
        }

    def _encoder_arrays(self, inputs):
        """The encoder's inputs of `generate` (`encoder_input_names`),
        checked, as NumPy arrays."""
        return self._token_arrays(inputs, "encoder")

    def _token_arrays(self, inputs, side):
        """`{side}_token_ids` and its padding mask (default: all real) as
        int32 arrays, checked."""
        vocabulary = self.backbone.token_embedding.input_dim
        ids = np.asarray(inputs[f"{side}_token_ids"])
        if ids.ndim != 2:
            raise ValueError(
                f"`{side}_token_ids` must be `(batch, length)`. "
                f"Received shape: {ids.shape}."
            )
        check_token_ids(
            ids,
            vocabulary,
            lambda position: (
                f"`{side}_token_ids` row {position // ids.shape[1]}, "
                f"position {position % ids.shape[1]}"
            ),
        )
        mask = inputs.get(f"{side}_padding_mask")
        mask = np.ones(ids.shape) if mask is None else np.asarray(mask)
        return {
            f"{side}_token_ids": ids.astype("int32"),
            f"{side}_padding_mask": (mask != 0).astype("int32"),
        }

    def _generate_function(self, sampler, stop_ids, pad_id):
        """The compiled loop for these settings, made once."""
        variables = list(self.variables)
        sampler = dataclasses.replace(sampler, seed=None)
        key = (sampler, stop_ids, pad_id, tuple(id(v) for v in variables))
        if key not in self._generate_functions:

            def loop(*args):
                self.generate_traces += 1
                return self._generation_loop(
                    *args, sampler=sampler, stop_ids=stop_ids, pad_id=pad_id
                )

            if len(self._generate_functions) >= _MAX_COMPILED_LOOPS:
                functions = self._generate_functions
                functions.pop(next(iter(functions)))
            # The caches (the loop's third argument) are updated in place.
            self._generate_functions[key] = compile_loop(
                loop, variables, donate_argnums=(2,)
            )
        return self._generate_functions[key]

    def _encode(self, encoder_inputs):
        """`(encoder output, its padding mask or None)` of the dict of
        `encoder_input_names`."""
        mask = encoder_inputs["encoder_padding_mask"]
        output = self.backbone.encode(encoder_inputs["encoder_token_ids"], mask)
        return output, mask

    def _generation_loop(
        self,
        encoder_inputs,
        token_ids,
        caches,
        seed,
        prompt_mask,
        start,
        *,
        sampler,
        stop_ids,
        pad_id,
    ):
        """Encoder, cross-attention caches, prefill, then one slot per step.

        The prefill runs every slot of `token_ids` into the caches at
        once; slots past a row's prompt hold padding there, and each is
        written again by its own step before any later query reads it.
        """
        batch_size, width = token_ids.shape
        with batch_size_scope(batch_size):
            encoder_output, encoder_padding_mask = self._encode(encoder_inputs)
            encoder_output = constrain(encoder_output, RESIDUAL_STREAM)
        cross = self.cross_attention_caches(encoder_output)
        stops = None
        if stop_ids:
            stops = ops.convert_to_tensor(list(stop_ids), "int32")

        def write(token_ids, out_mask, done, token, slot):
            prompted = ops.slice(prompt_mask, [0, slot], [batch_size, 1])[:, 0]
            prompted = prompted > 0
            given = ops.slice(token_ids, [0, slot], [batch_size, 1])[:, 0]
            token = ops.where(done, pad_id, token)
            token = ops.where(prompted, given, token)
            token_ids = ops.slice_update(token_ids, [0, slot], token[:, None])
            written = ops.cast(ops.logical_not(done), "int32")[:, None]
            out_mask = ops.slice_update(out_mask, [0, slot], written)
            if stops is not None:
                stopped = ops.any(token[:, None] == stops[None], axis=1)
                stopped = ops.logical_and(stopped, ops.logical_not(prompted))
                done = ops.logical_or(done, stopped)
            return token_ids, out_mask, done

        _, hidden, caches = self.call_with_cache(
            token_ids, caches, cross, 0, encoder_padding_mask
        )
        last = ops.slice(
            hidden, [0, start - 1, 0], [batch_size, 1, hidden.shape[-1]]
        )
        token = next_tokens(self.logits(last)[:, 0], sampler, seed, start)
        done = ops.zeros((batch_size,), "bool")
        token_ids, out_mask, done = write(
            token_ids, prompt_mask, done, token, start
        )

        def more(slot, token_ids, out_mask, done, caches):
            return ops.logical_and(slot < width, ops.logical_not(ops.all(done)))

        def step(slot, token_ids, out_mask, done, caches):
            previous = ops.slice(token_ids, [0, slot - 1], [batch_size, 1])
            logits, _, caches = self.call_with_cache(
                previous, caches, cross, slot - 1, encoder_padding_mask
            )
            token = next_tokens(logits[:, 0], sampler, seed, slot)
            token_ids, out_mask, done = write(
                token_ids, out_mask, done, token, slot
            )
            return slot + 1, token_ids, out_mask, done, caches

        _, token_ids, out_mask, _, caches = ops.while_loop(
            more,
            step,
            (start + 1, token_ids, out_mask, done, caches),
        )
        # Small: whole on every device.
        token_ids = constrain(token_ids, (None, None))
        out_mask = constrain(out_mask, (None, None))
        return token_ids, out_mask, caches
