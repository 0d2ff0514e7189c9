"""`CausalLM.generate`: continuing prompts in one compiled loop.

The prompts are batched left-padded on the host (`causal_lm_prompts`), run
once into a preallocated key/value cache (prefill), then decoded one token
per step inside a single `while_loop`, compiled once per settings and
shape; the sampler (`sampling`) picks each token.

This is a mixin of `CausalLM`, not a separate generator object, because
the loop is made of the model's own overridable steps: `_prefill`,
`_decode` and `logits`, and `_generation_inputs` here. A subclass
(PaliGemma's) changes generation by overriding those methods, and
`generate`, `generate_traces` and the compiled loops stay on the model,
as users and keras-hub expect, with no second object holding the model.
The mixin expects the model's `backbone`, `tokenizer`, `_packer()` (its
keras-hub preprocessor, if any), `_stop_ids` and `_pad_id` (all three
from `task_preprocessing.PreprocessorAttribute`), `variables`,
`init_cache` and `_cache_plans`.
"""

import dataclasses
import functools
import math
import os
import warnings

import keras
import numpy as np
from keras import ops

from keras_nlp.distribution.array_placement import planned_cache_specs
from keras_nlp.distribution.array_placement import shard_batch
from keras_nlp.distribution.formatting import format_bytes
from keras_nlp.distribution.kv_cache import verify_cache_layouts
from keras_nlp.distribution.layout_map import active_layout_map
from keras_nlp.distribution.layout_map import constrain
from keras_nlp.models.causal_lm_prompts import batch_width
from keras_nlp.models.causal_lm_prompts import left_pad
from keras_nlp.models.causal_lm_prompts import read_prompts
from keras_nlp.models.causal_lm_prompts import row_limits
from keras_nlp.models.causal_lm_prompts import unpack_rows
from keras_nlp.models.compiled_loop import compile_loop
from keras_nlp.models.sampling import get_sampler
from keras_nlp.models.sampling import next_tokens
from keras_nlp.models.task_preprocessing import is_packing_preprocessor
from keras_nlp.models.task_preprocessing import is_text
from keras_nlp.models.task_preprocessing import pack_prompts
from keras_nlp.models.task_preprocessing import unpack_text
from keras_nlp.saving.weight_transfer import numpy_dtype

# How many compiled loops a model keeps (greedy and a sampler, say).
_MAX_COMPILED_LOOPS = 8
# The most positions a row may reach in a model without a table of learned
# positions (RoPE, ALiBi): 8x the longest context the families here are
# published with (131,072: Llama 3.1, Gemma 3). Every step reads the whole
# cache, so a loop this long already takes hours of steps on a tiny model;
# past it a request is a slip (10**7 new tokens ran for minutes and grew
# to gigabytes), which is refused at once rather than run.
MAX_GENERATED_POSITIONS = 2**20


