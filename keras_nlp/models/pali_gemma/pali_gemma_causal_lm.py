"""PaliGemma's causal LM: text generated from images and a prompt."""

import keras
import numpy as np
from keras import ops

from keras_nlp.distribution.activations import batch_size_scope
from keras_nlp.models.causal_lm import PreprocessorFirstCausalLM
from keras_nlp.models.pali_gemma.pali_gemma_backbone import PaliGemmaBackbone


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class PaliGemmaCausalLM(PreprocessorFirstCausalLM):
    """A `PaliGemmaBackbone` and its head: text from images and a prompt.

    Calling the model on `{"images", "token_ids", "padding_mask"}` (and
    optionally `"response_mask"`, else the whole text is prompt) returns
    the logits of the text positions, `(batch, text_len, vocab)`.

    `generate` takes a dict of `images` `(batch, image_size, image_size,
    3)` (one image `(image_size, image_size, 3)` for one prompt),
    `token_ids` and optionally `padding_mask`: each row's image tokens,
    then its prompt, are run at once (the prefix: image tokens and prompt
    attend to each other both ways, within the local blocks' window), then
    the response is decoded token by token, each new token attending to
    everything before it. Positions count from 0 at the first image token
    and continue over the prompt's real tokens, so a left-padded row (the
    padding sits between its image tokens and its prompt, and is never
    attended) generates what it generates alone. The key/value caches hold
    the `image_sequence_length` image tokens before the text:
    `init_cache(batch, length)` makes caches of `image_sequence_length +
    length` slots, and `call_with_cache` continues such caches, its index
    counting text slots. Everything else (samplers, stop tokens, sharded
    generation with planned cache layouts) is `keras_nlp.models.CausalLM`'s.

    `fit` on `{"images", "token_ids", "padding_mask", "response_mask"}`
    without targets learns each response token from the position before it.

    Args:
        preprocessor: optional `TextPreprocessor` or `Tokenizer`, first
            as in keras-hub (or the backbone, given alone).
        backbone: a `PaliGemmaBackbone`.
        tokenizer: optional `keras_nlp.tokenizers.Tokenizer` (keyword
            only).
        **kwargs: forwarded to `keras.Model`.

    Example:

    ```python
    import numpy as np
    import keras_nlp

    backbone = keras_nlp.models.PaliGemmaBackbone(
        vocabulary_size=64, image_size=16, num_layers=1, num_query_heads=2,
        num_key_value_heads=1, hidden_dim=16, intermediate_dim=32,
        head_dim=8, vit_patch_size=8, vit_num_heads=2, vit_hidden_dim=8,
        vit_num_layers=1, vit_intermediate_dim=16,
    )
    causal_lm = keras_nlp.models.PaliGemmaCausalLM(backbone)
    inputs = {
        "images": np.random.uniform(size=(2, 16, 16, 3)),
        "token_ids": np.array([[2, 5, 6], [2, 7, 0]], "int32"),
        "padding_mask": np.array([[1, 1, 1], [1, 1, 0]], "int32"),
    }
    causal_lm.generate(inputs, max_new_tokens=3)["token_ids"].shape  # (2, 6)
    ```
    """

    backbone_cls = PaliGemmaBackbone

    # === Forward pass ===

    def call(self, inputs, training=None):
        if not isinstance(inputs, dict) or "images" not in inputs:
            raise ValueError(
                "PaliGemmaCausalLM takes a dict with `images`, `token_ids` "
                "and `padding_mask` (and optionally `response_mask`). "
                f"Received: {_describe(inputs)}."
            )
        inputs = dict(inputs)
        if "response_mask" not in inputs:
            inputs["response_mask"] = ops.zeros_like(inputs["token_ids"])
        hidden = self.backbone(inputs, training=training)
        return self.logits(hidden[:, self.backbone.image_sequence_length :])

    def _next_token_targets(self, x, y, y_pred, sample_weight):
        """Targets from the inputs: each response token, from the position
        before it (the prompt attends both ways, so it is no target)."""
        if y is None and isinstance(x, dict) and "token_ids" in x:
            if "response_mask" not in x:
                raise ValueError(
                    "Training PaliGemmaCausalLM without targets needs a "
                    "`response_mask` (1 on the tokens to learn): the prompt "
                    "attends to itself both ways, so its tokens cannot be "
                    f"targets. Received keys: {sorted(x)}."
                )
            response = ops.cast(x["response_mask"], "float32")
            if "padding_mask" in x:
                response = response * ops.cast(x["padding_mask"], "float32")
            weight = response[:, 1:]
            if sample_weight is not None:
                weight = weight * ops.cast(sample_weight, "float32")[:, None]
            # The mean over the response tokens, as `CausalLM`'s.
            weight = weight / ops.maximum(ops.mean(weight), 1e-9)
            return x["token_ids"][:, 1:], y_pred[:, :-1], weight
        return super()._next_token_targets(x, y, y_pred, sample_weight)

    # === Key/value caches ===

    def cache_shapes(self, batch_size, max_length):
        """Each block's cache shape: the image tokens, then `max_length`
        text slots."""
        return super().cache_shapes(
            batch_size, self.backbone.image_sequence_length + max_length
        )

    # === Generation ===

    def _generation_inputs(self, inputs, batch_size):
        size = self.backbone.image_size
        expected = (batch_size, size, size, 3)
        images = inputs.get("images") if isinstance(inputs, dict) else None
        if images is None:
            raise ValueError(
                "PaliGemmaCausalLM generates from images and prompts: pass a "
                f"dict with `images` {expected}, `token_ids` and optionally "
                f"`padding_mask`. Received: {_describe(inputs)}."
            )
        images = np.asarray(images, "float32")
        if images.ndim == 3 and batch_size == 1:
            images = images[None]
        if images.shape != expected:
            raise ValueError(
                f"`images` must have shape {expected}: one image of "
                f"{size}x{size} RGB per prompt. Received: {images.shape}."
            )
        return {"images": images}

    def _prefill(self, token_ids, caches, padding_mask, positions, inputs):
        """Runs image tokens then prompts into the caches, as one prefix."""
        count = self.backbone.image_sequence_length
        batch_size, prompt_length = token_ids.shape
        with batch_size_scope(batch_size):
            text = self.backbone.decoder_stack.embed(token_ids)
            images = self.backbone.vit_encoder(inputs["images"])
        x = ops.concatenate([ops.cast(images, text.dtype), text], axis=1)
        image_positions = ops.broadcast_to(
            ops.arange(count, dtype="int32")[None], (batch_size, count)
        )
        positions = ops.concatenate(
            [image_positions, count + ops.cast(positions, "int32")], axis=1
        )
        return self._run_after_images(
            x, caches, 0, positions, padding_mask, count + prompt_length
        )

    def _decode(self, token_ids, caches, index, padding_mask, positions):
        """Runs text tokens at text slot `index` on, after the image
        tokens the caches hold."""
        count = self.backbone.image_sequence_length
        batch_size, length = token_ids.shape
        if positions is None:
            positions = ops.broadcast_to(
                ops.arange(length, dtype="int32")[None] + index,
                (batch_size, length),
            )
        with batch_size_scope(batch_size):
            x = self.backbone.decoder_stack.embed(token_ids)
        return self._run_after_images(
            x,
            caches,
            count + index,
            count + ops.cast(positions, "int32"),
            padding_mask,
            0,
        )

    def _run_after_images(
        self, x, caches, index, positions, padding_mask, prefix_end
    ):
        """Runs hidden states at cache slot `index` on, with the prefix-LM
        mask over the caches `[image tokens, text]`.

        A query sees the valid keys (image tokens, and text slots that
        `padding_mask` marks) at or before its slot, and every valid key
        before `prefix_end` (the prefix attends both ways); in the local
        blocks, only keys whose positions are within the window. Text keys'
        positions count their real tokens, after the image tokens'.
        """
        backbone = self.backbone
        count = backbone.image_sequence_length
        batch_size, length = x.shape[0], x.shape[1]
        cache_length = caches[0].shape[2]
        if padding_mask is None:
            padding_mask = ops.ones((batch_size, cache_length - count), "int32")
        text_valid = ops.cast(padding_mask, "int32")
        image_slots = ops.arange(count, dtype="int32")
        valid = ops.concatenate(
            [ops.ones((batch_size, count), "bool"), text_valid > 0], axis=1
        )
        key_positions = ops.concatenate(
            [
                ops.broadcast_to(image_slots[None], (batch_size, count)),
                count + ops.cumsum(text_valid, axis=1) - 1,
            ],
            axis=1,
        )
        query_slots = ops.arange(length, dtype="int32") + ops.cast(
            index, "int32"
        )
        seen_until = ops.maximum(query_slots, prefix_end - 1)
        key_slots = ops.arange(cache_length, dtype="int32")
        mask = ops.logical_and(
            valid[:, None, :],
            (key_slots[None, :] <= seen_until[:, None])[None],
        )
        distance = ops.abs(positions[:, :, None] - key_positions[:, None, :])

        def window(number):
            return PaliGemmaBackbone._window(
                number,
                use_sliding_window_attention=(
                    backbone.use_sliding_window_attention
                ),
                sliding_window_size=backbone.sliding_window_size,
            )

        masks = {}
        for number in range(len(backbone.decoder_stack.blocks)):
            size = window(number)
            if size not in masks:
                masks[size] = (
                    mask
                    if size is None
                    else ops.logical_and(mask, distance < size)
                )

        def block_arguments(number):
            return {
                "attention_mask": masks[window(number)],
                "positions": positions,
            }

        return self._run_blocks(x, caches, index, block_arguments)


def _describe(inputs):
    if isinstance(inputs, dict):
        return f"a dict with keys {sorted(inputs)}"
    return type(inputs).__name__
