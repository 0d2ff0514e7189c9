"""Layouts of the activations that decide a step's collectives.

Weights' layouts alone leave XLA free to lay activations out as it likes,
and it sometimes picks a costly way: GPT-2's position table sharded on its
rows makes the residual stream sequence-sharded (an all-gather before
every projection), and hidden dimensions of FSDP-sharded weights make it
shard the residual stream's hidden dimension on the data axis (all-to-alls
in the norms' backward). Pinning the few activations that matter to the
Megatron pattern leaves one all-reduce per attention and per MLP:

- the residual stream (the outputs of the backbone's embeddings, blocks and
  final norm, `(batch, sequence, hidden)`) is replicated on every weight
  axis: the `hidden` and `sequence` dimensions are whole on each device;
- a projection whose kernel's output dimensions are on the model axis
  (q/k/v, gate/up: "column-parallel") keeps those dimensions on it;
- a projection whose kernel contracts over the model axis (the attention
  output and the MLP's down projection: "row-parallel") gives a whole
  output, so the partial sums are all-reduced right there.

With sequence parallelism (Megatron-SP, `sequence_parallel` in the plan
request), the residual stream is split over the sequence on the model axis
between the projections instead: the row-parallel outputs keep only their
own tokens (the all-reduce becomes a reduce-scatter), the column-parallel
projections gather their input over the sequence (an all-gather), and the
norms, residual adds and dropout between them run on one device's tokens,
their activations held once across the model axis rather than on every
device. The input of each row-parallel projection is pinned too (whole
sequence, its heads or width on the model axis), so that backward XLA
gathers the output gradient rather than the kernel.

With a context axis (context parallelism), every pinned activation's
sequence is split over it as well (before the model axis), and each
attention's keys and values are pinned whole over it (`<attention
path>/keys`): every device's queries attend to every position, an
all-gather of the keys and values, so masks of any kind stay exact.

The batch dimension goes on the batch axes (data, and fsdp if any) when
they divide the batch of the call being traced (`Backbone.call` tells the
map), else it is left to XLA (`PartitionSpec.UNCONSTRAINED`): a layout
never needs a batch size that the batch axes divide. The sequence goes on
the context and model axes only as far as they divide the traced sequence
length, else it stays whole (a decoding step's one token). These layouts
are
Keras `LayoutMap` entries
for layer outputs (`<layer path>/output`), which Keras applies as sharding
constraints while tracing. Everything here is decided from the abstract
build and the weight plan; nothing is allocated.
"""

import contextlib
import contextvars
import dataclasses

from keras_nlp.distribution.rules import entry_axes

# The batch dimension of an activation: on the batch axes when the batch
# being traced is divisible by them, else left to XLA.
FREE = "*"

_CALL_SHAPE = contextvars.ContextVar(
    "keras_nlp_call_shape", default=(None, None)
)


@contextlib.contextmanager
def batch_size_scope(batch_size, sequence_length=None):
    """Tells the layout map the batch (and sequence) of the call in progress.

    `Backbone.call` enters it, so activation layouts put the batch on the
    batch axes only when they divide it (a batch of one in generation is
    left to XLA rather than failing), and the sequence on the model axis
    (sequence parallelism) only when it divides `sequence_length`. Left
    `None`, as in cached decoding, the sequence stays whole.
    """
    token = _CALL_SHAPE.set((batch_size, sequence_length))
    try:
        yield
    finally:
        _CALL_SHAPE.reset(token)


def current_batch_size():
    """The batch size set by the innermost `batch_size_scope`, or `None`."""
    return _CALL_SHAPE.get()[0]


def current_sequence_length():
    """The sequence length set by the innermost `batch_size_scope`, or
    `None`."""
    return _CALL_SHAPE.get()[1]


# Queries per chunk of attention on long sequences (see
# `keras_nlp.layers.grouped_query_attention`): one chunk's scores at a
# time instead of the whole quadratic matrix.
QUERY_CHUNK = 1024
_QUERY_CHUNK = contextvars.ContextVar("keras_nlp_query_chunk", default=None)


