"""Causal language models: a decoder backbone plus its output head.

`CausalLM` turns any decoder backbone of this library (one that keeps a
`decoder_stack`, see `keras_nlp.models.decoder`) into a model that predicts
the next token: `fit` on token ids, and `generate` with a preallocated
key/value cache in one compiled loop. Each family's subclass
(`GemmaCausalLM`, `LlamaCausalLM`, ...) only names its backbone class.

Under `keras.distribution.ModelParallel` with a layout map from
`get_layout_map`, generation runs sharded: the prompts are split over the
batch axes, the weights stay where the plan put them, and each attention's
cache gets its planned layout (`LayoutPlan.kv_caches`, see
`keras_nlp.distribution.kv_cache`), which `generate` verifies on the caches
the loop returns.
"""

import dataclasses
import os
import warnings

import keras
import numpy as np
from keras import ops

from keras_nlp.distribution.activations import FREE
from keras_nlp.distribution.activations import batch_size_scope
from keras_nlp.distribution.activations import unpinned_outputs
from keras_nlp.distribution.generation import allocate_caches
from keras_nlp.distribution.generation import planned_cache_specs
from keras_nlp.distribution.generation import shard_batch
from keras_nlp.distribution.kv_cache import verify_cache_layouts
from keras_nlp.distribution.layout_map import active_layout_map
from keras_nlp.distribution.layout_map import constrain
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.sampling import get_sampler
from keras_nlp.models.sampling import next_tokens

# The residual stream's layout while decoding, as the plan pins it.
RESIDUAL_STREAM = (FREE, None, None)

_CAUSAL_LMS = {}


def causal_lm_class(backbone_cls):
    """The `CausalLM` subclass of a backbone class.

    Raises:
        ValueError: if the backbone has none (an encoder, say).
    """
    for klass in backbone_cls.__mro__:
        if klass in _CAUSAL_LMS:
            return _CAUSAL_LMS[klass]
    raise ValueError(
        f"{backbone_cls.__name__} has no causal LM: it is not a decoder. "
        "Decoders with one: "
        + ", ".join(sorted(k.__name__ for k in _CAUSAL_LMS))
        + "."
    )


