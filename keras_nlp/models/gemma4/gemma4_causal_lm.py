"""Gemma 4's causal LM: one cache per block that keeps its own keys."""

import keras
from keras import ops

from keras_nlp.distribution.activations import batch_size_scope
from keras_nlp.distribution.activations import unpinned_outputs
from keras_nlp.distribution.array_placement import planned_cache_specs
from keras_nlp.distribution.layout_map import active_layout_map
from keras_nlp.distribution.layout_map import constrain
from keras_nlp.models.causal_lm import RESIDUAL_STREAM
from keras_nlp.models.causal_lm import PreprocessorFirstCausalLM
from keras_nlp.models.gemma4.gemma4_backbone import Gemma4Backbone


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class Gemma4CausalLM(PreprocessorFirstCausalLM):
    """A `Gemma4Backbone` with its tied token embedding as the head.

    The logits are the final hidden states against the token table, soft
    capped by `final_logit_soft_cap`. Everything else (`fit`, `generate`,
    presets, sharding) is `keras_nlp.models.CausalLM`'s, with one
    difference in the caches: a block that shares an earlier block's keys
    and values (`num_kv_shared_layers`) has no cache; it reads its source
    block's, as that block updates it in the same step. `init_cache` and
    `cache_shapes` list the caches of the other blocks only, in block
    order (keras-hub allocates one per block, all of the widest head).

    Args:
        preprocessor: optional `TextPreprocessor` or `Tokenizer`, or the
            backbone (keras-hub's order is `(preprocessor, backbone)`).
        backbone: a `Gemma4Backbone`, unless given first.
        final_logit_cap: float or `None`. A further soft cap on the logits
            (keras-hub's argument). Defaults to `None`.
        tokenizer: optional `Tokenizer` (keyword only).
        **kwargs: forwarded to `CausalLM`.

    Example:

    ```python
    import numpy as np
    import keras_nlp

    backbone = keras_nlp.models.Gemma4Backbone(
        vocabulary_size=64, image_size=None, num_layers=4,
        num_query_heads=4, num_key_value_heads=2, hidden_dim=16,
        intermediate_dim=32, head_dim=8, sliding_window_pattern=2,
        num_kv_shared_layers=2,
    )
    causal_lm = keras_nlp.models.Gemma4CausalLM(backbone)
    len(causal_lm.cache_shapes(2, 8))  # 2: blocks 2 and 3 share 0 and 1
    prompts = {
        "token_ids": np.array([[0, 5, 6], [7, 8, 9]], "int32"),
        "padding_mask": np.array([[0, 1, 1], [1, 1, 1]], "int32"),
    }
    causal_lm.generate(prompts, max_length=6)["token_ids"].shape  # (2, 6)
    ```
    """

    backbone_cls = Gemma4Backbone

    def __init__(
        self,
        preprocessor=None,
        backbone=None,
        final_logit_cap=None,
        *,
        tokenizer=None,
        compile=True,
        **kwargs,
    ):
        super().__init__(
            preprocessor,
            backbone,
            tokenizer=tokenizer,
            compile=compile,
            **kwargs,
        )
        self.final_logit_cap = final_logit_cap

    def head_config(self):
        return {"final_logit_cap": self.final_logit_cap}

    def logits(self, hidden_states):
        """The tied head's logits (capped by the backbone's
        `final_logit_soft_cap`), then by `final_logit_cap` if set, as
        keras-hub's task caps them."""
        logits = super().logits(hidden_states)
        cap = self.final_logit_cap
        if cap is None:
            return logits
        cap = ops.cast(cap, logits.dtype)
        return ops.tanh(logits / cap) * cap

    def get_quantization_layer_structure(self, mode):
        """`None`: Keras's GPTQ and AWQ run the blocks one by one on the
        hidden states alone, and Gemma 4's blocks also read their per-layer
        inputs and earlier blocks' keys and values."""
        del mode
        return None

    def _intercepted_forward(self, token_ids, padding_mask, intercept):
        stack = self.backbone.decoder_stack
        sources = self.backbone.key_value_sources
        x, per_layer = self.backbone.embed_with_per_layer_inputs(token_ids)
        x = intercept(x, -1)
        keys_values = {}
        for index, block in enumerate(stack.blocks):
            x, key, value = block(
                x,
                padding_mask=padding_mask,
                per_layer_input=per_layer[index],
                shared_key_value=keys_values.get(sources.get(index)),
                return_key_value=True,
            )
            keys_values[index] = (key, value)
            x = intercept(x, index)
        return stack.final_norm(x)

    def _cache_owners(self):
        """The indices of the blocks with a cache of their own."""
        return [
            number
            for number, block in enumerate(self.backbone.decoder_stack.blocks)
            if not block.attention.shares_key_value
        ]

    def _cache_plans(self):
        plan = getattr(self.backbone, "layout_plan", None)
        if plan is None or active_layout_map() is None:
            return None
        if len(plan.kv_caches) != len(self._cache_owners()):
            return None
        return plan.kv_caches

    def cache_shapes(self, batch_size, max_length):
        """The shape of each cache (blocks that share none), block order."""
        blocks = self.backbone.decoder_stack.blocks
        return [
            blocks[number].attention.cache_shape(batch_size, max_length)
            for number in self._cache_owners()
        ]

    def _decode(self, token_ids, caches, index, padding_mask, positions):
        with batch_size_scope(token_ids.shape[0]):
            x, per_layer = self.backbone.embed_with_per_layer_inputs(token_ids)
        return self._run_blocks(
            x,
            caches,
            index,
            lambda number: {
                "padding_mask": padding_mask,
                "positions": positions,
                "per_layer_input": per_layer[number],
            },
        )

    def _run_blocks(self, x, caches, index, block_arguments):
        stack = self.backbone.decoder_stack
        sources = self.backbone.key_value_sources
        batch_size = x.shape[0]
        specs = planned_cache_specs(
            self._cache_plans(), batch_size, caches[0].shape[2]
        )
        slots = {
            number: slot for slot, number in enumerate(self._cache_owners())
        }
        blocks = [f"{block.path}/output" for block in stack.blocks]
        with batch_size_scope(batch_size), unpinned_outputs(blocks):
            updated = list(caches)
            keys_values = {}
            for number, block in enumerate(stack.blocks):
                arguments = dict(
                    block_arguments(number),
                    cache_update_index=index,
                    return_key_value=True,
                )
                if number in sources:
                    x, key, value = block(
                        x,
                        shared_key_value=keys_values[sources[number]],
                        **arguments,
                    )
                else:
                    slot = slots[number]
                    x, key, value, cache = block(
                        x, cache=updated[slot], **arguments
                    )
                    if specs:
                        cache = constrain(cache, specs[slot])
                    updated[slot] = cache
                keys_values[number] = (key, value)
                x = constrain(x, RESIDUAL_STREAM)
            return stack.final_norm(x), updated