@contextlib.contextmanager
def query_chunk_scope(size):
    """Attends in chunks of `size` queries (`None`: never chunk) inside.

    The default chunks sequences longer than `QUERY_CHUNK` (a multiple of
    it) on JAX; tests and benchmarks set other sizes, or `None` for the
    materialized scores.

    Example:

    ```python
    import numpy as np
    from keras_nlp.distribution.activations import query_chunk_scope
    from keras_nlp.layers import grouped_query_attention

    query = np.random.rand(1, 8, 4, 16).astype("float32")
    key = value = np.random.rand(1, 8, 2, 16).astype("float32")
    with query_chunk_scope(2):
        chunked = grouped_query_attention(query, key, value)
    whole = grouped_query_attention(query, key, value)
    bool(np.allclose(chunked, whole, atol=1e-6))  # True
    ```
    """
    token = _QUERY_CHUNK.set(size if size is not None else 0)
    try:
        yield
    finally:
        _QUERY_CHUNK.reset(token)


def query_chunk(query_len):
    """The query chunk attention uses for `query_len` queries, or `None`
    (the whole sequence at once): JAX only, a length longer than the chunk
    and a multiple of it."""
    import keras

    size = _QUERY_CHUNK.get()
    size = QUERY_CHUNK if size is None else size
    if (
        not size
        or keras.config.backend() != "jax"
        or not isinstance(query_len, int)
        or query_len <= size
        or query_len % size
    ):
        return None
    return size


_UNPINNED = contextvars.ContextVar("keras_nlp_unpinned", default=frozenset())


@contextlib.contextmanager
def unpinned_outputs(keys):
    """Leaves the outputs at `keys` (`<layer path>/output`) unpinned.

    Cached decoding calls the decoder blocks itself, and a block given a
    cache returns `(outputs, cache)`, which one layout cannot describe: the
    caller pins the two itself (`keras_nlp.models.CausalLM`).
    """
    token = _UNPINNED.set(frozenset(keys))
    try:
        yield
    finally:
        _UNPINNED.reset(token)


def current_unpinned():
    """The output keys that the innermost `unpinned_outputs` left free."""
    return _UNPINNED.get()


@dataclasses.dataclass(frozen=True)
class LayerOutput:
    """What the plan needs to know about one layer's output.

    Attributes:
        path: the layer's path (`decoder_block_0/attention/query`).
        shape: the output's symbolic shape, when the backbone's functional
            graph knows it (its top-level layers), else `None`.
        kernel: the path of the layer's kernel, for `Dense`/`EinsumDense`.
        output_letters: for an `EinsumDense`, its output's letters;
            a `Dense`'s are its input's leading letters then `"o"`.
        kernel_letters: the kernel's letters (`"dnh"`), or `"io"` for a
            `Dense`.
        input_letters: the input's letters (`"btnh"`); a `Dense`'s are its
            output's leading letters then `"i"`.
    """

    path: str
    shape: tuple = None
    kernel: str = None
    output_letters: str = None
    kernel_letters: str = None
    input_letters: str = None


@dataclasses.dataclass(frozen=True)
class ActivationPlan:
    """The layout of one layer output.

    Attributes:
        path: the key Keras asks for, `<layer path>/output`, or
            `<layer path>/input` for the input of a row-parallel projection
            that our layers pin themselves (see `pin_input`).
        spec: per dimension `FREE` (the batch, left to XLA), `None`
            (whole), or mesh axes.
        reason: why, in words.
        sequence_axes: mesh axes that split the sequence (dimension 1)
            when they divide the length being traced (sequence
            parallelism); `()` keeps it as `spec` says.
    """

    path: str
    spec: tuple
    reason: str
    sequence_axes: tuple = ()

    def to_dict(self):
        """The JSON form (`LayoutPlan.to_dict`)."""
        from keras_nlp.distribution.layout_plan import spec_to_json

        found = {
            "path": self.path,
            "spec": spec_to_json(self.spec),
            "reason": self.reason,
        }
        if self.sequence_axes:
            found["sequence_axes"] = list(self.sequence_axes)
        return found


