"""A gated feed-forward (SwiGLU and friends) as a layer of its own."""

import keras
from keras import ops

from keras_nlp.distribution.layout_map import pin_input
from keras_nlp.layers.common import FEEDFORWARD_INPUT_DIMS
from keras_nlp.layers.common import FEEDFORWARD_OUTPUT_DIMS
from keras_nlp.layers.common import check_positive_ints
from keras_nlp.layers.common import check_sublayer_keys
from keras_nlp.layers.common import get_activation
from keras_nlp.layers.decoder_block import (
    DEFAULT_SUBLAYER_NAMES as DECODER_NAMES,
)
from keras_nlp.layers.dense import named_dense
from keras_nlp.layers.fused_projection import project_together

# `DecoderBlock`'s feed-forward names, so the kernels' paths read the same
# one level down: `<name>/feedforward_gate_dense/kernel`.
DEFAULT_SUBLAYER_NAMES = {
    kind: DECODER_NAMES[kind] for kind in ("intermediate", "gate", "output")
}


@keras.saving.register_keras_serializable(package="keras_nlp.layers")
class GatedFeedForward(keras.layers.Layer):
    """`output(act(gate(x)) * intermediate(x))`, its own path segment.

    The gated feed-forward of `DecoderBlock`, for checkpoints that keep it
    in a sublayer of its own: a mixture of experts' shared expert
    (`shared_expert_dense/feedforward_gate_dense/kernel`), or the dense
    blocks of a mostly-sparse model (`qwen3_moe_mlp/...`). The kernels are
    `intermediate` and `gate` `(hidden, intermediate_dim)` and `output`
    `(intermediate_dim, hidden)`, where `hidden` is the inputs' last
    dimension; like `DecoderBlock`, the activation runs in float32.

    Args:
        intermediate_dim: int. Width of the feed-forward.
        activation: str. Gate activation. Defaults to `"silu"`.
        use_bias: bool. Biases on the three projections. Defaults to
            `False`.
        kernel_initializer: initializer of the kernels.
        sublayer_names: optional dict overriding the names
            (`intermediate`, `gate`, `output`), which are the variable
            paths.
        **kwargs: forwarded to `keras.layers.Layer` (`name`, `dtype`, ...).

    Example:

    ```python
    import numpy as np
    from keras_nlp.layers import GatedFeedForward

    feedforward = GatedFeedForward(intermediate_dim=16, name="mlp")
    outputs = feedforward(np.random.rand(2, 5, 8).astype("float32"))
    outputs.shape  # (2, 5, 8)
    ```
    """

    def __init__(
        self,
        intermediate_dim,
        activation="silu",
        use_bias=False,
        kernel_initializer="glorot_uniform",
        sublayer_names=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_ints(intermediate_dim=intermediate_dim)
        check_sublayer_keys(sublayer_names, DEFAULT_SUBLAYER_NAMES)
        self.intermediate_dim = intermediate_dim
        self.activation = activation
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.sublayer_names = dict(sublayer_names or {})
        self._activation = get_activation(activation)
        self._names = {**DEFAULT_SUBLAYER_NAMES, **self.sublayer_names}
        self.intermediate_dense = self._dense(
            intermediate_dim, "intermediate", FEEDFORWARD_INPUT_DIMS
        )
        self.gate_dense = self._dense(
            intermediate_dim, "gate", FEEDFORWARD_INPUT_DIMS
        )
        # The output width is the inputs' width, known at build.
        self.output_dense = None

    def _dense(self, width, kind, dims):
        return named_dense(
            width,
            dims,
            name=self._names[kind],
            use_bias=self.use_bias,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
        )

    def build(self, input_shape):
        self.intermediate_dense.build(input_shape)
        self.gate_dense.build(input_shape)
        self.output_dense = self._dense(
            input_shape[-1], "output", FEEDFORWARD_OUTPUT_DIMS
        )
        self.output_dense.build((*input_shape[:-1], self.intermediate_dim))

    def call(self, inputs):
        # One matmul for gate and up where sharded (one all-reduce back).
        gate, intermediate = project_together(
            inputs, [self.gate_dense, self.intermediate_dense]
        )
        gate = ops.cast(
            self._activation(ops.cast(gate, "float32")), self.compute_dtype
        )
        return self.output_dense(
            pin_input(self.output_dense, intermediate * gate)
        )

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "intermediate_dim": self.intermediate_dim,
                "activation": self.activation,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "sublayer_names": self.sublayer_names,
            }
        )
        return config
