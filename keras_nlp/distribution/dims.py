"""What each dimension of a layer's variables means, declared by the layer.

A layer names the dimensions of the variables it creates (`hidden`,
`heads`, `kv_heads`, `head_dim`, `ffw`, `vocab`, `position`, `experts`...)
where it creates them, so layout rules can be checked against the math
they describe: a rule that names a query kernel `(heads, hidden, head_dim)`
while the layer's kernel is `(hidden, heads, head_dim)` is an error, even
when every size divides the mesh.

```python
dense = keras.layers.EinsumDense("btd,dnh->btnh", output_shape=(None, 4, 8))
declare_einsum_dims(dense, d="hidden", n="heads", h="head_dim")
# dense's kernel is (hidden, heads, head_dim)
```
"""

_ATTRIBUTE = "_keras_nlp_dim_names"


def declare_dims(layer, **dims_by_variable):
    """Names the dimensions of `layer`'s own variables.

    Args:
        layer: a `keras.layers.Layer`; it may be built later.
        **dims_by_variable: variable name (e.g. `kernel`, `embeddings`) ->
            tuple of one dimension name per dimension.

    Returns:
        `layer`, for chaining.
    """
    declared = dict(getattr(layer, _ATTRIBUTE, None) or {})
    for name, dims in dims_by_variable.items():
        if not (
            isinstance(dims, tuple) and all(isinstance(d, str) for d in dims)
        ):
            raise ValueError(
                f"Dimension names of {layer.name}/{name} must be a tuple of "
                f"strings, one per dimension. Received: {dims!r}."
            )
        declared[name] = dims
    # Set on the instance dict: Keras would track a dict attribute.
    object.__setattr__(layer, _ATTRIBUTE, declared)
    return layer


def einsum_dims(equation, legend):
    """The kernel's dimension names of an `EinsumDense` equation.

    Args:
        equation: e.g. `"btd,dnh->btnh"`; the kernel is the second operand.
        legend: dict of equation letter -> dimension name.

    Returns:
        A tuple of names, e.g. `("hidden", "heads", "head_dim")`.
    """
    kernel_term = equation.split("->")[0].split(",")[1].strip()
    missing = [letter for letter in kernel_term if letter not in legend]
    if missing:
        raise ValueError(
            f"The legend of {equation!r} names no dimension for the kernel "
            f"letters {missing}. Received the legend: {legend}."
        )
    return tuple(legend[letter] for letter in kernel_term)


def declare_einsum_dims(dense, **legend):
    """Names the kernel (and bias) dimensions of a `keras.layers.EinsumDense`.

    Args:
        dense: the `EinsumDense` (built or not).
        **legend: equation letter -> dimension name, e.g.
            `d="hidden", n="heads", h="head_dim"`.

    Returns:
        `dense`, for chaining.
    """
    dims = {"kernel": einsum_dims(dense.equation, legend)}
    if dense.bias_axes:
        dims["bias"] = tuple(legend[letter] for letter in dense.bias_axes)
    return declare_dims(dense, **dims)


def declared_dims(model):
    """`{variable path: dimension names}` for every declared variable.

    Args:
        model: a built `keras.Model` or layer.
    """
    found = {}
    for layer, variable, dims in _declarations(model, _ATTRIBUTE):
        if len(dims) != len(variable.shape):
            raise ValueError(
                f"{type(layer).__name__} {layer.name!r} declares "
                f"{len(dims)} dimension names {dims} for "
                f"{variable.path}, which has shape "
                f"{tuple(variable.shape)}."
            )
        found[variable.path] = dims
    return found


def _declarations(model, attribute):
    """`(layer, variable, declaration)` for each variable of `model` whose
    layer declares something of it under `attribute`."""
    for layer in model._flatten_layers(include_self=True):
        declared = getattr(layer, attribute, None)
        if not declared:
            continue
        own = [*layer._trainable_variables, *layer._non_trainable_variables]
        for variable in own:
            if variable.name in declared:
                yield layer, variable, declared[variable.name]


# Where a layer records the heads its flat dimensions hold.
_HEADS_ATTRIBUTE = "_keras_nlp_flat_heads"


