"""F-Net's token mixing: the real part of a 2-D Fourier transform."""

import keras
from keras import ops


def _whole_examples(x):
    """`x` sharded on its batch dimension only, under a distribution.

    Replicated when the batch axis does not divide the batch (a single
    example on a `(2, 4)` mesh).
    """
    distribution = keras.distribution.distribution()
    if distribution is None or x.shape[0] is None:
        return x
    layout = distribution.get_data_layout(x.shape)
    mesh = layout.device_mesh
    if x.shape[0] % mesh.shape[mesh.axis_names.index(layout.axes[0])]:
        layout = keras.distribution.TensorLayout([None] * len(x.shape), mesh)
    return keras.distribution.distribute_tensor(x, layout)


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class FNetFourierMixing(keras.layers.Layer):
    """Mixes tokens with the real part of a 2-D DFT; it has no weights.

    `y[m, l] = Re sum_{n, k} x[n, k] exp(-2 pi i (m n / seq + l k /
    hidden))`, over the sequence and hidden dimensions of each example.
    Every token mixes with every other, padding included: F-Net takes no
    mask, since masking in every block would zero some frequencies.

    The transform runs in float32, as no backend has a half-precision
    FFT, and the result is cast back to the input's dtype. Under a
    distribution, each example is transformed whole on its devices (the
    batch stays sharded): XLA's partitioned FFT needs each sharded axis
    to hold a multiple of its shard count per shard, and aborts the
    compilation otherwise (a 32-wide hidden axis on 8 devices).

    Call arguments:
        inputs: `(batch, seq, hidden)`.
        attention_mask: must be `None` (`TransformerEncoderBlock` passes
            it to every mixing layer).
        training: unused.

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.f_net.f_net_fourier_mixing import (
        FNetFourierMixing,
    )

    x = np.random.rand(2, 5, 8).astype("float32")
    y = FNetFourierMixing()(x)
    y.shape  # (2, 5, 8)
    # The zero frequency of each example is the sum of its values.
    np.testing.assert_allclose(y[:, 0, 0], x.sum(axis=(1, 2)), rtol=1e-5)
    ```
    """

    def call(self, inputs, attention_mask=None, training=None):
        if attention_mask is not None:
            raise ValueError(
                "FNetFourierMixing mixes every token and takes no mask; "
                "build its block without a padding mask."
            )
        x = _whole_examples(ops.cast(inputs, "float32"))
        real, _ = ops.fft2((x, ops.zeros_like(x)))
        # The output too: the backward pass transforms its gradient.
        return ops.cast(_whole_examples(real), inputs.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape
