"""Base class for every backbone in keras_nlp."""

import functools

import keras

from keras_nlp.distribution.activations import batch_size_scope
from keras_nlp.distribution.backbone_planner import plan_backbone_layout
from keras_nlp.distribution.backbone_planner import quantized_config
from keras_nlp.distribution.cost import DEFAULT_TOKENS_PER_STEP
from keras_nlp.distribution.devices import device_profile
from keras_nlp.distribution.layout_map import BackboneLayoutMap
from keras_nlp.distribution.quantizable import parse_quantized_dtype
from keras_nlp.distribution.request import PlanRequest
from keras_nlp.layers.remat import RematBoundary
from keras_nlp.models.construction import backbone_constructor
from keras_nlp.models.lora import LoraMixin
from keras_nlp.models.lora import check_lora_rank
from keras_nlp.models.quantization import QuantizationMixin
from keras_nlp.saving.backbone_presets import PresetMixin
from keras_nlp.saving.registry import register_backbone


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


def serialize_dtype_policy(policy):
    """`keras.dtype_policies.serialize(policy)`, without importing TensorFlow.

    Keras's generic serializer tests for TensorFlow types first, which
    imports TensorFlow when it is installed (its start-up messages appear
    in a JAX program). A plain `DTypePolicy`, the one kind a preset holds,
    is written here as Keras writes it.
    """
    if type(policy) is keras.DTypePolicy:
        return {
            "module": "keras",
            "class_name": "DTypePolicy",
            "config": policy.get_config(),
            "registered_name": None,
        }
    return keras.dtype_policies.serialize(policy)


def serialize_backbone(backbone):
    """`keras.saving.serialize_keras_object(backbone)`, without importing
    TensorFlow (see `serialize_dtype_policy`): the same fields, which
    `keras.saving.deserialize_keras_object` reads back."""
    serialized = {
        "module": type(backbone).__module__,
        "class_name": type(backbone).__name__,
        "config": backbone.get_config(),
        "registered_name": keras.saving.get_registered_name(type(backbone)),
    }
    build_config = backbone.get_build_config()
    if build_config is not None:
        serialized["build_config"] = build_config
    compile_config = backbone.get_compile_config()
    if compile_config is not None:
        serialized["compile_config"] = compile_config
    return serialized


def _device_cost_model(device):
    """The cost model of `device` (a name or `DeviceProfile`), or `None`
    for the default."""
    if device is None:
        return None
    return device_profile(device).cost_model()


class BackboneTaskConfig(RematBoundary):
    """`get_config` / `from_config` of a task: its backbone, serialized,
    and the arguments its head adds (`head_config()`), a mixin of
    `keras.Model` (every task here).

    A preprocessor that is a Keras layer (keras-hub's) is stored as
    keras-hub stores it: its config here, its vocabulary as the `.keras`
    file's assets, so a reloaded task takes text again. Ours (tokenizer
    files read on the host) is not: presets keep the tokenizer's files.
    """

    def head_config(self):
        """The constructor arguments the task adds to its backbone."""
        return {}

    def get_config(self):
        config = {
            "backbone": serialize_backbone(self.backbone),
            **self.head_config(),
            "name": self.name,
            "trainable": self.trainable,
        }
        preprocessor = getattr(self, "preprocessor", None)
        if isinstance(preprocessor, keras.layers.Layer):
            config["preprocessor"] = keras.saving.serialize_keras_object(
                preprocessor
            )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        for key in ("backbone", "preprocessor"):
            if isinstance(config.get(key), dict):
                config[key] = keras.saving.deserialize_keras_object(config[key])
        return cls(**config)