def declare_flat_heads(layer, variable, **runs_by_dim):
    """Says which heads a flat dimension of one of `layer`'s variables holds.

    A flat dimension concatenates whole heads (`heads * head_dim` columns,
    or a fused projection's query, key and value heads). A mesh axis may
    split it only where every cut falls between two heads: dividing the
    width is not enough (16 heads of 72 split 32 ways would cut each head
    in two). The plan checks each cut against the runs declared here.

    Declare it where a projection makes heads (its output columns, which
    the layer then reshapes into heads): a head cut there costs a
    collective to rebuild it. A flat dimension that a projection contracts
    (an output projection's rows) needs no declaration: any equal split of
    it is exact, and costs the same all-reduce wherever the cuts fall.

    Args:
        layer: a `keras.layers.Layer` whose dimensions `declare_dims` (or
            `declare_einsum_dims`) names.
        variable: the variable's name (e.g. `"kernel"`).
        **runs_by_dim: dimension name -> a tuple of `(count, size)` runs in
            storage order: `count` heads of `size` each, e.g.
            `linear_qkv=((32, 128), (32, 128))` for 32 query-and-key heads
            then 32 value heads.

    Returns:
        `layer`, for chaining.

    Example:

    ```python
    from keras_nlp.distribution import declare_flat_heads
    from keras_nlp.layers.dense import named_dense

    # 8 query heads of 8, made flat: a model axis of 8 splits them, one
    # of 16 (4 columns each) does not.
    query = named_dense(64, ("hidden", "heads"), name="query")
    declare_flat_heads(query, "kernel", heads=((8, 8),))
    ```
    """
    declared = dict(getattr(layer, _HEADS_ATTRIBUTE, None) or {})
    for dim, runs in runs_by_dim.items():
        if not runs or not all(
            isinstance(count, int)
            and isinstance(size, int)
            and count > 0
            and size > 0
            for count, size in runs
        ):
            raise ValueError(
                f"The heads of {layer.name}/{variable}'s {dim!r} must be a "
                "non-empty tuple of (count, size) pairs of positive ints. "
                f"Received: {runs!r}."
            )
    declared[variable] = {
        **declared.get(variable, {}),
        **{
            dim: tuple(tuple(run) for run in runs)
            for dim, runs in runs_by_dim.items()
        },
    }
    object.__setattr__(layer, _HEADS_ATTRIBUTE, declared)
    return layer


def declared_flat_heads(model):
    """`{variable path: per-dimension runs}` for variables with flat heads.

    Each value has one entry per dimension of the variable: the `(count,
    size)` runs `declare_flat_heads` gave that dimension, or `None`.

    Args:
        model: a built `keras.Model` or layer.
    """
    found = {}
    for layer, variable, runs in _declarations(model, _HEADS_ATTRIBUTE):
        dims = (getattr(layer, _ATTRIBUTE, None) or {}).get(variable.name)
        unknown = sorted(set(runs) - set(dims or ()))
        if unknown:
            raise ValueError(
                f"{type(layer).__name__} {layer.name!r} declares heads "
                f"for the dimensions {unknown} of {variable.path}, whose "
                f"declared dimensions are {dims}."
            )
        for dim, dim_size in zip(dims, variable.shape, strict=True):
            if dim in runs and sum(c * s for c, s in runs[dim]) != dim_size:
                raise ValueError(
                    f"{type(layer).__name__} {layer.name!r} declares "
                    f"heads {runs[dim]} for {dim!r} of {variable.path}, "
                    f"which has size {dim_size}."
                )
        found[variable.path] = tuple(runs.get(dim) for dim in dims)
    return found


def cuts_between_heads(runs, shards):
    """Whether splitting the flat dimension of `runs` into `shards` equal
    parts cuts only between heads.

    Args:
        runs: `(count, size)` runs (see `declare_flat_heads`), or `None`
            for a dimension without heads (any equal split is fine).
        shards: the number of parts.
    """
    if runs is None or shards == 1:
        return True
    width = sum(count * size for count, size in runs)
    if width % shards:
        return False
    part = width // shards
    start = 0
    for count, size in runs:
        end = start + count * size
        # Every cut strictly inside this run must be a multiple of `size`
        # from its start.
        first_cut = -(-start // part) * part
        if first_cut == start:
            first_cut += part
        for cut in range(first_cut, end, part):
            if (cut - start) % size:
                return False
        start = end
    return True
