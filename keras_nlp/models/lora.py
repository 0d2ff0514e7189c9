"""LoRA for backbones: adapters laid out like their kernels, and merging."""

import math

import keras

from keras_nlp.distribution.layout_map import layout_map_of
from keras_nlp.distribution.layout_map import verify_layouts
from keras_nlp.saving.lora_weights import check_no_quantized_lora
from keras_nlp.saving.lora_weights import load_lora_weights
from keras_nlp.saving.lora_weights import save_lora_weights

# Constructor arguments that `Backbone` handles for every subclass.
LORA_CONFIG_KEYS = ("lora_rank", "lora_target_names")


def check_lora_rank(rank):
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
        raise ValueError(
            f"The LoRA rank must be a positive integer. Received: "
            f"rank={rank!r}."
        )


def _lora_matrix(layer):
    """`(kernel shape, rows, columns)`: `layer`'s kernel and the matrix
    LoRA adapts in it. Keras's adapters `a (*shape[:-1], rank)` and
    `b (rank, shape[-1])` multiply to the kernel folded to
    `(prod(shape[:-1]), shape[-1])`, whose rank their product cannot
    exceed."""
    shape = tuple(layer._kernel.shape)
    if getattr(layer, "quantization_mode", None) == "int4":
        # int4 kernels are stored packed; Keras adapts their original shape,
        # which an `EinsumDense` keeps whole and a `Dense` by dimension.
        if isinstance(layer, keras.layers.EinsumDense):
            shape = tuple(layer.original_kernel_shape)
        else:
            shape = (layer._orig_input_dim, layer._orig_output_dim)
    return shape, math.prod(shape[:-1]), shape[-1]


def _check_rank_fits(rank, layer, layers):
    """Refuses a rank past the rank of `layer`'s adapted matrix: the
    adapters could not use it, and would only cost memory (a rank of 10**7
    on a 32-wide model grew past 8 GB)."""
    shape, rows, columns = _lora_matrix(layer)
    if rank <= min(rows, columns):
        return
    largest = min(min(_lora_matrix(other)[1:]) for other in layers)
    raise ValueError(
        f"LoRA rank {rank} is larger than the layer {layer.path} can use: "
        f"its kernel {shape} is adapted as a {rows} x {columns} matrix, of "
        f"rank at most {min(rows, columns)}. Pass a rank of at most "
        f"{largest} for these target layers."
    )


