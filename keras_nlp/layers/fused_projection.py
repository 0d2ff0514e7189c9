"""Several projections of one input as one matmul when they are sharded.

Tensor parallelism splits the q/k/v (or gate/up) kernels' output widths
over the model axis. Backward, each projection's input gradient is then a
partial sum on every device, and XLA all-reduces each one separately: three
all-reduces of the block's activations for q, k and v, two for gate and up,
where Megatron-LM needs one (its q/k/v and gate/up kernels are fused). XLA
does not add the partial sums before reducing them.

`project_together` gets Megatron's one all-reduce from separate weights (the
checkpoints' layout stays): each kernel is viewed as `(input, shards,
width / shards)` along its sharded output dimension, the views are
concatenated on their last axis (a local concatenation: every device
concatenates its own shards), and one einsum computes every projection. The
outputs are cut back out and reshaped, and each layer's bias, activation
and output layout apply as in its own call.

It fuses only what it can fuse exactly: plain (unquantized) `Dense` or
`EinsumDense` layers whose kernel's first dimension is the input's last,
whose equation contracts the input's last dimension and keeps the
kernel's other dimensions in order at the end of the output (heads-first
kernels such as Gemma's `(heads, hidden, head_dim)` query are transposed),
all sharded the same way on their first output dimension and nowhere else
but their input dimension under the active distribution. Anything else (one
device, TensorFlow, quantized kernels, differently sharded kernels) calls
the layers one by one, as before.
"""

import contextlib
import contextvars

import keras
from keras import ops

from keras_nlp.distribution.layout_map import _TensorLayout
from keras_nlp.distribution.layout_map import pin_input


def _placement(layer):
    """Where a layer's kernel puts its contracted and output dimensions.

    Returns:
        `(order, input_entry, output_entry, shards)`: the permutation that
        brings the kernel's contracted (input) dimension first, the layout
        entries of that dimension and of the first output dimension, and
        the number of shards of the latter; `None` when the layer cannot
        join a fused matmul.
    """
    if getattr(layer, "quantization_mode", None) is not None:
        return None
    if isinstance(layer, keras.layers.EinsumDense):
        inputs, rest = layer.equation.split(",")
        kernel, outputs = rest.split("->")
        contracted = inputs[-1]
        kept = kernel.replace(contracted, "")
        # `...d,<kernel>->...<kept>`: one contracted letter, the input's
        # last; the kernel's other letters end the output, in order.
        if (
            kernel.count(contracted) != 1
            or contracted in outputs
            or not outputs.endswith(kept)
            or inputs[:-1] != outputs[: len(outputs) - len(kept)]
        ):
            return None
        position = kernel.index(contracted)
    elif isinstance(layer, keras.layers.Dense):
        position = 0
    else:
        return None
    distribution = keras.distribution.distribution()
    if distribution is None:
        return None
    layout = distribution.get_variable_layout(layer._kernel)
    axes = getattr(layout, "axes", None)
    if not axes or len(axes) < 2:
        return None
    order = (position, *(d for d in range(len(axes)) if d != position))
    input_entry, output_entry, *others = (axes[d] for d in order)
    if output_entry is None or any(others):
        return None
    names = output_entry if isinstance(output_entry, tuple) else (output_entry,)
    sizes = dict(
        zip(
            distribution.device_mesh.axis_names,
            distribution.device_mesh.shape,
            strict=True,
        )
    )
    shards = 1
    for name in names:
        shards *= sizes[name]
    if shards == 1:
        return None
    return order, input_entry, output_entry, shards


def _finish(layer, output):
    """A layer's bias, activation and output layout, as its call applies."""
    if layer.bias is not None:
        output = ops.add(output, ops.cast(layer.bias, output.dtype))
    if layer.activation is not None:
        output = layer.activation(output)
    distribution = keras.distribution.distribution()
    layout = distribution.get_tensor_layout(f"{layer.path}/output")
    if layout is not None:
        output = keras.distribution.distribute_tensor(output, layout)
    return output


_SEPARATE = contextvars.ContextVar("keras_nlp_separate", default=False)


@contextlib.contextmanager
def separate_projections():
    """Within it, `project_together` calls its layers one by one.

    For measuring what fusing saves (`benchmarks/collectives.py` compares
    both in one run); the outputs are the same either way.
    """
    token = _SEPARATE.set(True)
    try:
        yield
    finally:
        _SEPARATE.reset(token)


def project_together(inputs, layers):
    """Each of `layers` applied to `inputs`, in one matmul where sharded.

    Args:
        inputs: the common input, `(..., input width)`.
        layers: built `Dense` / `EinsumDense` layers of that input.

    Returns:
        A list of their outputs, equal to `[layer(inputs) for layer in
        layers]` (to float rounding).

    Example:

    ```python
    import numpy as np
    import keras
    from keras_nlp.layers.fused_projection import project_together

    gate = keras.layers.Dense(8)
    up = keras.layers.Dense(8)
    x = np.ones((2, 3, 4), "float32")
    gate.build(x.shape)
    up.build(x.shape)
    # Without a sharded distribution the layers run one by one.
    [out.shape for out in project_together(x, [gate, up])]
    # [(2, 3, 8), (2, 3, 8)]
    ```
    """
    # Under sequence parallelism, the input is gathered over the sequence.
    inputs = pin_input(layers[0], inputs)
    if len(layers) < 2 or keras.backend.backend() != "jax" or _SEPARATE.get():
        return [layer(inputs) for layer in layers]
    placements = [_placement(layer) for layer in layers]
    if any(p is None for p in placements) or (
        len({p[1:] for p in placements}) != 1
    ):
        return [layer(inputs) for layer in layers]
    _, input_entry, output_entry, shards = placements[0]
    # Every kernel as `(input, outputs...)`.
    kernels = [
        ops.transpose(layer.kernel, order)
        if order != tuple(range(len(order)))
        else layer.kernel
        for layer, (order, *_) in zip(layers, placements, strict=True)
    ]
    input_width = kernels[0].shape[0]
    if any(k.shape[0] != input_width or k.shape[1] % shards for k in kernels):
        return [layer(inputs) for layer in layers]
    dtype = inputs.dtype
    views = [
        ops.reshape(ops.cast(k, dtype), (input_width, shards, -1))
        for k in kernels
    ]
    widths = [view.shape[-1] for view in views]
    fused = ops.concatenate(views, axis=-1)
    distribution = keras.distribution.distribution()
    fused = keras.distribution.distribute_tensor(
        fused,
        _TensorLayout(
            (input_entry, output_entry, None), distribution.device_mesh
        ),
    )
    projected = ops.einsum("...d,dsw->...sw", inputs, fused)
    outputs = []
    start = 0
    for layer, kernel, width in zip(layers, kernels, widths, strict=True):
        piece = projected[..., start : start + width]
        start += width
        piece = ops.reshape(piece, (*inputs.shape[:-1], *kernel.shape[1:]))
        outputs.append(_finish(layer, piece))
    return outputs