class Backbone(
    RematBoundary, QuantizationMixin, LoraMixin, PresetMixin, keras.Model
):
    """Base class of all backbones: a functional `keras.Model`.

    A subclass builds its layers in `__init__` and wires a functional graph
    (`keras_nlp.models.decoder` has the shared decoder stacks). Its
    constructor arguments are recorded when it is called: they are the
    config (`get_config`) and the backbone's attributes, so a subclass
    writes each argument once, in its signature and docstring. For model
    parallelism it adds one static method, `_layout_rules(config)`,
    returning a short list of `(regex, spec)` pairs (see
    `keras_nlp.distribution`). Everything else about sharding (validation,
    shape checks, fallbacks, plans, verification) lives in
    `keras_nlp.distribution`; presets on disk in `keras_nlp.saving`; LoRA
    in `keras_nlp.models.lora`.

    Attributes:
        presets: dict of preset name -> config (constructor arguments) of
            the built-in presets of the class.
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is not None and not getattr(
            init, "is_backbone_constructor", False
        ):
            cls.__init__ = backbone_constructor(init)
        register_backbone(cls)

    # === Config ===

    # Whether the residual stream is one sequence as long as `token_ids`, so
    # sequence and context parallelism know the length they split (not
    # where image tokens join it, nor an encoder-decoder's two lengths).
    sequence_splittable = True

    def call(self, inputs, training=None, mask=None, **kwargs):
        # The layout map pins activations' batch dimension to the batch
        # axes only where they divide this call's batch, and splits the
        # sequence only where the model axis divides `token_ids`' length.
        # (Keras passes `training` only to a `call` that names it.)
        first = keras.tree.flatten(inputs)[0]
        batch_size = first.shape[0] if len(first.shape) else None
        token_ids = (
            inputs.get("token_ids") if isinstance(inputs, dict) else None
        )
        sequence_length = None
        if token_ids is not None and len(token_ids.shape) == 2:
            sequence_length = token_ids.shape[1]
        with batch_size_scope(batch_size, sequence_length):
            return super().call(inputs, training=training, mask=mask, **kwargs)

    def compute_output_spec(self, inputs, training=None, mask=None):
        """The outputs' `KerasTensor`s for `inputs` (arrays or specs)."""

        # Keras reads the shapes a layer's `compute_output_shape` gets from
        # tensors only: a NumPy input would reach the first layers as
        # `None`. Symbolic inputs of the same shapes and dtypes reach them
        # whole.
        def symbolic(value):
            if isinstance(value, keras.KerasTensor) or not hasattr(
                value, "shape"
            ):
                return value
            return keras.KerasTensor(value.shape, dtype=value.dtype)

        inputs = keras.tree.map_structure(symbolic, inputs)
        return super().compute_output_spec(inputs, training, mask)

    def get_config(self):
        """The constructor arguments this backbone was built with."""
        config = {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": serialize_dtype_policy(self._quantized_dtype_policy()),
        }
        for key, value in self._constructor_config.items():
            config.setdefault(key, value)
        config.update(self.lora_config())
        return config

    def _quantized_dtype_policy(self):
        """The backbone's dtype policy, or once layers are quantized, a
        `DTypePolicyMap` of their policies by layer path (as keras-hub
        writes quantized presets), so that the config builds them
        quantized."""
        policy = self.dtype_policy
        quantized = {
            layer.path: layer.dtype_policy
            for layer in self._flatten_layers(include_self=False)
            if getattr(layer, "quantization_mode", None) is not None
        }
        if not quantized or isinstance(
            policy, keras.dtype_policies.DTypePolicyMap
        ):
            return policy
        return keras.dtype_policies.DTypePolicyMap(
            default_policy=policy, policy_map=quantized
        )

    @classmethod
    def from_config(cls, config, verify_layout=True):
        """Builds the backbone of a config from `get_config`.

        Args:
            config: dict of constructor arguments.
            verify_layout: bool. `False` builds without checking the
                variables' sharding against the layout plan (for a loader
                that creates the variables' values later and checks then).
        """
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        if verify_layout:
            return cls(**config)
        return cls(**config, verify_layout=False)

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
        expert_parallel_dim_name=None,
        fsdp_dim_name=None,
        strict=False,
        policy="auto",
        tokens_per_step=DEFAULT_TOKENS_PER_STEP,
        dtype=None,
        lora_rank=None,
        lora_target_names=None,
        device=None,
        quantize=None,
        sequence_parallel="auto",
        context_parallel_dim_name=None,
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
            expert_parallel_dim_name: mesh axis for the `EXPERT` role, as in
                `get_layout_map`.
            fsdp_dim_name: mesh axis that shards weights FSDP-style, as in
                `get_layout_map`.
            strict: bool. Raise instead of falling back to replication.
            policy: `"auto"`, `"memory"` or `"communication"`, as in
                `get_layout_map`.
            tokens_per_step: int, as in `get_layout_map`.
            dtype: str, optional dtype to count bytes in (e.g.
                `"bfloat16"`); defaults to each variable's dtype.
            lora_rank: int, optional: plan with LoRA adapters of this rank
                (their layouts derive from their kernels').
            lora_target_names: optional list of layer names for the
                adapters; defaults to the class's `lora_target_names`.
            device: optional, as in `get_layout_map`.
            quantize: optional `"int8"`, `"int4"` (`"int4/64"`: groups of
                64 rows, `"int4/-1"`: per channel) or `"float8"`: plan
                the backbone as `quantize(mode)` would leave it, every
                quantized kernel in its stored dtype with its scales.
            sequence_parallel: `"auto"`, `True` or `False`, as in
                `get_layout_map`.
            context_parallel_dim_name: mesh axis that splits the sequence,
                as in `get_layout_map`.

        Returns:
            A `keras_nlp.distribution.LayoutPlan`.
        """
        request = PlanRequest.from_arguments(
            mesh,
            model_parallel_dim_name=model_parallel_dim_name,
            data_parallel_dim_name=data_parallel_dim_name,
            expert_parallel_dim_name=expert_parallel_dim_name,
            fsdp_dim_name=fsdp_dim_name,
            strict=strict,
            policy=policy,
            tokens_per_step=tokens_per_step,
            dtype=dtype,
            cost_model=_device_cost_model(device),
            sequence_parallel=sequence_parallel,
            context_parallel_dim_name=context_parallel_dim_name,
        )
        owner, config, preset = cls._class_and_config(
            instance, config, preset, "plan_layout"
        )
        if config is None:
            raise ValueError(
                f"{cls.__name__}.plan_layout needs a config: pass config= or "
                "preset=, or call it on a built backbone."
            )
        if lora_rank is not None:
            check_lora_rank(lora_rank)
            config = {**config, "lora_rank": lora_rank}
            if lora_target_names is not None:
                config["lora_target_names"] = list(lora_target_names)
        if quantize is not None:
            mode, block_size, _ = parse_quantized_dtype(quantize)
            if mode is None:
                raise ValueError(
                    f"quantize={quantize!r} is not a quantization mode: use "
                    "'int8', 'int4' (or 'int4/<group size>') or 'float8'."
                )
            config = quantized_config(owner, config, mode, block_size)
        return plan_backbone_layout(owner, config, request, preset=preset)

    @_class_or_instance_method
    def get_layout_map(
        cls,
        instance,
        device_mesh,
        model_parallel_dim_name="model",
        data_parallel_dim_name="batch",
        *,
        expert_parallel_dim_name=None,
        fsdp_dim_name=None,
        config=None,
        preset=None,
        strict=False,
        policy="auto",
        tokens_per_step=DEFAULT_TOKENS_PER_STEP,
        device=None,
        sequence_parallel="auto",
        context_parallel_dim_name=None,
    ):
        """Returns a `keras.distribution.LayoutMap` that fits the real shapes.

        Every weight of rank >= 2 gets a layout from the backbone's rules,
        resolved against its real shape and the mesh's axis sizes. Where an
        axis does not divide a dimension, the rule's next alternative is
        tried; if none divides, `policy` decides by estimated cost whether
        the weight is replicated along that axis or the axis shards another
        dimension the rule names (the plan records every candidate). Heads
        are never split: Gemma 2B's single key/value head, kernel
        `(1, 2048, 256)`, is replicated on the model axis instead.

        Called on the class with only a mesh, the map binds to whatever
        backbone is built in the distribution's scope, before it creates a
        variable; with `config=`, `preset=` or on a built backbone, it is
        resolved now. Every built variable's sharding is then checked.

        Args:
            device_mesh: a `keras.distribution.DeviceMesh`.
            model_parallel_dim_name: str, the mesh axis that shards heads,
                MLP width and vocabulary. Defaults to `"model"`.
            data_parallel_dim_name: str, the mesh axis that shards the
                hidden dimension of weights (as in FSDP), or `None` to keep
                weights whole along it. Defaults to `"batch"`.
            expert_parallel_dim_name: str, the mesh axis that shards the
                experts of mixture-of-experts weights; weights without
                experts shard their hidden dimension over it too. Defaults
                to `None`: the mesh's `"expert"` axis if it has one, else
                the model axis.
            fsdp_dim_name: str, a mesh axis that shards weights FSDP-style
                in place of the data axis, which then holds whole replicas
                (a `("data", "fsdp", "model")` mesh; split the batch over
                both with `keras_nlp.distribution.ModelParallel(...,
                batch_dim_name=("data", "fsdp"))`). Defaults to `None`.
            config: dict, a config to resolve for now (class call only).
            preset: str, a preset to resolve for now (class call only).
            strict: bool. If `True`, any fallback to replication raises,
                naming the weight and the axis sizes that would divide it;
                so does an expert axis that does not divide the experts.
            policy: `"auto"` (the lowest estimated step time, the default),
                `"memory"` (the fewest bytes per device, with gradients and
                Adam state) or `"communication"` (the fewest collective
                bytes per step); see `keras_nlp.distribution.cost`.
            tokens_per_step: int, the tokens of one training step over all
                devices, which activation collectives scale with. Defaults
                to `8 * 2048` (8 sequences of 2048 tokens).
            device: optional, the accelerator the plan is for: a name of
                `keras_nlp.distribution.DEVICE_PROFILES` (`"h100-80gb"`,
                `"l4-24gb"`, `"tpu-v5e"`, ...) or a `DeviceProfile`. The
                cost model then uses its memory and link bandwidths (the
                default is an H100-class device).
            sequence_parallel: `"auto"` (the default), `True` or `False`:
                split the residual stream over the sequence on the model
                axis between the tensor-parallel projections (Megatron's
                sequence parallelism: each all-reduce becomes a
                reduce-scatter and an all-gather, the same link bytes, and
                norms and residual adds hold 1/model of the tokens). It
                applies to calls whose `token_ids` length the model axis
                divides. `"auto"` turns it on under `policy="memory"`; the
                plan says why (`plan.sequence_parallel`).
            context_parallel_dim_name: str, a mesh axis that splits the
                sequence of every activation (context parallelism): each
                device computes its own tokens, and each attention gathers
                the keys and values over it (an all-gather), so causal and
                sliding-window masks, soft caps, ALiBi and left padding
                stay exact. Weights shard FSDP-style over it; decoders'
                caches split their length over it. Defaults to `None`:
                the mesh's `"context"` axis if it has one.

        Returns:
            A `keras_nlp.distribution.BackboneLayoutMap` (a Keras
            `LayoutMap`); its `plan` holds the `LayoutPlan` once resolved.

        Raises:
            ValueError: if `device_mesh` is not a `DeviceMesh`, an axis name
                is not in the mesh, two roles name the same axis, or
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
        request = PlanRequest.from_arguments(
            device_mesh,
            model_parallel_dim_name=model_parallel_dim_name,
            data_parallel_dim_name=data_parallel_dim_name,
            expert_parallel_dim_name=expert_parallel_dim_name,
            fsdp_dim_name=fsdp_dim_name,
            strict=strict,
            policy=policy,
            tokens_per_step=tokens_per_step,
            cost_model=_device_cost_model(device),
            sequence_parallel=sequence_parallel,
            context_parallel_dim_name=context_parallel_dim_name,
        )
        owner, config, preset = cls._class_and_config(
            instance, config, preset, "get_layout_map"
        )
        plan = None
        if config is not None:
            plan = plan_backbone_layout(owner, config, request, preset=preset)
        return BackboneLayoutMap(device_mesh, owner, request, plan=plan)

    @property
    def layout_plan(self):
        """The `LayoutPlan` this backbone was built with, or `None`."""
        return getattr(self, "_layout_plan", None)
