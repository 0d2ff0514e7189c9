"""Qwen 3.5's causal LMs: key/value caches and fixed-size recurrent states."""

import keras
from keras import ops

from keras_nlp.distribution.activations import FREE
from keras_nlp.distribution.activations import batch_size_scope
from keras_nlp.distribution.activations import unpinned_outputs
from keras_nlp.distribution.array_placement import allocate_caches
from keras_nlp.distribution.array_placement import planned_cache_specs
from keras_nlp.distribution.kv_cache import CachePlan
from keras_nlp.distribution.layout_map import active_layout_map
from keras_nlp.distribution.layout_map import constrain
from keras_nlp.models.causal_lm import RESIDUAL_STREAM
from keras_nlp.models.causal_lm import CausalLM
from keras_nlp.models.qwen3_5.qwen3_5_backbone import Qwen3_5Backbone


class Qwen3_5CausalLMBase(CausalLM):
    """What Qwen 3.5's causal LMs (dense and MoE) share: their caches.

    A full attention block keeps the usual key/value cache `(batch, 2,
    max_length, kv_heads, head_dim)`. A linear attention block keeps a
    state of fixed size whatever the length: the last
    `linear_conv_kernel_dim - 1` inputs of its convolution `(batch,
    kernel - 1, channels)` and its delta-rule memory `(batch, value_heads,
    key_head_dim, value_head_dim)` in float32. The caches are one flat
    list: the key/value caches of the full attention blocks in block
    order, then each linear block's convolution state and memory. Under a
    plan the memory's heads sit on the axes of the block's `A_log` (the
    model axis) and the convolution state's channels on those of its
    kernel's.
    Left-padded prompts are exact: a padded token changes no state.
    """

    def _kinds(self):
        """`(full blocks, linear blocks)`: their indices."""
        blocks = self.backbone.decoder_stack.blocks
        linear = [i for i, block in enumerate(blocks) if block.is_linear]
        full = [i for i in range(len(blocks)) if i not in linear]
        return full, linear

    def _slots(self):
        """`{block index: slot or (conv slot, memory slot)}` in the list."""
        full, linear = self._kinds()
        slots = {index: slot for slot, index in enumerate(full)}
        for number, index in enumerate(linear):
            start = len(full) + 2 * number
            slots[index] = (start, start + 1)
        return slots

    def cache_shapes(self, batch_size, max_length):
        """The shape of each cache, in the list's order."""
        blocks = self.backbone.decoder_stack.blocks
        full, linear = self._kinds()
        shapes = [
            blocks[i].attention.cache_shape(batch_size, max_length)
            for i in full
        ]
        for i in linear:
            shapes.extend(blocks[i].mixer.cache_shapes(batch_size))
        return shapes

    def _cache_plans(self):
        """A `CachePlan` per cache: the plan's key/value caches, then each
        linear block's states laid out by its value heads."""
        plan = getattr(self.backbone, "layout_plan", None)
        if plan is None or active_layout_map() is None:
            return None
        full, linear = self._kinds()
        if len(plan.kv_caches) != len(full):
            return None
        plans = list(plan.kv_caches)
        blocks = self.backbone.decoder_stack.blocks
        for i in linear:
            mixer = blocks[i].mixer
            heads = plan.weight(f"{mixer.path}/A_log").spec[0]
            channels = plan.weight(f"{mixer.path}/conv1d_kernel").spec[0]
            reason = (
                f"value heads on {heads!r}, as {mixer.path}/A_log's"
                if heads
                else "value heads whole, as the block's A_log"
            )
            plans.append(
                CachePlan(
                    path=f"{mixer.path}/conv_state",
                    kv_heads=mixer.linear_num_value_heads,
                    head_dim=mixer.linear_key_head_dim,
                    spec=(FREE, None, channels),
                    reason=(
                        f"channels on {channels!r}, as {mixer.path}/"
                        "conv1d_kernel's"
                        if channels
                        else "channels whole, as the convolution's kernel"
                    ),
                )
            )
            plans.append(
                CachePlan(
                    path=f"{mixer.path}/state",
                    kv_heads=mixer.linear_num_value_heads,
                    head_dim=mixer.linear_key_head_dim,
                    spec=(FREE, heads, None, None),
                    reason=reason,
                )
            )
        return plans

    def init_cache(self, batch_size, max_length):
        """Zero caches (see the class docstring), laid out as planned."""
        shapes = self.cache_shapes(batch_size, max_length)
        specs = planned_cache_specs(
            self._cache_plans(), batch_size, max_length
        ) or [None] * len(shapes)
        full, _ = self._kinds()
        caches = []
        for slot, (shape, spec) in enumerate(zip(shapes, specs, strict=True)):
            memory = slot >= len(full) and (slot - len(full)) % 2 == 1
            dtype = "float32" if memory else self.backbone.compute_dtype
            caches += allocate_caches(
                [shape], dtype, None if spec is None else [spec]
            )
        return caches

    def _generation_loop(self, token_ids, *args, **kwargs):
        """`CausalLM`'s loop, its final caches pinned to their plans: the
        loop's carry follows its uses, and XLA may give a small
        convolution state the channel split of the projection it reads."""
        tokens, written, caches = super()._generation_loop(
            token_ids, *args, **kwargs
        )
        full, _ = self._kinds()
        specs = planned_cache_specs(
            self._cache_plans(),
            token_ids.shape[0],
            caches[0].shape[2] if full else None,
        )
        if specs:
            caches = [
                constrain(cache, spec)
                for cache, spec in zip(caches, specs, strict=True)
            ]
        return tokens, written, caches

    def _run_blocks(self, x, caches, index, block_arguments):
        stack = self.backbone.decoder_stack
        batch_size, length = x.shape[0], x.shape[1]
        full, _ = self._kinds()
        max_length = caches[0].shape[2] if full else None
        specs = planned_cache_specs(self._cache_plans(), batch_size, max_length)
        slots = self._slots()
        # A block (and a linear attention) given a cache returns it beside
        # its outputs: pinned here, not as an output.
        outputs = [f"{block.path}/output" for block in stack.blocks]
        outputs += [
            f"{block.mixer.path}/output"
            for block in stack.blocks
            if block.is_linear
        ]
        with batch_size_scope(batch_size), unpinned_outputs(outputs):
            updated = list(caches)
            for number, block in enumerate(stack.blocks):
                arguments = dict(block_arguments(number))
                slot = slots[number]
                if block.is_linear:
                    # The mask of the new tokens only.
                    mask = arguments.get("padding_mask")
                    if mask is not None:
                        mask = ops.slice(
                            mask, (0, index), (ops.shape(mask)[0], length)
                        )
                    x, (conv, memory) = block(
                        x,
                        padding_mask=mask,
                        cache=(updated[slot[0]], updated[slot[1]]),
                    )
                    pairs = zip(slot, (conv, memory), strict=True)
                else:
                    x, cache = block(
                        x,
                        cache=updated[slot],
                        cache_update_index=index,
                        **arguments,
                    )
                    pairs = [(slot, cache)]
                for position, cache in pairs:
                    if specs:
                        cache = constrain(cache, specs[position])
                    updated[position] = cache
                x = constrain(x, RESIDUAL_STREAM)
            return stack.final_norm(x), updated


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class Qwen3_5CausalLM(Qwen3_5CausalLMBase):
    """A `Qwen3_5Backbone` and its head: next-token logits and `generate`.

    The head is the token embedding reversed (tied or not). Everything
    else (`fit`, `generate`, presets, sharding) is
    `keras_nlp.models.CausalLM`'s, with the caches of
    `Qwen3_5CausalLMBase`: key/value caches for the full attention blocks,
    a fixed-size recurrent state for the linear ones.

    Args:
        backbone: a `Qwen3_5Backbone`.
        preprocessor: optional `TextPreprocessor` or `Tokenizer`.
        **kwargs: forwarded to `CausalLM`.

    Example:

    ```python
    import numpy as np
    import keras_nlp

    backbone = keras_nlp.models.Qwen3_5Backbone(
        vocabulary_size=64, num_layers=2, num_query_heads=4,
        num_key_value_heads=2, head_dim=8, hidden_dim=16,
        intermediate_dim=32, layer_types=["linear_attention",
        "full_attention"], linear_num_key_heads=2,
        linear_num_value_heads=4, linear_key_head_dim=8,
        linear_value_head_dim=8,
    )
    causal_lm = keras_nlp.models.Qwen3_5CausalLM(backbone)
    prompts = {
        "token_ids": np.array([[0, 5, 6], [7, 8, 9]], "int32"),
        "padding_mask": np.array([[0, 1, 1], [1, 1, 1]], "int32"),
    }
    causal_lm.generate(prompts, max_length=6)["token_ids"].shape  # (2, 6)
    ```
    """

    backbone_cls = Qwen3_5Backbone