class CausalLM(keras.Model):
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

    Args:
        backbone: a decoder backbone of this library.
        preprocessor: optional, where keras-hub takes its preprocessor: a
            `keras_nlp.tokenizers.TextPreprocessor` or `Tokenizer`, for
            text in and out of `generate`.
        tokenizer: optional `keras_nlp.tokenizers.Tokenizer`, the same
            (keyword only; give one of the two).
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
        if cls.backbone_cls is not None:
            _CAUSAL_LMS.setdefault(cls.backbone_cls, cls)

    def __init__(
        self, backbone, preprocessor=None, *, tokenizer=None, **kwargs
    ):
        if preprocessor is not None:
            if tokenizer is not None:
                raise ValueError(
                    "Pass a `preprocessor` or a `tokenizer`, not both."
                )
            tokenizer = getattr(preprocessor, "tokenizer", preprocessor)
            if not hasattr(tokenizer, "encode"):
                raise ValueError(
                    "`preprocessor` must be a keras_nlp.tokenizers."
                    "TextPreprocessor or Tokenizer. Received: "
                    f"{type(preprocessor).__name__}."
                )
        expected = self.backbone_cls or Backbone
        if not isinstance(backbone, expected):
            raise ValueError(
                f"{type(self).__name__} takes a {expected.__name__}. "
                f"Received: {type(backbone).__name__}."
            )
        if getattr(backbone, "decoder_stack", None) is None:
            raise ValueError(
                f"{type(backbone).__name__} is not a decoder backbone (it "
                "keeps no `decoder_stack`), so it cannot generate. Use a "
                "decoder such as GemmaBackbone or LlamaBackbone."
            )
        super().__init__(**kwargs)
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.sampler = get_sampler("greedy")
        self._generate_functions = {}
        # How many times the generation loop was traced (compiled): once per
        # new combination of batch size, prompt length and total length.
        self.generate_traces = 0

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
                by default their cache indices.

        Returns:
            `(logits, hidden_states, cache)`: logits `(batch, seq, vocab)`,
            the final hidden states, and the updated caches.
        """
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
        specs = planned_cache_specs(self._cache_plans(), batch_size)
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
            planned_cache_specs(self._cache_plans(), batch_size),
        )

    # === Generation ===

    def generate(
        self,
        inputs,
        max_length=None,
        *,
        max_new_tokens=None,
        sampler=None,
        stop_token_ids="auto",
        strip_prompt=False,
        seed=None,
    ):
        """Continues prompts, token by token, in one compiled loop.

        Prompts of different lengths are batched left-padded: each row's
        tokens count positions from its first real token, so a row's
        continuation is the one it gets alone. The prompts are run once
        (prefill) into a preallocated cache, then one token per step is
        decoded until every row has reached its length or a stop token.
        The loop is traced once per batch size, prompt length and total
        length (`generate_traces` counts the traces).

        Args:
            inputs: the prompts: a string or list of strings (with a
                tokenizer); a list of token id lists; or a dict with
                `token_ids` `(batch, length)` and optionally
                `padding_mask` (each row's real tokens contiguous, padded
                on either side), or such an array.
            max_length: int, the length a row may reach, prompt included.
                Defaults to the width of a `token_ids` input (keras-hub's
                convention: its padding is filled).
            max_new_tokens: int, generate at most this many tokens per row
                instead of `max_length`. The loop's shape then depends on
                the longest prompt only; with `max_length`, rows fill up to
                it, so its length follows the shortest prompt, and a batch
                whose shortest prompt differs traces it anew.
            sampler: a sampler name (`"greedy"`, `"random"`, `"top_k"`,
                `"top_p"`), dict or `keras_nlp.models.sampling.Sampler`;
                defaults to the one given to `compile` (greedy).
            stop_token_ids: token ids that end a row (kept, then padding);
                `"auto"` takes the tokenizer's end-of-sequence ids (none
                without a tokenizer); `None` or `()` for none.
            strip_prompt: bool, return only the generated tokens.
            seed: int, seed of a sampling sampler (overrides its own).

        Returns:
            With text inputs, the generated text (a string or a list).
            Otherwise a dict of NumPy `token_ids` and `padding_mask`
            `(batch, width)`: each row's prompt and continuation, then
            padding (`width` is `max_length`, or the longest prompt plus
            `max_new_tokens`).
        """
        texts, single, prompts, width = self._prompts(inputs)
        limits = self._row_limits(prompts, max_length, max_new_tokens, width)
        sampler = get_sampler(self.sampler if sampler is None else sampler)
        stop_ids = self._stop_ids(stop_token_ids)
        pad_id = self._pad_id()

        prompt_length = max(len(p) for p in prompts)
        batch_size = len(prompts)
        new_tokens = [
            limit - len(prompt)
            for limit, prompt in zip(limits, prompts, strict=True)
        ]
        total = prompt_length + max(new_tokens)
        self._check_positions(max(limits))
        token_ids = np.full((batch_size, total), pad_id, "int32")
        prompt_mask = np.zeros((batch_size, prompt_length), "int32")
        # The slot after which each row is done.
        slot_limits = np.zeros((batch_size,), "int32")
        for row, (prompt, limit) in enumerate(
            zip(prompts, limits, strict=True)
        ):
            start = prompt_length - len(prompt)
            token_ids[row, start:prompt_length] = prompt
            prompt_mask[row, start:] = 1
            slot_limits[row] = start + limit
        if seed is None:
            seed = sampler.seed
        if seed is None:
            seed = int(np.random.randint(0, 2**31 - 1))

        extras = {
            name: shard_batch(array)
            for name, array in self._generation_inputs(
                inputs, batch_size
            ).items()
        }
        function = self._generate_function(sampler, stop_ids, pad_id)
        caches = self.init_cache(batch_size, total)
        arrays = [
            shard_batch(array)
            for array in (token_ids, prompt_mask, slot_limits)
        ]
        tokens, mask, caches = function(
            *arrays, caches, np.asarray(seed, "int32"), extras
        )
        plans = self._cache_plans()
        if plans:
            verify_cache_layouts(
                caches,
                plans,
                planned_cache_specs(plans, batch_size),
                active_layout_map().device_mesh,
            )
        del caches
        tokens = np.asarray(tokens)
        mask = np.asarray(mask).astype(bool)

        out_width = max(limits)
        out_tokens = np.full((batch_size, out_width), pad_id, "int32")
        out_mask = np.zeros((batch_size, out_width), "int32")
        for row, prompt in enumerate(prompts):
            kept = tokens[row][mask[row]]
            if strip_prompt:
                kept = kept[len(prompt) :]
            out_tokens[row, : len(kept)] = kept
            out_mask[row, : len(kept)] = 1
        if not texts:
            return {"token_ids": out_tokens, "padding_mask": out_mask}
        rows = [
            out_tokens[row][out_mask[row].astype(bool)]
            for row in range(batch_size)
        ]
        decoded = [self.tokenizer.decode(self._known_ids(r)) for r in rows]
        return decoded[0] if single else decoded

    def _known_ids(self, ids):
        """`ids` without those past the tokenizer's vocabulary, with a
        warning: embedding tables are often padded beyond it (Qwen's), and
        an untrained row can still win a greedy step."""
        known = ids < self.tokenizer.vocabulary_size
        special = np.isin(
            ids, list(getattr(self.tokenizer, "_special_ids", ()))
        )
        known = known | special
        if not known.all():
            warnings.warn(
                f"Generated token ids {sorted(set(ids[~known].tolist()))} "
                "are past the tokenizer's vocabulary "
                f"({self.tokenizer.vocabulary_size} ids) and have no text; "
                "they are left out of the decoded text (the token ids are "
                "in `generate`'s output for token-id prompts).",
                stacklevel=3,
            )
        return ids[known]

    def _generate_function(self, sampler, stop_ids, pad_id):
        """The compiled generation loop for these settings, made once."""
        variables = list(self.variables)
        # The seed is an input of the loop, not part of it.
        sampler = dataclasses.replace(sampler, seed=None)
        key = (sampler, stop_ids, pad_id, tuple(id(v) for v in variables))
        if key in self._generate_functions:
            return self._generate_functions[key]

        def loop(token_ids, prompt_mask, slot_limits, caches, seed, extras):
            self.generate_traces += 1
            return self._generation_loop(
                token_ids,
                prompt_mask,
                slot_limits,
                caches,
                seed,
                sampler=sampler,
                stop_ids=stop_ids,
                pad_id=pad_id,
                extras=extras,
            )

        backend = keras.backend.backend()
        if backend == "jax":
            import jax

            def stateless(values, *args):
                mapping = list(zip(variables, values, strict=True))
                # The loop creates no variables: leave any that others left
                # pending (deferred initialization) to their owners.
                with keras.StatelessScope(
                    state_mapping=mapping, initialize_variables=False
                ):
                    return loop(*args)

            # The caches are donated: the loop updates them in place.
            compiled = jax.jit(stateless, donate_argnums=(4,))

            def function(*args):
                return compiled([v.value for v in variables], *args)

        elif backend == "tensorflow":
            import tensorflow as tf

            function = tf.function(loop, reduce_retracing=False)
        else:
            raise NotImplementedError(
                "`generate` runs on the JAX and TensorFlow backends; the "
                f"active backend is {backend!r}."
            )
        # A few settings stay compiled (greedy and a sampler, say).
        if len(self._generate_functions) >= 8:
            self._generate_functions.pop(next(iter(self._generate_functions)))
        self._generate_functions[key] = function
        return function

    def _generation_loop(
        self,
        token_ids,
        prompt_mask,
        slot_limits,
        caches,
        seed,
        *,
        sampler,
        stop_ids,
        pad_id,
        extras=None,
    ):
        """Prefill, then decode one token per step until every row is done.

        `token_ids` `(batch, total)` holds the left-padded prompts in its
        first `prompt_length` slots; slot `s` of row `b` is position
        `s - pads[b]`. `extras` are the arrays of `_generation_inputs`,
        given to `_prefill`.
        """
        batch_size, total = token_ids.shape
        prompt_length = prompt_mask.shape[1]
        pads = prompt_length - ops.sum(prompt_mask, axis=1)
        new_slots = (batch_size, total - prompt_length)
        cache_mask = ops.concatenate(
            [prompt_mask, ops.ones(new_slots, "int32")], axis=1
        )
        stops = None
        if stop_ids:
            stops = ops.convert_to_tensor(list(stop_ids), "int32")

        def write(token_ids, out_mask, done, token, slot):
            token = ops.where(done, pad_id, token)
            token_ids = ops.slice_update(token_ids, [0, slot], token[:, None])
            written = ops.cast(ops.logical_not(done), "int32")[:, None]
            out_mask = ops.slice_update(out_mask, [0, slot], written)
            finished = slot + 1 >= slot_limits
            if stops is not None:
                finished = ops.logical_or(
                    finished, ops.any(token[:, None] == stops[None], axis=1)
                )
            return token_ids, out_mask, ops.logical_or(done, finished)

        positions = (
            ops.arange(prompt_length, dtype="int32")[None, :] - pads[:, None]
        )
        hidden, caches = self._prefill(
            token_ids[:, :prompt_length],
            caches,
            cache_mask,
            positions,
            extras or {},
        )
        logits = self.logits(hidden[:, -1:])[:, 0]
        token = next_tokens(logits, sampler, seed, prompt_length)
        out_mask = ops.concatenate(
            [prompt_mask, ops.zeros(new_slots, "int32")], axis=1
        )
        done = slot_limits <= prompt_length
        token_ids, out_mask, done = write(
            token_ids, out_mask, done, token, prompt_length
        )

        def more(slot, token_ids, out_mask, done, caches):
            return ops.logical_and(slot < total, ops.logical_not(ops.all(done)))

        def step(slot, token_ids, out_mask, done, caches):
            previous = ops.slice(token_ids, [0, slot - 1], [batch_size, 1])
            hidden, caches = self._decode(
                previous,
                caches,
                slot - 1,
                cache_mask,
                # A finished row decodes on, unread; its positions stay in
                # range (a table of learned positions has no more rows).
                ops.minimum(slot - 1, slot_limits - 1)[:, None] - pads[:, None],
            )
            token = next_tokens(self.logits(hidden)[:, 0], sampler, seed, slot)
            token_ids, out_mask, done = write(
                token_ids, out_mask, done, token, slot
            )
            return slot + 1, token_ids, out_mask, done, caches

        _, token_ids, out_mask, _, caches = ops.while_loop(
            more,
            step,
            (
                ops.convert_to_tensor(prompt_length + 1, "int32"),
                token_ids,
                out_mask,
                done,
                caches,
            ),
        )
        # The tokens are small: whole on every device, so every process of
        # a JAX cluster can read them.
        token_ids = constrain(token_ids, (None, None))
        out_mask = constrain(out_mask, (None, None))
        return token_ids, out_mask, caches

    # === Generation inputs ===

    def _prompts(self, inputs):
        """`(texts, single, prompts, width)`: prompts as lists of ids."""
        if isinstance(inputs, str) or (
            isinstance(inputs, (list, tuple))
            and inputs
            and all(isinstance(x, str) for x in inputs)
        ):
            if self.tokenizer is None:
                raise ValueError(
                    "Text prompts need a tokenizer, and this "
                    f"{type(self).__name__} has none (its preset directory "
                    "had no tokenizer.json or tokenizer.model). Pass token "
                    "ids, or `tokenizer=` when building the model."
                )
            single = isinstance(inputs, str)
            texts = [inputs] if single else list(inputs)
            prompts = [list(self.tokenizer.encode(text)) for text in texts]
            return True, single, _check_prompts(prompts), None
        if isinstance(inputs, dict):
            if "token_ids" not in inputs:
                raise ValueError(
                    "A dict of prompts needs `token_ids` (and optionally "
                    f"`padding_mask`). Received keys: {sorted(inputs)}."
                )
            token_ids = np.asarray(inputs["token_ids"])
            mask = inputs.get("padding_mask")
            mask = np.ones_like(token_ids) if mask is None else np.asarray(mask)
            return False, False, _unpad(token_ids, mask), token_ids.shape[1]
        if isinstance(inputs, (list, tuple)) and all(
            isinstance(row, (list, tuple, np.ndarray)) for row in inputs
        ):
            return False, False, _check_prompts(inputs), None
        array = np.asarray(inputs)
        if array.ndim == 2 and np.issubdtype(array.dtype, np.integer):
            return False, False, _unpad(array, np.ones_like(array)), None
        raise ValueError(
            "`generate` takes a string or list of strings, a list of token "
            "id lists, a 2D int array, or a dict with `token_ids` and "
            f"`padding_mask`. Received: {type(inputs).__name__}."
        )

    def _row_limits(self, prompts, max_length, max_new_tokens, width):
        """The length each row may reach, prompt included."""
        if max_length is not None and max_new_tokens is not None:
            raise ValueError(
                "Pass `max_length` or `max_new_tokens`, not both. Received: "
                f"max_length={max_length}, max_new_tokens={max_new_tokens}."
            )
        for name, value in (
            ("max_length", max_length),
            ("max_new_tokens", max_new_tokens),
        ):
            if value is not None and (
                not isinstance(value, (int, np.integer))
                or isinstance(value, bool)
                or value < 1
            ):
                raise ValueError(
                    f"`{name}` must be a positive integer. Received: "
                    f"{name}={value!r}."
                )
        longest = max(len(p) for p in prompts)
        if max_new_tokens is not None:
            return [len(prompt) + max_new_tokens for prompt in prompts]
        if max_length is None:
            max_length = width
        if max_length is None:
            raise ValueError(
                "Pass `max_length` (the length a row may reach, prompt "
                "included) or `max_new_tokens` for prompts given as lists "
                "or text."
            )
        if longest >= max_length:
            raise ValueError(
                f"A prompt of {longest} tokens leaves nothing to generate "
                f"within max_length={max_length}. Pass a larger "
                "`max_length` or use `max_new_tokens`."
            )
        return [max_length for _ in prompts]

    def _check_positions(self, total):
        """Refuses rows longer than a table of learned positions."""
        if not self.backbone.decoder_stack.embed_takes_positions:
            return
        limit = getattr(self.backbone, "max_sequence_length", None)
        if isinstance(limit, int) and total > limit:
            raise ValueError(
                f"Generating to {total} positions exceeds the "
                f"{type(self.backbone).__name__}'s learned positions "
                f"(max_sequence_length={limit}). Pass a smaller "
                "`max_length` or `max_new_tokens`."
            )

    def _stop_ids(self, stop_token_ids):
        if isinstance(stop_token_ids, str):
            if stop_token_ids != "auto":
                raise ValueError(
                    "`stop_token_ids` must be 'auto', None or a list of "
                    f"ints. Received: {stop_token_ids!r}."
                )
            if self.tokenizer is None:
                return ()
            return tuple(int(i) for i in self.tokenizer.eos_token_ids)
        if stop_token_ids is None:
            return ()
        if isinstance(stop_token_ids, (int, np.integer)):
            stop_token_ids = (stop_token_ids,)
        ids = tuple(int(i) for i in stop_token_ids)
        vocabulary = self.backbone.token_embedding.input_dim
        bad = [i for i in ids if not 0 <= i < vocabulary]
        if bad:
            raise ValueError(
                f"Stop token ids {bad} are outside the vocabulary "
                f"[0, {vocabulary})."
            )
        return ids

    def _generation_inputs(self, inputs, batch_size):
        """Arrays besides the prompts that `generate` passes to `_prefill`.

        Hook for subclasses whose generation needs more than token ids
        (PaliGemma's `images`): from `generate`'s raw `inputs`, a dict of
        arrays whose first dimension is `batch_size`. They go through the
        compiled loop split over the batch axes like the prompts, and a new
        shape traces the loop anew. By default there are none.
        """
        del inputs, batch_size
        return {}

    def _pad_id(self):
        if self.tokenizer is None:
            return 0
        return int(self.tokenizer.pad_token_id)

    # === Training ===

    def compile(
        self,
        optimizer="auto",
        loss="auto",
        *,
        weighted_metrics="auto",
        sampler="greedy",
        **kwargs,
    ):
        """Configures training and generation.

        Args:
            optimizer: `"auto"` (AdamW, learning rate 5e-5, weight decay
                0.01 except on biases and norm scales) or a Keras
                optimizer.
            loss: `"auto"` (sparse categorical cross-entropy from logits)
                or a Keras loss.
            weighted_metrics: `"auto"` (sparse categorical accuracy,
                weighted by the padding mask) or a list of metrics.
            sampler: the default sampler of `generate` (see
                `keras_nlp.models.sampling.get_sampler`).
            **kwargs: forwarded to `keras.Model.compile`.
        """
        if optimizer == "auto":
            optimizer = keras.optimizers.AdamW(
                learning_rate=5e-5, weight_decay=0.01
            )
            optimizer.exclude_from_weight_decay(
                var_names=["bias", "scale", "gamma", "beta"]
            )
        if loss == "auto":
            loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        if weighted_metrics == "auto":
            weighted_metrics = [
                keras.metrics.SparseCategoricalAccuracy(name="accuracy")
            ]
        self.sampler = get_sampler(sampler)
        super().compile(
            optimizer=optimizer,
            loss=loss,
            weighted_metrics=weighted_metrics,
            **kwargs,
        )

    def _next_token_targets(self, x, y, y_pred, sample_weight):
        """Targets from the inputs: each position predicts the next token."""
        if y is not None or not isinstance(x, dict) or "token_ids" not in x:
            return y, y_pred, sample_weight
        token_ids = x["token_ids"]
        weight = ops.ones_like(token_ids[:, 1:], "float32")
        if "padding_mask" in x:
            mask = ops.cast(x["padding_mask"], "float32")
            # Both the token and the one it predicts must be real.
            weight = mask[:, 1:] * mask[:, :-1]
        if sample_weight is not None:
            weight = weight * ops.cast(sample_weight, "float32")[:, None]
        # Keras averages over every position: rescaled, the loss is the
        # mean over the real ones, whatever the padding.
        weight = weight / ops.maximum(ops.mean(weight), 1e-9)
        return token_ids[:, 1:], y_pred[:, :-1], weight

    def compute_loss(
        self, x=None, y=None, y_pred=None, sample_weight=None, training=True
    ):
        y, y_pred, sample_weight = self._next_token_targets(
            x, y, y_pred, sample_weight
        )
        return super().compute_loss(
            x=x,
            y=y,
            y_pred=y_pred,
            sample_weight=sample_weight,
            training=training,
        )

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        y, y_pred, sample_weight = self._next_token_targets(
            x, y, y_pred, sample_weight
        )
        return super().compute_metrics(x, y, y_pred, sample_weight)

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
        from keras_nlp.tokenizers import find_tokenizer

        backbone_cls = cls.backbone_cls or Backbone
        backbone = backbone_cls.from_preset(
            preset, load_weights=load_weights, **kwargs
        )
        task_cls = cls if cls.backbone_cls else causal_lm_class(type(backbone))
        tokenizer = None
        if isinstance(preset, (str, os.PathLike)) and os.path.isdir(preset):
            tokenizer = find_tokenizer(preset)
        return task_cls(backbone=backbone, tokenizer=tokenizer)

    def save_to_preset(self, preset_dir, **kwargs):
        """Saves the backbone (see `Backbone.save_to_preset`) and tokenizer.

        Args:
            preset_dir: the directory.
            **kwargs: forwarded to the backbone's `save_to_preset`
                (`format=`, `max_shard_size=`).
        """
        self.backbone.save_to_preset(preset_dir, **kwargs)
        if self.tokenizer is not None:
            self.tokenizer.save_to_preset(preset_dir)

    # === Config ===

    def get_config(self):
        return {
            "backbone": keras.saving.serialize_keras_object(self.backbone),
            "name": self.name,
            "trainable": self.trainable,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["backbone"] = keras.saving.deserialize_keras_object(
            config["backbone"]
        )
        return cls(**config)


def _check_prompts(prompts):
    """Lists of ids -> list of int lists; refuses empty prompts."""
    checked = []
    for index, prompt in enumerate(prompts):
        ids = [int(i) for i in np.asarray(prompt).reshape(-1)]
        if not ids:
            raise ValueError(
                f"Prompt {index} is empty; every prompt needs at least one "
                "token (a start token, for instance)."
            )
        checked.append(ids)
    if not checked:
        raise ValueError("`generate` received no prompts.")
    return checked


def _unpad(token_ids, padding_mask):
    """Each row's real tokens, which must be one contiguous run."""
    if token_ids.ndim != 2 or token_ids.shape != padding_mask.shape:
        raise ValueError(
            "`token_ids` and `padding_mask` must be 2D and of one shape. "
            f"Received: {token_ids.shape} and {padding_mask.shape}."
        )
    prompts = []
    rows = zip(token_ids, padding_mask.astype(bool), strict=True)
    for row, (ids, mask) in enumerate(rows):
        real = np.flatnonzero(mask)
        if real.size and real[-1] - real[0] + 1 != real.size:
            raise ValueError(
                f"Row {row} of `padding_mask` has padding between real "
                "tokens; pad each prompt on the left or the right only. "
                f"Received: {mask.astype(int).tolist()}."
            )
        prompts.append(ids[real])
    return _check_prompts(prompts)


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
        self, preprocessor=None, backbone=None, *, tokenizer=None, **kwargs
    ):
        if isinstance(preprocessor, Backbone) and backbone is None:
            preprocessor, backbone = None, preprocessor
        if backbone is None:
            raise ValueError(
                f"{type(self).__name__} needs a backbone: "
                f"{type(self).__name__}(backbone) or "
                f"{type(self).__name__}(preprocessor, backbone)."
            )
        super().__init__(backbone, preprocessor, tokenizer=tokenizer, **kwargs)