def _without(entry, axes):
    """A spec entry with `axes` removed."""
    if entry is None:
        return None
    kept = tuple(
        a
        for a in (entry if isinstance(entry, tuple) else (entry,))
        if a not in axes
    )
    if not kept:
        return None
    return kept[0] if len(kept) == 1 else kept


def describe_layers(model):
    """The `LayerOutput`s of a (possibly abstract) built backbone."""
    import keras

    found = []
    top_level = set()
    for layer in getattr(model, "layers", ()):
        nodes = getattr(layer, "_inbound_nodes", ())
        # A nested model (a vision encoder) may take an automatic name that
        # differs between the plan's build and the real one: its output is
        # not pinned (its own layers' projections still are).
        if (
            layer.path is None
            or len(nodes) != 1
            or isinstance(layer, keras.Model)
        ):
            continue
        outputs = nodes[0].outputs
        if len(outputs) != 1:
            continue
        top_level.add(id(layer))
        shape = tuple(outputs[0].shape)
        if "float" not in str(outputs[0].dtype):
            continue
        found.append(LayerOutput(path=layer.path, shape=shape))
    for layer in model._flatten_layers(include_self=False):
        if id(layer) in top_level or layer.path is None:
            continue
        if getattr(layer, "quantization_mode", None) is not None:
            continue
        kernel = getattr(layer, "_kernel", None)
        if kernel is None:
            continue
        if isinstance(layer, keras.layers.EinsumDense):
            input_letters, rest = layer.equation.split(",")
            kernel_letters, output_letters = rest.split("->")
        elif isinstance(layer, keras.layers.Dense):
            # Dense maps the last axis; its output has the input's rank.
            shapes = list(getattr(layer, "_build_shapes_dict", {}).values())
            if len(shapes) != 1 or not shapes[0] or len(shapes[0]) < 2:
                continue
            kernel_letters = "io"
            leading = "bcefgh"[: len(shapes[0]) - 1]
            output_letters = leading + "o"
            input_letters = leading + "i"
        else:
            continue
        found.append(
            LayerOutput(
                path=layer.path,
                kernel=kernel.path,
                output_letters=output_letters,
                kernel_letters=kernel_letters,
                input_letters=input_letters,
            )
        )
    return tuple(found)