class GenerationMixin:
    """`generate` and its compiled loop, for `CausalLM`."""

    def _init_generation(self):
        self.sampler = get_sampler("greedy")
        self._reset_generate_functions()
        # How many times the generation loop was traced (compiled): once per
        # new combination of batch size, prompt length and total length.
        self.generate_traces = 0

    def _reset_generate_functions(self):
        self._generate_functions = {}
        self._last_generate_function = None

    @property
    def generate_function(self):
        """The compiled loop the last `generate` ran, or `None` before the
        first one and after `compile` or `quantize` (which change what a
        loop computes). The same object while calls reuse it: a new one
        means a new trace."""
        return self._last_generate_function

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
                tokenizer, or a packing preprocessor such as keras-hub's
                `XCausalLMPreprocessor`, which then packs them to
                `max_length`, by default its `sequence_length`, and
                writes the text back); a list of token id lists; or a dict with
                `token_ids` `(batch, length)` and optionally
                `padding_mask` (each row's real tokens contiguous, padded
                on either side), or such an array. Token ids are integers
                of the model's vocabulary (a float or a string is refused,
                never rounded or parsed).
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
                `"auto"` takes the tokenizer's end-of-sequence ids (or a
                packing preprocessor's end token; none without either);
                `None` or `()` for none.
            strip_prompt: bool, return only the generated tokens.
            seed: int, seed of a sampling sampler (overrides its own),
                from -2**31 to 2**31 - 1.

        Returns:
            With text inputs, the generated text (a string or a list).
            Otherwise a dict of NumPy `token_ids` and `padding_mask`
            `(batch, width)`: each row's prompt and continuation, then
            padding (`width` is `max_length`, or the longest prompt plus
            `max_new_tokens`).

        Raises:
            ValueError: before anything is allocated or compiled, for a
                prompt id that is not an integer of the vocabulary, a
                stop id (explicit or from the tokenizer's files) outside
                it, or a length past the model's learned positions,
                `MAX_GENERATED_POSITIONS` or the memory the caches would
                live in.
        """
        if is_text(inputs) and is_packing_preprocessor(self._packer()):
            # keras-hub's way: its preprocessor packs the prompts and
            # writes the text back.
            outputs = self.generate(
                pack_prompts(
                    self._packer(),
                    [inputs] if isinstance(inputs, str) else list(inputs),
                    None if max_new_tokens is not None else max_length,
                ),
                max_length=max_length,
                max_new_tokens=max_new_tokens,
                sampler=sampler,
                stop_token_ids=stop_token_ids,
                strip_prompt=strip_prompt,
                seed=seed,
            )
            return unpack_text(
                self._packer(), outputs, single=isinstance(inputs, str)
            )
        prompts = read_prompts(
            inputs, self.tokenizer, type(self).__name__, self._vocabulary_size()
        )
        limits = row_limits(prompts, max_length, max_new_tokens)
        self._check_lengths(
            len(prompts.ids), max(limits), batch_width(prompts.ids, limits)
        )
        sampler = get_sampler(self.sampler if sampler is None else sampler)
        if seed is not None:
            # Checked as a sampler's own seed is.
            sampler = dataclasses.replace(sampler, seed=seed)
        stop_ids = self._stop_ids(stop_token_ids)
        pad_id = self._pad_id()
        batch = left_pad(prompts.ids, limits, pad_id)
        seed = sampler.seed
        if seed is None:
            seed = int(np.random.randint(0, 2**31 - 1))
        tokens, written = self._run_loop(
            batch, inputs, sampler, stop_ids, pad_id, seed
        )
        out_tokens, out_mask = unpack_rows(
            tokens, written, prompts.ids, limits, pad_id, strip_prompt
        )
        if not prompts.is_text:
            return {"token_ids": out_tokens, "padding_mask": out_mask}
        rows = [
            row_tokens[row_mask.astype(bool)]
            for row_tokens, row_mask in zip(out_tokens, out_mask, strict=True)
        ]
        decoded = [self.tokenizer.decode(self._known_ids(r)) for r in rows]
        return decoded[0] if prompts.single else decoded

    def _run_loop(self, batch, inputs, sampler, stop_ids, pad_id, seed):
        """Runs a `PaddedBatch` through the compiled loop.

        Returns:
            NumPy `(tokens, written)` `(batch, total)`: the loop's token ids
            and, as bools, the slots holding each row's tokens.
        """
        batch_size, total = batch.token_ids.shape
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
            for array in (batch.token_ids, batch.prompt_mask, batch.slot_limits)
        ]
        tokens, written, caches = function(
            *arrays, caches, np.asarray(seed, "int32"), extras
        )
        plans = self._cache_plans()
        if plans:
            verify_cache_layouts(
                caches,
                plans,
                planned_cache_specs(plans, batch_size, caches[0].shape[2]),
                active_layout_map().device_mesh,
            )
        del caches
        return np.asarray(tokens), np.asarray(written).astype(bool)

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

    # === The compiled loop ===

    def _generate_function(self, sampler, stop_ids, pad_id):
        """The compiled generation loop for these settings, made once."""
        variables = list(self.variables)
        # The seed is an input of the loop, not part of it.
        sampler = dataclasses.replace(sampler, seed=None)
        key = (sampler, stop_ids, pad_id, tuple(id(v) for v in variables))
        if key in self._generate_functions:
            self._last_generate_function = self._generate_functions[key]
            return self._last_generate_function

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

        # The caches (the loop's fourth argument) are updated in place.
        function = compile_loop(loop, variables, donate_argnums=(3,))
        if len(self._generate_functions) >= _MAX_COMPILED_LOOPS:
            self._generate_functions.pop(next(iter(self._generate_functions)))
        self._generate_functions[key] = function
        self._last_generate_function = function
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
        write = functools.partial(
            _write_token, slot_limits=slot_limits, stops=stops, pad_id=pad_id
        )

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

    # === Settings ===

    def _vocabulary_size(self):
        return self.backbone.token_embedding.input_dim

    def _check_lengths(self, batch_size, positions, slots):
        """Refuses a generation the model cannot hold, before anything is
        allocated: rows past its learned positions (or, without them,
        past `MAX_GENERATED_POSITIONS`), or caches larger than the memory
        they would live in.

        Args:
            batch_size: int, the number of rows.
            positions: int, the most positions a row reaches, its prompt
                included (left padding does not count).
            slots: int, the width of the batch and its caches.
        """
        name = type(self.backbone).__name__
        fix = "Pass a smaller `max_length` or `max_new_tokens`"
        if self.backbone.decoder_stack.embed_takes_positions:
            limit = getattr(self.backbone, "max_sequence_length", None)
            if isinstance(limit, int) and positions > limit:
                raise ValueError(
                    f"Generating to {positions} positions exceeds the "
                    f"{name}'s learned positions (max_sequence_length="
                    f"{limit}). {fix}."
                )
        elif positions > MAX_GENERATED_POSITIONS:
            raise ValueError(
                f"Generating to {positions} positions exceeds the "
                f"{MAX_GENERATED_POSITIONS} that `generate` allows a model "
                f"without learned positions ({name}). {fix}."
            )
        # The caches are by far the largest arrays of a generation: the
        # same estimate as their shapes, before they are allocated.
        itemsize = np.dtype(numpy_dtype(self.backbone.compute_dtype)).itemsize
        cache_bytes = itemsize * sum(
            math.prod(shape) for shape in self.cache_shapes(batch_size, slots)
        )
        memory, holder = _memory_for_caches()
        if memory is not None and cache_bytes > memory:
            raise ValueError(
                f"The key/value caches of {batch_size} rows of {slots} "
                f"slots would take {format_bytes(cache_bytes)}, more than "
                f"the {format_bytes(memory)} {holder}. {fix}, or fewer "
                "prompts at once."
            )

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


def _write_token(
    token_ids, out_mask, done, token, slot, *, slot_limits, stops, pad_id
):
    """Writes each row's new `token` at `slot` (padding once a row is done).

    Returns:
        The updated `(token_ids, out_mask, done)`: a row is done once it
        reaches its slot limit or writes a stop token.
    """
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


def _memory_for_caches():
    """`(bytes, phrase)`: the memory the caches may fill at most, and how
    errors name it; `(None, None)` where it is unknown.

    An accelerator reports its memory (JAX's `memory_stats`): the caches
    are split over the devices of the active layout map's mesh (else they
    live on one device), so what those devices have free bounds them
    together, the weights already deducted. On the CPU (and on
    TensorFlow) the caches are host memory: what the host has available
    now bounds them. Either is a bound, not a promise that a smaller cache
    fits (prefill activations and logits come on top).
    """
    if keras.backend.backend() == "jax":
        import jax

        stats = jax.local_devices()[0].memory_stats() or {}
        if "bytes_limit" in stats:
            layout_map = active_layout_map()
            devices = 1
            if layout_map is not None:
                devices = layout_map.device_mesh.backend_mesh.devices.size
            free = stats["bytes_limit"] - stats.get("bytes_in_use", 0)
            return devices * free, f"free on {devices} device(s)"
    available = _host_memory_available()
    if available is None:
        return None, None
    return available, "of memory available on this host"


def _host_memory_available():
    """Bytes of memory the host has available now, or None if unknown."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None
