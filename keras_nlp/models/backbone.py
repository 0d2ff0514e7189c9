"""Base class for every backbone in keras_nlp."""

import functools
import inspect
import json
import os
import threading

import keras

from keras_nlp.distribution.layout_map import BackboneLayoutMap
from keras_nlp.distribution.layout_map import verify_layouts
from keras_nlp.distribution.mesh import MeshShape
from keras_nlp.distribution.resolver import resolve_layout
from keras_nlp.distribution.rules import normalize_rules
from keras_nlp.distribution.shapes import abstract_variables

# Per-thread construction state: how deep in nested backbone constructors
# we are, and whether the current build is an abstract (shape-only) one.
_construction = threading.local()

_ABSTRACT_CACHE = {}
_ABSTRACT_CACHE_SIZE = 64
_LORA_CONFIG_KEYS = ("lora_rank", "lora_target_names")


class _class_or_instance_method:
    """A method callable on the class and on an instance.

    The function receives `(cls, instance_or_None, *args, **kwargs)`.
    """

    def __init__(self, function):
        self.function = function
        functools.update_wrapper(self, function)

    def __get__(self, instance, owner):
        @functools.wraps(self.function)
        def bound(*args, **kwargs):
            return self.function(owner, instance, *args, **kwargs)

        return bound


def _constructor_config(init, instance, args, kwargs):
    """The constructor arguments of a call, defaults applied, as a config."""
    signature = inspect.signature(init)
    bound = signature.bind(instance, *args, **kwargs)
    bound.apply_defaults()
    config = {}
    for index, (name, parameter) in enumerate(signature.parameters.items()):
        if index == 0:
            continue
        value = bound.arguments.get(name)
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            config.update(value or {})
        elif parameter.kind is not inspect.Parameter.VAR_POSITIONAL:
            config[name] = value
    return config


def _active_backbone_layout_map():
    distribution = keras.distribution.distribution()
    layout_map = getattr(distribution, "_layout_map", None)
    if isinstance(layout_map, BackboneLayoutMap):
        return layout_map
    return None


def _binds_layout_before_init(init):
    """Wraps a backbone `__init__` so layouts are resolved before variables.

    Only the outermost backbone constructor of a call binds: subclasses
    calling `super().__init__` and the abstract shape builds pass through.
    """

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        depth = getattr(_construction, "depth", 0)
        abstract = getattr(_construction, "abstract", False)
        layout_map = None
        plan = None
        if depth == 0 and not abstract:
            layout_map = _active_backbone_layout_map()
            if layout_map is not None:
                config = _constructor_config(init, self, args, kwargs)
                plan = layout_map.bind(type(self), config)
        # LoRA settings belong to the base class (they come back through
        # `get_config`); adapters are added once the backbone is built.
        lora = {}
        if depth == 0:
            lora = {key: kwargs.pop(key, None) for key in _LORA_CONFIG_KEYS}
        _construction.depth = depth + 1
        try:
            init(self, *args, **kwargs)
        finally:
            _construction.depth = depth
        if lora.get("lora_rank"):
            self._add_lora_adapters(
                lora["lora_rank"], lora.get("lora_target_names")
            )
        if plan is not None:
            # A deferred build (from_preset) has no values yet; the loader
            # verifies once it has filled them.
            if not getattr(_construction, "deferred", False):
                verify_layouts(self, plan, layout_map.device_mesh)
            self._layout_plan = plan

    __init__._binds_layout = True
    # Keras reads constructor arguments with getfullargspec, which ignores
    # __wrapped__ but honours __signature__.
    __init__.__signature__ = inspect.signature(init)
    return __init__


def _check_lora_rank(rank):
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
        raise ValueError(
            f"The LoRA rank must be a positive integer. Received: "
            f"rank={rank!r}."
        )


def _is_directory(preset):
    return isinstance(preset, (str, os.PathLike)) and os.path.isdir(preset)


