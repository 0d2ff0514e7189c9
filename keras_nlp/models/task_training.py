"""Training of the tasks that predict tokens: `CausalLM` and `Seq2SeqLM`.

Both learn each next token of their inputs (a causal LM its token ids, a
seq2seq LM its decoder's, teacher forced) and generate with a sampler, so
their loss targets and `compile()` defaults are one: AdamW with weight
decay on kernels and embeddings only, cross-entropy from logits, accuracy
weighted by the padding, and the sampler `generate` uses.
"""

import keras
from keras import ops

from keras_nlp.models.sampling import get_sampler


class NextTokenTraining:
    """Targets and `compile` of a token-predicting task (a mixin of
    `keras.Model`).

    `fit` takes the model's input dicts without targets: each position of
    `target_inputs[0]` learns the next token, where both are real
    (`target_inputs[1]`, the padding mask). The class expects
    `_reset_generate_functions()`, which drops its compiled generation
    loops (they bake in the sampler).
    """

    # Names of the variables AdamW does not decay (biases and norms).
    no_weight_decay = ("bias", "scale", "gamma", "beta")
    # The inputs holding the tokens to learn and their padding mask.
    target_inputs = ("token_ids", "padding_mask")

    def _next_token_targets(self, x, y, y_pred, sample_weight):
        """`(y, y_pred, sample_weight)` with the targets read from `x`
        when `y` is not given: each position predicts the next token."""
        ids_name, mask_name = self.target_inputs
        if y is not None or not isinstance(x, dict) or ids_name not in x:
            return y, y_pred, sample_weight
        token_ids = x[ids_name]
        weight = ops.ones_like(token_ids[:, 1:], "float32")
        if mask_name in x:
            mask = ops.cast(x[mask_name], "float32")
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
                var_names=list(self.no_weight_decay)
            )
        if loss == "auto":
            loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        if weighted_metrics == "auto":
            weighted_metrics = [
                keras.metrics.SparseCategoricalAccuracy(name="accuracy")
            ]
        self.sampler = get_sampler(sampler)
        # Compiled loops bake in the sampler: the next `generate` makes one.
        self._reset_generate_functions()
        super().compile(
            optimizer=optimizer,
            loss=loss,
            weighted_metrics=weighted_metrics,
            **kwargs,
        )

    def compile_from_config(self, config):
        # Keras skips a custom `compile` on load; this one takes Keras's
        # own compile config, and the optimizer is built so that its saved
        # variables load.
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)