def plan_activations(
    layers,
    weights,
    *,
    hidden_dim,
    model_axes,
    batch_axes,
    sequence_parallel=False,
    context_axes=(),
):
    """Layouts of the residual stream and of the sharded projections.

    Args:
        layers: `LayerOutput`s from `describe_layers` (other entries, such
            as key/value caches, are skipped).
        weights: the `WeightPlan`s of the same backbone.
        hidden_dim: the residual stream's width, or `None` if unknown (then
            only projections are pinned).
        model_axes: the mesh axes that split projections tensor-parallel
            (the model axis); only they make a projection column- or
            row-parallel. Other weight axes (FSDP, experts) shard weights,
            never these activations.
        batch_axes: the mesh axes that split the batch; they never shard an
            activation's other dimensions.
        sequence_parallel: bool. Split the residual stream and the
            row-parallel outputs over the sequence on `model_axes`, and pin
            the projections' inputs (see the module's docstring).
        context_axes: mesh axes that split the sequence of every pinned
            activation (context parallelism), before the model axes of
            sequence parallelism.

    Returns:
        A tuple of `ActivationPlan`.
    """
    specs = {weight.path: weight.spec for weight in weights}
    context_axes = tuple(a for a in context_axes if a)
    split_model = ()
    if sequence_parallel:
        split_model = tuple(a for a in model_axes if a)
    # The residual stream's and row-parallel outputs' sequence axes, and
    # every other pinned activation's.
    between = context_axes + split_model
    within = context_axes
    model_axes = set(a for a in model_axes if a)
    context_note = ""
    if context_axes:
        context_note = (
            "; sequence on "
            + ", ".join(f"'{a}'" for a in context_axes)
            + " (context parallel)"
        )
    named_axes = ", ".join(f"'{a}'" for a in split_model)
    planned = []
    for layer in layers:
        if not isinstance(layer, LayerOutput):
            continue
        key = f"{layer.path}/output"
        if layer.kernel is None:
            shape = layer.shape
            if hidden_dim and len(shape) == 3 and shape[-1] == hidden_dim:
                reason = (
                    "residual stream: batch on the batch axes, sequence "
                    "and hidden whole on every device"
                )
                if split_model:
                    reason = (
                        "residual stream: batch on the batch axes, sequence "
                        f"on {named_axes} (sequence parallel), hidden whole"
                    )
                planned.append(
                    ActivationPlan(
                        key,
                        (FREE, None, None),
                        reason + context_note,
                        between,
                    )
                )
            continue
        kernel_spec = specs.get(layer.kernel)
        if kernel_spec is None:
            continue
        by_letter = {
            letter: _without(entry, batch_axes)
            for letter, entry in zip(
                layer.kernel_letters, kernel_spec, strict=True
            )
        }
        output = layer.output_letters
        if "." in output:
            continue
        spec = _letters_spec(output, by_letter, model_axes)
        # The sequence is the second dimension of an activation of rank 3
        # or more that the kernel does not produce (`btnh`, `btd`).
        tokens = len(output) >= 3 and output[1] not in by_letter
        contracted = [
            entry
            for letter, entry in by_letter.items()
            if letter not in output
            and entry
            and set(entry_axes(entry)) & model_axes
        ]
        sharded_out = [e for e in spec if e not in (None, FREE)]
        letters = layer.input_letters or ""
        # Sequence parallelism splits what lies between the projections:
        # row-parallel outputs of the residual stream's rank (`btd`); a
        # key or value projection that contracts over the model axis (its
        # heads fell back) stays all-reduced.
        residual_rank = tokens and len(output) == 3
        pin_input = (
            bool(split_model)
            and "." not in letters
            and len(letters) >= 3
            and tokens
        )
        if sharded_out:
            planned.append(
                ActivationPlan(
                    key,
                    spec,
                    "column-parallel: output dimensions on "
                    + ", ".join(
                        f"'{a}'" for e in sharded_out for a in entry_axes(e)
                    )
                    + " as the kernel's"
                    + (context_note if tokens else ""),
                    within if tokens else (),
                )
            )
            if pin_input and len(letters) == 3:
                # Gathered over the sequence before the matmul; left free,
                # XLA may gather the kernel instead and then reshard the
                # output from tokens to heads (all-to-alls).
                planned.append(
                    ActivationPlan(
                        f"{layer.path}/input",
                        (FREE, None, None),
                        "column-parallel input: gathered over the sequence "
                        "(sequence parallel), whole on every device"
                        + context_note,
                        within,
                    )
                )
        elif contracted:
            axes = ", ".join(
                f"'{a}'" for e in contracted for a in entry_axes(e)
            )
            if not (split_model and residual_rank):
                planned.append(
                    ActivationPlan(
                        key,
                        spec,
                        f"row-parallel: the kernel contracts over {axes}, "
                        "so the output is all-reduced here, whole"
                        + (context_note if tokens else ""),
                        within if tokens else (),
                    )
                )
                continue
            planned.append(
                ActivationPlan(
                    key,
                    spec,
                    f"row-parallel: the kernel contracts over {axes}, so "
                    f"the output is reduce-scattered over the sequence on "
                    f"{named_axes} (sequence parallel)" + context_note,
                    between,
                )
            )
            if pin_input:
                planned.append(
                    ActivationPlan(
                        f"{layer.path}/input",
                        _letters_spec(letters, by_letter, model_axes),
                        "row-parallel input: whole sequence, contracted "
                        f"dimensions on {axes} as the kernel's, so backward "
                        "gathers the output gradient, not the kernel"
                        + context_note,
                        within,
                    )
                )
    return tuple(planned)


def _letters_spec(letters, by_letter, model_axes):
    """A spec of an einsum operand: the kernel's model-axis entries on its
    kernel letters, `FREE` (the batch) first, other dimensions whole."""
    spec = []
    for index, letter in enumerate(letters):
        if letter in by_letter:
            entry = by_letter[letter]
            spec.append(
                entry
                if entry and set(entry_axes(entry)) <= model_axes
                else None
            )
        else:
            spec.append(FREE if index == 0 else None)
    return tuple(spec)