def _registered_backbones(cls):
    found = [cls]
    for subclass in cls.__subclasses__():
        found.extend(_registered_backbones(subclass))
    return found


class Backbone(keras.Model):
    """Base class of all backbones: a functional `keras.Model`.

    A subclass builds its layers in `__init__`, wires a functional graph,
    calls `super().__init__(inputs=..., outputs=..., dtype=dtype, **kwargs)`,
    stores its constructor arguments and returns them from `get_config()`.
    For model parallelism it adds one static method, `_layout_rules(config)`,
    returning a short list of `(regex, spec)` pairs (see
    `keras_nlp.distribution`). Everything else about sharding (validation,
    shape checks, fallbacks, plans, verification) lives here.

    Attributes:
        presets: dict of preset name -> config (constructor arguments) of
            the built-in presets of the class.
    """

    presets = {}
    # Layers `enable_lora` targets by default: the attention query and value
    # projections. Subclasses whose layers are named otherwise override it.
    lora_target_names = ("query", "value")

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is not None and not getattr(init, "_binds_layout", False):
            cls.__init__ = _binds_layout_before_init(init)

    # === Graph ===

    def _init_decoder_graph(self, embed, blocks, final_norm, **kwargs):
        """Wires and initializes the functional model of a decoder stack.

        `token_ids` -> `embed` -> each block (given the padding mask) ->
        `final_norm`, with inputs `{"token_ids", "padding_mask"}`. Subclasses
        call this instead of `super().__init__(inputs=..., outputs=...)`.

        Args:
            embed: callable mapping the symbolic `token_ids` to the first
                hidden states (a layer, or a function of layers).
            blocks: the decoder blocks, each called as
                `block(x, padding_mask=padding_mask)`.
            final_norm: the layer applied to the last block's output.
            **kwargs: forwarded to `keras.Model.__init__` (`dtype`, `name`).
        """
        token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
        padding_mask = keras.Input(
            shape=(None,), dtype="int32", name="padding_mask"
        )
        x = embed(token_ids)
        for block in blocks:
            x = block(x, padding_mask=padding_mask)
        dtype = kwargs.pop("dtype", None)
        super().__init__(
            inputs={"token_ids": token_ids, "padding_mask": padding_mask},
            outputs=final_norm(x),
            **kwargs,
        )
        # Functional models drop `dtype`; the backbone's own policy is what
        # `get_config` (and so a saved preset) records.
        if dtype is not None:
            self.dtype_policy = keras.dtype_policies.get(dtype)

    # === Config ===

    def get_config(self):
        config = {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
        }
        if getattr(self, "_lora_rank", None):
            config["lora_rank"] = self._lora_rank
            config["lora_target_names"] = list(self._lora_target_names)
        return config

    # === LoRA ===

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

    def _add_lora_adapters(self, rank, target_names):
        """Adds adapters to the target layers; freezes everything else."""
        _check_lora_rank(rank)
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
                "target_names must be a list of layer names, e.g. "
                f"['query', 'value']. Received: {target_names!r}."
            )
        target_names = tuple(target_names)
        layers = self._lora_layers(target_names)
        for variable in self.weights:
            variable.trainable = False
        for layer in layers:
            layer.enable_lora(rank)
        self._lora_rank = rank
        self._lora_target_names = target_names

    def enable_lora(self, rank, target_names=None):
        """Adds LoRA adapters; afterwards only the adapters are trainable.

        Each target layer (an `EinsumDense` or `Dense`) gets Keras's
        `lora_kernel_a` and `lora_kernel_b`. Under a `ModelParallel` scope
        made from `get_layout_map`, the adapters' layouts are derived from
        their kernel's planned layout (shared dimensions keep the kernel's
        mesh axes, the rank is replicated), added to the layout map before
        they are created, and checked afterwards. Passing `lora_rank=` to
        the constructor (or keeping it in a config) does the same at build
        time.

        Args:
            rank: int, the rank of the adapters.
            target_names: list of layer names to adapt; defaults to the
                class's `lora_target_names` (the attention query and value
                projections).

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
        plan = self.layout_plan
        layout_map = None
        if plan is not None:
            layout_map = _active_backbone_layout_map()
            if layout_map is None or layout_map.plan is not plan:
                raise ValueError(
                    f"This {type(self).__name__} was built under a "
                    "ModelParallel layout; call enable_lora inside that "
                    "distribution's scope so the adapters are sharded like "
                    "their kernels."
                )
            config = {
                **self.get_config(),
                "lora_rank": rank,
                "lora_target_names": list(
                    target_names or self.lora_target_names
                ),
            }
            plan = type(self).plan_layout(
                layout_map.device_mesh,
                config=config,
                model_parallel_dim_name=layout_map.model_axis,
                data_parallel_dim_name=layout_map.data_axis,
                strict=layout_map.strict,
            )
            layout_map.extend(plan)
        self._add_lora_adapters(rank, target_names)
        if plan is not None:
            # A deferred build (from_preset) has no values yet; the loader
            # verifies once it has filled them.
            if not getattr(_construction, "deferred", False):
                verify_layouts(self, plan, layout_map.device_mesh)
            self._layout_plan = plan

    def merge_lora(self):
        """A copy of this backbone with the adapters merged into kernels.

        Each adapted kernel becomes `kernel + alpha / rank * a @ b`; the copy
        has no adapters and every weight is trainable again. Under a
        `ModelParallel` scope the copy is built sharded like this one.

        Returns:
            A new backbone of the same class and config, without LoRA.
        """
        if not getattr(self, "_lora_rank", None):
            raise ValueError(
                f"This {type(self).__name__} has no LoRA adapters to merge; "
                "call enable_lora(rank) first."
            )
        config = {
            key: value
            for key, value in self.get_config().items()
            if key not in _LORA_CONFIG_KEYS
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

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(**config)

    # === Presets ===

    @classmethod
    def _preset_owner(cls, preset):
        for backbone_cls in _registered_backbones(cls):
            if preset in backbone_cls.__dict__.get("presets", {}):
                return backbone_cls
        return None

    @classmethod
    def _available_presets(cls):
        names = []
        for backbone_cls in _registered_backbones(cls):
            names.extend(backbone_cls.__dict__.get("presets", {}))
        return sorted(names)

    @classmethod
    def _preset_config(cls, preset):
        """`(class, config)` of a built-in preset name or a preset directory."""
        if _is_directory(preset):
            from keras_nlp.saving import read_backbone_config

            owner, config = read_backbone_config(os.fspath(preset))
            if not issubclass(owner, cls):
                raise ValueError(
                    f"The preset {os.fspath(preset)!r} holds a "
                    f"{owner.__name__}, not a {cls.__name__}. Load it with "
                    f"{owner.__name__}.from_preset or "
                    "keras_nlp.models.Backbone.from_preset."
                )
            return owner, config
        owner = cls._preset_owner(preset)
        if owner is None:
            looks_like_path = isinstance(preset, os.PathLike) or (
                isinstance(preset, str) and ("/" in preset or os.sep in preset)
            )
            hint = (
                f" {os.fspath(preset)!r} is not an existing directory either."
                if looks_like_path
                else ""
            )
            raise ValueError(
                f"Unknown preset {preset!r} for {cls.__name__}. Built-in "
                f"presets: {', '.join(cls._available_presets()) or 'none'}; "
                f"or pass the path of a preset directory.{hint}"
            )
        return owner, dict(owner.presets[preset])

    @classmethod
    def from_preset(cls, preset, load_weights=True, verbose=False, **kwargs):
        """Builds a backbone from a preset directory or a built-in config.

        A preset directory holds `config.json`, `metadata.json` and the
        weights (`model.weights.h5`, or `model.weights.json` and the
        `model_NNNNN.weights.h5` files it lists), as written by
        `save_to_preset` here or by keras-hub for the same architecture.
        `config.json` is read safely: only backbone classes of this library
        (registered as `keras_nlp>Name` or `keras_hub>Name`) are built, and
        only from plain arguments. Every weight is checked against the
        built backbone before any is loaded.

        Inside a `keras.distribution.ModelParallel` scope whose layout map
        comes from `get_layout_map`, the backbone is built with its layout
        and each weight is read from the file straight into its shards.
        A preset saved on one mesh loads on any other mesh, or on none.

        Built-in presets (see `presets`) are configs only: nothing is
        bundled or downloaded, so they need `load_weights=False`.

        Args:
            preset: a preset directory, or the name of a built-in preset.
            load_weights: bool, load the preset's weights (default) or keep
                random ones.
            verbose: bool, show a progress bar while loading weights.
            **kwargs: constructor arguments overriding the preset's config,
                e.g. `dtype="bfloat16"`.

        Returns:
            The backbone.

        Raises:
            ValueError (`keras_nlp.saving.PresetError` for files): an unknown
                preset, a preset of another class, or files that are
                missing, unsafe, truncated or do not match the config.

        Example:

        ```python
        import tempfile

        import keras
        import keras_nlp

        backbone = keras_nlp.models.GemmaBackbone.from_preset(
            "gemma_2b_en", load_weights=False, num_layers=1,
            vocabulary_size=128, hidden_dim=32, intermediate_dim=64,
            head_dim=8,
        )
        path = tempfile.mkdtemp()
        backbone.save_to_preset(path)

        devices = keras.distribution.list_devices()
        mesh = keras.distribution.DeviceMesh(
            (1, len(devices)), ("batch", "model"), devices
        )
        distribution = keras.distribution.ModelParallel(
            layout_map=keras_nlp.models.Backbone.get_layout_map(mesh),
            batch_dim_name="batch",
        )
        with distribution.scope():
            loaded = keras_nlp.models.Backbone.from_preset(path)
        ```
        """
        owner, config = cls._preset_config(preset)
        if load_weights and not _is_directory(preset):
            raise ValueError(
                f"The built-in preset {preset!r} is a config only: keras_nlp "
                "bundles no weights and never downloads them. Pass "
                "load_weights=False to build it with random weights, or "
                "the path of a preset directory."
            )
        config.update(kwargs)
        if not load_weights:
            return owner.from_config(config)
        from keras_nlp.saving import build_from_preset_weights

        return build_from_preset_weights(
            lambda: owner.from_config(config), os.fspath(preset), verbose
        )

    def save_to_preset(self, preset_dir, max_shard_size=10):
        """Saves the backbone as a preset directory in keras-hub's format.

        Writes `model.weights.h5` (laid out as Keras's `save_weights` does,
        so keras-hub reads it for the same architecture), then
        `config.json` (registered name `keras_nlp>ClassName`) and
        `metadata.json`. Sharded variables are gathered one tensor at a
        time. LoRA adapters are merged into their kernels, so the preset is
        a plain backbone with the adapted outputs.

        Args:
            preset_dir: str, the directory; created if missing. Weight files
                already in it are replaced.
            max_shard_size: float, in GB. Weights larger than this are
                written as `model.weights.json` plus `model_00000.weights.h5`,
                `model_00001.weights.h5`, ... of at most this size each.

        Example:

        ```python
        import tempfile

        import keras_nlp

        backbone = keras_nlp.models.LlamaBackbone.from_preset(
            "llama2_7b_en", load_weights=False, num_layers=1,
            vocabulary_size=128, hidden_dim=32, intermediate_dim=64,
            num_query_heads=4, num_key_value_heads=2,
        )
        path = tempfile.mkdtemp()
        backbone.save_to_preset(path, max_shard_size=0.00005)
        loaded = keras_nlp.models.LlamaBackbone.from_preset(path)
        ```
        """
        from keras_nlp.distribution import multihost
        from keras_nlp.saving import write_backbone_config
        from keras_nlp.saving import write_weights

        if (
            not isinstance(max_shard_size, (int, float))
            or isinstance(max_shard_size, bool)
            or max_shard_size <= 0
        ):
            raise ValueError(
                "max_shard_size must be a positive number of GB. Received: "
                f"max_shard_size={max_shard_size!r}."
            )
        preset_dir = os.fspath(preset_dir)
        if os.path.exists(preset_dir) and not os.path.isdir(preset_dir):
            raise ValueError(
                f"save_to_preset needs a directory; {preset_dir!r} is a file."
            )
        writing = multihost.is_main_process()
        if writing:
            os.makedirs(preset_dir, exist_ok=True)
            # An older config must not pair with half-written new weights.
            old_config = os.path.join(preset_dir, "config.json")
            if os.path.exists(old_config):
                os.remove(old_config)
        # Config last: an interrupted save leaves no loadable preset behind.
        write_weights(self, preset_dir, max_shard_size=max_shard_size)
        if writing:
            write_backbone_config(self, preset_dir)
        multihost.barrier("keras_nlp.save_to_preset")

    # === Layouts ===

    @staticmethod
    def _layout_rules(config):
        """The backbone's layout rules for `config`.

        Returns a list of `(regex, spec)`; each regex is matched with
        `re.fullmatch` against variable paths, and each spec entry names
        the role (`MODEL`, `DATA`, a tuple of them, or `None`) of one
        dimension. A list of specs gives alternatives, most preferred first.
        """
        raise NotImplementedError(
            "This backbone defines no layout rules. Subclasses of Backbone "
            "implement `_layout_rules(config)`; see CONTRIBUTING.md."
        )

    @classmethod
    def _abstract_variables(cls, config):
        key = (cls, json.dumps(config, sort_keys=True, default=repr))
        if key in _ABSTRACT_CACHE:
            return _ABSTRACT_CACHE[key]

        # An explicit name keeps the abstract build from taking the auto
        # name ("gemma_backbone") that the real build should get.
        abstract_config = {**config, "name": config.get("name") or "abstract"}

        def build():
            return cls.from_config(abstract_config)

        previous = keras.distribution.distribution()
        _construction.abstract = True
        keras.distribution.set_distribution(None)
        try:
            variables = abstract_variables(build)
        finally:
            keras.distribution.set_distribution(previous)
            _construction.abstract = False
        if len(_ABSTRACT_CACHE) >= _ABSTRACT_CACHE_SIZE:
            _ABSTRACT_CACHE.pop(next(iter(_ABSTRACT_CACHE)))
        _ABSTRACT_CACHE[key] = variables
        return variables

    @classmethod
    def _config_for(cls, instance, config, preset, caller):
        """Finds which class and config a layout call is about."""
        if config is not None and preset is not None:
            raise ValueError(
                f"{caller} takes config= or preset=, not both. Received "
                f"preset={preset!r} and a config."
            )
        if instance is not None:
            if config is not None or preset is not None:
                raise ValueError(
                    f"{caller} on a built backbone uses that backbone's own "
                    "config; call it on the class to pass config= or "
                    "preset=."
                )
            return type(instance), instance.get_config(), None
        if preset is not None:
            owner, config = cls._preset_config(preset)
            return owner, config, preset
        if config is not None:
            if not isinstance(config, dict):
                raise ValueError(
                    f"config= must be a dict of {cls.__name__} constructor "
                    f"arguments. Received: {type(config).__name__}."
                )
            if cls is Backbone:
                raise ValueError(
                    "Backbone.get_layout_map(config=...) cannot tell which "
                    "architecture the config is for. Call it on the "
                    "backbone class, e.g. GemmaBackbone.get_layout_map."
                )
            return cls, dict(config), None
        return cls, None, None

    @staticmethod
    def _check_axes(mesh, model_axis, data_axis):
        names = list(mesh.axis_names)
        if model_axis not in names:
            raise ValueError(
                f"model_parallel_dim_name={model_axis!r} is not an axis of "
                f"the device mesh. The mesh's axis names are {names}."
            )
        if data_axis is not None and data_axis not in names:
            raise ValueError(
                f"data_parallel_dim_name={data_axis!r} is not an axis of the "
                f"device mesh. The mesh's axis names are {names} (or pass "
                "data_parallel_dim_name=None to shard no weight on a data "
                "axis)."
            )
        if model_axis == data_axis:
            raise ValueError(
                "model_parallel_dim_name and data_parallel_dim_name must name "
                f"different mesh axes; both are {model_axis!r}. The mesh's "
                f"axis names are {names}."
            )

    @_class_or_instance_method
    def plan_layout(
        cls,
        instance,
        mesh,
        *,
        config=None,
        preset=None,
        model_parallel_dim_name="model",
        data_parallel_dim_name="batch",
        strict=False,
        dtype=None,
        lora_rank=None,
        lora_target_names=None,
    ):
        """Plans where every weight goes on a mesh, without any device.

        Takes the same arguments as `get_layout_map` but only needs the
        mesh's shape, and allocates no weights: the variables' shapes come
        from an abstract build.

        Args:
            mesh: a `keras.distribution.DeviceMesh`, a
                `keras_nlp.distribution.MeshShape`, or a dict of axis name
                -> size such as `{"batch": 1, "model": 2}`.
            config: dict of constructor arguments (class call only).
            preset: str, a built-in preset name (class call only).
            model_parallel_dim_name: mesh axis for the `MODEL` role.
            data_parallel_dim_name: mesh axis for the `DATA` role, or
                `None`.
            strict: bool. Raise instead of falling back to replication.
            dtype: str, optional dtype to count bytes in (e.g.
                `"bfloat16"`); defaults to each variable's dtype.
            lora_rank: int, optional: plan with LoRA adapters of this rank
                (their layouts derive from their kernels').
            lora_target_names: optional list of layer names for the
                adapters; defaults to the class's `lora_target_names`.

        Returns:
            A `keras_nlp.distribution.LayoutPlan`.
        """
        mesh = MeshShape.from_mesh(mesh)
        cls._check_axes(mesh, model_parallel_dim_name, data_parallel_dim_name)
        owner, config, preset = cls._config_for(
            instance, config, preset, "plan_layout"
        )
        if config is None:
            raise ValueError(
                f"{cls.__name__}.plan_layout needs a config: pass config= or "
                "preset=, or call it on a built backbone."
            )
        if lora_rank is not None:
            _check_lora_rank(lora_rank)
            config = {**config, "lora_rank": lora_rank}
            if lora_target_names is not None:
                config["lora_target_names"] = list(lora_target_names)
        rules = normalize_rules(owner._layout_rules(config), owner.__name__)
        return resolve_layout(
            rules,
            owner._abstract_variables(config),
            mesh,
            model_axis=model_parallel_dim_name,
            data_axis=data_parallel_dim_name,
            owner=owner.__name__,
            config=config,
            preset=preset,
            dtype=dtype,
            strict=strict,
        )

    @_class_or_instance_method
    def get_layout_map(
        cls,
        instance,
        device_mesh,
        model_parallel_dim_name="model",
        data_parallel_dim_name="batch",
        *,
        config=None,
        preset=None,
        strict=False,
    ):
        """Returns a `keras.distribution.LayoutMap` that fits the real shapes.

        Every weight of rank >= 2 gets a layout from the backbone's rules,
        resolved against the weight's real shape and the mesh's axis sizes.
        Weights are sharded on the model axis (tensor parallelism) and on
        the data axis (FSDP-style). When an axis does not divide a
        dimension, the rule's next alternative is tried; if none divides,
        that axis is dropped from the dimension (the weight is replicated
        along it) and the fallback is recorded in the plan. Attention heads
        are never split and head_dim is never sharded as a fallback. So
        Gemma 2B's single key/value head, kernel `(1, 2048, 256)`, is
        replicated on the model axis instead of crashing.

        Three ways to call it:
        - On the class with only a mesh: the map binds to the config of the
          backbone built inside the distribution's scope, before any variable
          is created, so one call serves every config.
        - On the class with `config=` or `preset=`: resolved now; inspect
          `layout_map.plan`.
        - On a built backbone: resolved now for its config.

        After a backbone is built under the map, every variable's real
        sharding is checked against the plan; any difference raises.

        Args:
            device_mesh: a `keras.distribution.DeviceMesh`.
            model_parallel_dim_name: str, the mesh axis that shards heads,
                MLP width and vocabulary. Defaults to `"model"`.
            data_parallel_dim_name: str, the mesh axis that shards the
                hidden dimension of weights (as in FSDP), or `None` to keep
                weights whole along it. Defaults to `"batch"`.
            config: dict, a config to resolve for now (class call only).
            preset: str, a built-in preset to resolve for now (class call
                only).
            strict: bool. If `True`, any fallback to replication raises a
                `ValueError` naming the weight, the dimension size and the
                axis sizes that would divide it.

        Returns:
            A `keras_nlp.distribution.BackboneLayoutMap` (a
            `keras.distribution.LayoutMap`); its `plan` attribute holds the
            `LayoutPlan` once resolved.

        Raises:
            ValueError: if `device_mesh` is not a `DeviceMesh`, an axis name
                is not in the mesh, both roles name the same axis, or
                (`strict=True`) a rule cannot be applied.

        Example:

        ```python
        import keras
        import keras_nlp

        devices = keras.distribution.list_devices()
        mesh = keras.distribution.DeviceMesh(
            (1, len(devices)), ("batch", "model"), devices
        )
        layout_map = keras_nlp.models.GemmaBackbone.get_layout_map(mesh)
        distribution = keras.distribution.ModelParallel(
            layout_map=layout_map, batch_dim_name="batch"
        )
        with distribution.scope():
            # Gemma 2B's shapes, cut to one block and a small vocabulary.
            backbone = keras_nlp.models.GemmaBackbone.from_preset(
                "gemma_2b_en",
                load_weights=False,
                num_layers=1,
                vocabulary_size=1024,
            )
        print(layout_map.plan.summary())
        ```
        """
        if not isinstance(device_mesh, keras.distribution.DeviceMesh):
            raise ValueError(
                "device_mesh must be a keras.distribution.DeviceMesh. "
                f"Received an object of type {type(device_mesh).__name__}: "
                f"{device_mesh!r}. Build one with keras.distribution."
                "DeviceMesh(shape, axis_names, devices); to plan without "
                "devices use plan_layout."
            )
        cls._check_axes(
            device_mesh, model_parallel_dim_name, data_parallel_dim_name
        )
        owner, config, preset = cls._config_for(
            instance, config, preset, "get_layout_map"
        )
        plan = None
        if config is not None:
            plan = owner.plan_layout(
                device_mesh,
                config=None if preset else config,
                preset=preset,
                model_parallel_dim_name=model_parallel_dim_name,
                data_parallel_dim_name=data_parallel_dim_name,
                strict=strict,
            )
        return BackboneLayoutMap(
            device_mesh,
            owner,
            model_axis=model_parallel_dim_name,
            data_axis=data_parallel_dim_name,
            strict=strict,
            plan=plan,
        )

    @property
    def layout_plan(self):
        """The `LayoutPlan` this backbone was built with, or `None`."""
        return getattr(self, "_layout_plan", None)
