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
    for layer in model._flatten_layers(include_self=True):
        declared = getattr(layer, _ATTRIBUTE, None)
        if not declared:
            continue
        own = [*layer._trainable_variables, *layer._non_trainable_variables]
        for variable in own:
            dims = declared.get(variable.name)
            if dims is None:
                continue
            if len(dims) != len(variable.shape):
                raise ValueError(
                    f"{type(layer).__name__} {layer.name!r} declares "
                    f"{len(dims)} dimension names {dims} for "
                    f"{variable.path}, which has shape "
                    f"{tuple(variable.shape)}."
                )
            found[variable.path] = dims
    return found