class LoraMixin:
    """`enable_lora` and `merge_lora` for `Backbone` subclasses."""

    # Layers `enable_lora` targets by default: the attention query and value
    # projections. Subclasses whose layers are named otherwise override it.
    lora_target_names = ("query", "value")

    def lora_config(self):
        """`{"lora_rank", "lora_target_names"}` when LoRA is on, else `{}`."""
        if not getattr(self, "_lora_rank", None):
            return {}
        return {
            "lora_rank": self._lora_rank,
            "lora_target_names": list(self._lora_target_names),
        }

    def _lora_layers(self, target_names):
        """The layers named in `target_names` that support LoRA."""
        candidates = [
            layer
            for layer in self._flatten_layers(include_self=False)
            if hasattr(layer, "enable_lora")
            and getattr(layer, "_kernel", None) is not None
        ]
        chosen = [layer for layer in candidates if layer.name in target_names]
        missing = set(target_names) - {layer.name for layer in chosen}
        if missing:
            names = sorted({layer.name for layer in candidates})
            raise ValueError(
                f"LoRA target names {sorted(missing)} match no layer of this "
                f"{type(self).__name__}. Layers that support LoRA: "
                f"{', '.join(names)}."
            )
        return chosen

    def _lora_targets(self, rank, target_names):
        """`(target names, layers)` of a LoRA request, once every check of
        it passed (nothing is planned or created before).

        Raises:
            ValueError: LoRA already on, a rank that is not a positive
                integer or exceeds what a target kernel can use, target
                names that are not a non-empty list of names, or names
                that match no layer.
        """
        check_lora_rank(rank)
        if getattr(self, "_lora_rank", None):
            raise ValueError(
                f"LoRA is already enabled on this {type(self).__name__} "
                f"(rank {self._lora_rank}); it can be enabled once. Use "
                "merge_lora() first to start again from merged kernels."
            )
        if target_names is None:
            target_names = self.lora_target_names
        if isinstance(target_names, str) or not all(
            isinstance(name, str) for name in target_names
        ):
            raise ValueError(
                "target_layer_names must be a list of layer names, e.g. "
                f"['query', 'value']. Received: {target_names!r}."
            )
        target_names = tuple(target_names)
        if not target_names:
            raise ValueError(
                "target_layer_names is empty: LoRA would adapt no layer and "
                "leave nothing trainable. Name the layers to adapt, or pass "
                "None for the defaults "
                f"({list(self.lora_target_names)})."
            )
        layers = self._lora_layers(target_names)
        for layer in layers:
            _check_rank_fits(rank, layer, layers)
        return target_names, layers

    def _add_lora_adapters(self, rank, target_names):
        """Adds adapters to the target layers; freezes everything else."""
        target_names, layers = self._lora_targets(rank, target_names)
        for variable in self.weights:
            variable.trainable = False
        for layer in layers:
            layer.enable_lora(rank)
        self._lora_rank = rank
        self._lora_target_names = target_names

    def default_lora_layer_names(self):
        """The layer names `enable_lora` adapts by default, as a list.

        keras-hub's name for the class's `lora_target_names`.
        """
        return list(self.lora_target_names)

    def enable_lora(self, rank, target_layer_names=None):
        """Adds LoRA adapters; afterwards only the adapters are trainable.

        Each target layer (an `EinsumDense` or `Dense`) gets Keras's
        `lora_kernel_a` and `lora_kernel_b`. Under a `ModelParallel` scope
        made from `get_layout_map`, the adapters' layouts are derived from
        their kernel's planned layout (shared dimensions keep the kernel's
        mesh axes, the rank is replicated), added to the layout map before
        they are created, and checked afterwards. Passing `lora_rank=` to
        the constructor (or keeping it in a config) does the same at build
        time. On an int8 or int4 backbone (QLoRA) the adapters have the
        float kernels' dimensions and layouts, though int4 kernels are
        stored packed.

        Args:
            rank: int, the rank of the adapters.
            target_layer_names: list of layer names to adapt (keras-hub's
                keyword); defaults to `default_lora_layer_names()` (the
                attention query and value projections for most classes).

        Example:

        ```python
        from keras_nlp.models import GemmaBackbone

        backbone = GemmaBackbone.from_preset(
            "gemma_2b_en", load_weights=False, num_layers=1,
            vocabulary_size=256, hidden_dim=64, intermediate_dim=128,
            head_dim=16,
        )
        backbone.enable_lora(4)
        [v.path for v in backbone.trainable_weights][:2]
        # ['decoder_block_0/attention/query/lora_kernel_a',
        #  'decoder_block_0/attention/query/lora_kernel_b']
        ```
        """
        # Checked before anything is planned or created.
        target_layer_names, _ = self._lora_targets(rank, target_layer_names)
        plan = self.layout_plan
        layout_map = None
        if plan is not None:
            layout_map = layout_map_of(self, "enable_lora", "the adapters")
            config = {
                **self.get_config(),
                "lora_rank": rank,
                "lora_target_names": list(target_layer_names),
            }
            plan = layout_map.plan_for(type(self), config)
            layout_map.extend(plan)
        self._add_lora_adapters(rank, target_layer_names)
        if plan is not None:
            verify_layouts(self, plan, layout_map.device_mesh)
            self._layout_plan = plan

    def save_lora_weights(self, filepath):
        """Writes the adapters to a `.lora.h5` file, as keras-hub does.

        keras-hub's `load_lora_weights` reads the file, and so does ours.
        Sharded adapters are gathered to be written.

        Args:
            filepath: str or path, ending in `.lora.h5`.

        Example:

        ```python
        import os
        import tempfile
        from keras_nlp.models import GemmaBackbone

        config = dict(
            vocabulary_size=64, num_layers=1, num_query_heads=2,
            num_key_value_heads=1, hidden_dim=16, intermediate_dim=32,
            head_dim=8,
        )
        backbone = GemmaBackbone(**config)
        backbone.enable_lora(4)
        path = os.path.join(tempfile.mkdtemp(), "adapters.lora.h5")
        backbone.save_lora_weights(path)
        restored = GemmaBackbone(**config)
        restored.load_lora_weights(path)  # enables rank-4 LoRA first
        ```
        """
        save_lora_weights(self, filepath)

    def load_lora_weights(self, filepath):
        """Reads adapters from a `.lora.h5` file (ours or keras-hub's).

        Enables LoRA at the file's rank, with the default target layers,
        if it is not enabled yet (under a `ModelParallel` scope, call it in
        that scope). Each adapter's layer and shape are checked before any
        value is assigned; sharded adapters are placed on their devices.

        Args:
            filepath: str or path of a file `save_lora_weights` wrote.
        """
        load_lora_weights(self, filepath)

    def merge_lora(self):
        """A copy of this backbone with the adapters merged into kernels.

        Each adapted kernel becomes `kernel + alpha / rank * a @ b`; the copy
        has no adapters and every weight is trainable again. Under a
        `ModelParallel` scope the copy is built sharded like this one.

        Returns:
            A new backbone of the same class and config, without LoRA.

        Raises:
            ValueError: when an adapted kernel is int8 or int4 (QLoRA):
                merge on the float backbone, then quantize the copy.
        """
        if not getattr(self, "_lora_rank", None):
            raise ValueError(
                f"This {type(self).__name__} has no LoRA adapters to merge; "
                "call enable_lora(rank) first."
            )
        check_no_quantized_lora(self, "merge_lora")
        config = {
            key: value
            for key, value in self.get_config().items()
            if key not in LORA_CONFIG_KEYS
        }
        config["trainable"] = True
        merged = type(self).from_config(config)
        adapted = {}
        for layer in self._flatten_layers(include_self=False):
            if getattr(layer, "lora_enabled", False):
                a, b = layer.lora_kernel_a, layer.lora_kernel_b
                update = keras.ops.matmul(
                    keras.ops.reshape(a, (-1, a.shape[-1])), b
                )
                update = keras.ops.reshape(update, layer.kernel.shape)
                scale = layer.lora_alpha / layer.lora_rank
                adapted[layer._kernel.path] = layer._kernel + keras.ops.cast(
                    update * scale, layer._kernel.dtype
                )
        ours = {v.path: v for v in self.weights}
        for variable in merged.weights:
            value = adapted.get(variable.path, ours[variable.path])
            variable.assign(value)
        return merged
