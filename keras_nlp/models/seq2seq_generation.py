"""`Seq2SeqLM.generate`: decoding from a source in one compiled loop.

The encoder runs once; each decoder block's cross-attention keys and
values are computed once from its output; then the decoder's
self-attention caches fill one slot per step inside a single
`while_loop`, compiled once per settings and shape, the sampler
(`sampling`) picking each token. Text goes in and out through the
model's tokenizer or a keras-hub preprocessor.

A mixin of `Seq2SeqLM`, as `causal_lm_generation.GenerationMixin` is of
`CausalLM`: the loop is made of the model's own steps (`_encode`,
`cross_attention_caches`, `call_with_cache`), which a family overrides
(Whisper's encoder takes audio features). It expects the model's
`backbone`, `tokenizer`, `_packer()`, `_stop_ids`, `_pad_id`,
`init_cache`, `_cache_plans` and `_pin`.
"""

import dataclasses

import numpy as np
from keras import ops

from keras_nlp.distribution.activations import batch_size_scope
from keras_nlp.distribution.array_placement import planned_cache_specs
from keras_nlp.distribution.array_placement import shard_batch
from keras_nlp.distribution.kv_cache import verify_cache_layouts
from keras_nlp.distribution.layout_map import active_layout_map
from keras_nlp.distribution.layout_map import constrain
from keras_nlp.models.causal_lm import RESIDUAL_STREAM
from keras_nlp.models.causal_lm_prompts import check_token_ids
from keras_nlp.models.compiled_loop import compile_loop
from keras_nlp.models.sampling import get_sampler
from keras_nlp.models.sampling import next_tokens
from keras_nlp.models.task_preprocessing import is_text
from keras_nlp.models.task_preprocessing import is_text_columns
from keras_nlp.models.task_preprocessing import texts_of

# The decoder width `generate` fills for text prompts by default (less
# where the backbone learned fewer positions).
DEFAULT_TEXT_LENGTH = 128
# How many compiled loops a model keeps (greedy and a sampler, say).
_MAX_COMPILED_LOOPS = 8


class Seq2SeqGenerationMixin:
    """`generate` and its compiled loop, for `Seq2SeqLM`."""

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
