"""Rematerialization of whole blocks under Keras's `RematScope`.

Build a backbone inside `keras.RematScope(mode=...)` and Keras marks every
layer made there. Left to Keras, each layer would be checkpointed on its
own, with every call argument traced: the Python `training` flag becomes
an array (and dropout's `if training` fails), and a whole backbone or task
would be one checkpoint that saves nothing a block-level one does not.
`RematBlock` makes the block the unit instead, which is what
rematerialization means for a transformer:

- `"full"`: every block keeps only its input for the backward pass and
  recomputes the rest there;
- `"list_of_layers"`: the blocks named in `layer_names` do;
- `"larger_than"`: blocks whose output has more than
  `output_size_threshold` elements do;
- `"activations"`: Keras's own mode, unchanged (layers with an
  `activation` recompute it).

The layers inside a rematerialized block are then left plain (a checkpoint
inside a checkpoint would only recompute more). `RematBoundary` keeps
models (backbones, tasks) from being checkpointed whole.
`keras_nlp.distribution.memory` predicts what each mode saves.
"""

import math

import keras

BLOCK_MODES = ("full", "list_of_layers", "larger_than")


def _is_static(value):
    return value is None or isinstance(value, (bool, int, float, str))


def rematerialize(layer_call, variables):
    """`keras.remat(layer_call)`, with Python arguments kept out of the trace.

    Positional arguments and keyword tensors are checkpointed; keyword
    arguments that are `None`, booleans, numbers or strings (`training`,
    an absent cache) are passed as they are. `variables` (the layer's) go
    in as explicit inputs, and what the call assigns to them (dropout's
    seed states) comes out and is assigned outside, so no traced value
    leaks from the checkpoint.
    """
    variables = list(variables)

    def call(*args, **kwargs):
        static = {k: v for k, v in kwargs.items() if _is_static(v)}
        names = [k for k in kwargs if k not in static]

        def tensors_only(states, *values):
            positional = values[: len(args)]
            keywords = dict(zip(names, values[len(args) :], strict=True))
            mapping = list(zip(variables, states, strict=True))
            with keras.StatelessScope(state_mapping=mapping) as scope:
                outputs = layer_call(*positional, **keywords, **static)
            updated = [
                scope.get_current_value(variable) for variable in variables
            ]
            return outputs, updated

        states = [variable.value for variable in variables]
        values = list(args) + [kwargs[name] for name in names]
        outputs, updated = keras.remat(tensors_only)(states, *values)
        for variable, value in zip(variables, updated, strict=True):
            if not variable.trainable:
                variable.assign(value)
        return outputs

    return call


class RematBlock:
    """Mixin of a transformer block: the block is the rematerialized unit."""

    def rematerialized_call(self, layer_call, *args, **kwargs):
        mode = self._remat_mode
        if mode is None or mode.mode not in BLOCK_MODES:
            return super().rematerialized_call(layer_call, *args, **kwargs)
        if mode.mode == "list_of_layers" and self.name not in (
            mode.layer_names or ()
        ):
            return layer_call
        if mode.mode == "larger_than":
            output_size = math.prod(args[0].shape) if args else 0
            if output_size <= mode.output_size_threshold:
                return layer_call
        for layer in self._flatten_layers(include_self=False):
            layer._remat_mode = None
        return rematerialize(layer_call, self.variables)


class RematBoundary:
    """Mixin of a model: never checkpointed whole (its blocks are)."""

    def rematerialized_call(self, layer_call, *args, **kwargs):
        return layer_call


def keep_remat_to_blocks(model):
    """Leaves a block mode (`BLOCK_MODES`) on `model`'s blocks only.

    Called once a backbone is built: its other layers (embeddings, final
    norms, heads) run plainly, since Keras would trace their Python
    arguments (`reverse=True` of a tied embedding) and they hold little.
    """
    blocks = [
        layer
        for layer in model._flatten_layers(include_self=False)
        if isinstance(layer, RematBlock)
    ]
    inside = {
        id(inner)
        for block in blocks
        for inner in block._flatten_layers(include_self=False)
    }
    # The functional graph's own operations (an `add` of two embeddings)
    # are marked too.
    operations = list(getattr(model, "operations", ()))
    for layer in list(model._flatten_layers(include_self=False)) + operations:
        mode = getattr(layer, "_remat_mode", None)
        if mode is None or mode.mode not in BLOCK_MODES:
            continue
        if not isinstance(layer, RematBlock) and id(layer) not in inside:
            layer._remat_mode = None
