"""Scaled-down configs and a sharded training step, shared by benchmarks.

Used by `collectives.py` and `step_time.py`. Each config keeps its model's
real query:key/value head counts (so the same heads divide, or fail to
divide, an 8-way model axis as in the full-size model) at a size that
compiles in seconds on CPU. Import it after `setup_devices()` has run, or
after JAX was already given 8 devices.
"""

import functools
import math
import os

BATCH = 8
SEQUENCE = 64
MESHES = [(1, 8), (2, 4)]
AXES = ("batch", "model")
# Three sizes: experts get their own axis between batch and model for the
# mixture-of-experts configs; the others get a replica axis, an FSDP axis
# and the model axis (the batch splits over data and fsdp).
EXPERT_AXES = ("batch", "expert", "model")
FSDP_AXES = ("data", "fsdp", "model")

# name -> (class name, config). The class name is the same in keras_nlp and
# keras_hub; the configs are valid for both.
CONFIGS = {
    "gemma-2b-like (8q:1kv)": (
        "GemmaBackbone",
        dict(
            vocabulary_size=2048,
            num_layers=2,
            num_query_heads=8,
            num_key_value_heads=1,
            hidden_dim=256,
            intermediate_dim=1024,
            head_dim=32,
        ),
    ),
    "llama3-8b-like (32q:8kv)": (
        "Llama3Backbone",
        dict(
            vocabulary_size=2048,
            num_layers=2,
            num_query_heads=32,
            num_key_value_heads=8,
            hidden_dim=512,
            intermediate_dim=1024,
        ),
    ),
    "gpt2-like (12:12)": (
        "GPT2Backbone",
        dict(
            vocabulary_size=2048,
            num_layers=2,
            num_heads=12,
            hidden_dim=384,
            intermediate_dim=1536,
            dropout=0.0,
            max_sequence_length=SEQUENCE,
        ),
    ),
    "mixtral-like (8 experts top-2, 32q:8kv)": (
        "MixtralBackbone",
        dict(
            vocabulary_size=2048,
            num_layers=2,
            num_query_heads=32,
            num_key_value_heads=8,
            hidden_dim=512,
            intermediate_dim=256,
            num_experts=8,
            top_k=2,
        ),
    ),
    "qwen3-moe-like (16 experts top-4, 32q:4kv)": (
        "Qwen3MoeBackbone",
        dict(
            vocabulary_size=2048,
            num_layers=2,
            num_query_heads=32,
            num_key_value_heads=4,
            head_dim=32,
            hidden_dim=512,
            intermediate_dim=1024,
            moe_intermediate_dim=128,
            num_experts=16,
            top_k=4,
        ),
    ),
}


def setup_devices(count=8):
    """Asks for `count` fake CPU devices; call before importing JAX."""
    os.environ.setdefault("KERAS_BACKEND", "jax")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    flag = f"--xla_force_host_platform_device_count={count}"
    if flag not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}"


def mesh_name(shape):
    return "x".join(str(size) for size in shape)


def device_mesh(shape, experts=True):
    """A mesh of `shape`: `(batch, model)`, or three axes (see above)."""
    import keras

    devices = keras.distribution.list_devices()
    count = math.prod(shape)
    if len(devices) < count:
        raise RuntimeError(
            f"Mesh {mesh_name(shape)} needs {count} devices, found "
            f"{len(devices)}. Set XLA_FLAGS=--xla_force_host_platform_"
            "device_count=8 before JAX is imported."
        )
    axes = AXES
    if len(shape) == 3:
        axes = EXPERT_AXES if experts else FSDP_AXES
    return keras.distribution.DeviceMesh(shape, axes, devices[:count])


def batch_axes(mesh):
    """The mesh axes that split the batch."""
    if tuple(mesh.axis_names) == FSDP_AXES:
        return ("data", "fsdp")
    return (mesh.axis_names[0],)


def our_layout_map(cls, config, mesh, before=False):
    """Our layout map on `mesh`; `before` the communication work of issue 17.

    `before=True` is the map as it was: replication wherever heads do not
    divide (`policy="communication"`) and no activation layouts (pair it
    with `Step(..., fused=False)` for separate q/k/v and gate/up matmuls).
    """
    import dataclasses

    roles = {}
    if tuple(mesh.axis_names) == FSDP_AXES:
        roles = dict(data_parallel_dim_name="data", fsdp_dim_name="fsdp")
    if not before:
        return cls.get_layout_map(mesh, config=config, **roles)
    layout_map = cls.get_layout_map(
        mesh, config=config, policy="communication", **roles
    )
    layout_map._install(dataclasses.replace(layout_map.plan, activations=()))
    return layout_map


def our_class(class_name):
    import keras_nlp

    return getattr(keras_nlp.models, class_name)


def hub_class(class_name):
    import keras_hub

    return getattr(keras_hub.models, class_name)


def build(cls, config, layout_map=None):
    """Builds `cls(**config)` under `ModelParallel(layout_map)`, or plainly.

    Returns:
        `(backbone, distribution)`; `distribution` is `None` without a map.
    """
    import keras

    import keras_nlp

    keras.utils.set_random_seed(0)
    if layout_map is None:
        return cls(**config), None
    distribution = keras_nlp.distribution.ModelParallel(
        layout_map=layout_map,
        batch_dim_name=batch_axes(layout_map.device_mesh),
    )
    with distribution.scope():
        backbone = cls(**config)
    return backbone, distribution


@functools.cache
def _multi_axis_layout():
    import keras

    class MultiAxisLayout(keras.distribution.TensorLayout):
        """A `TensorLayout` that may put several mesh axes on one dim."""

        # Keras validates single axis names only; JAX takes tuples too.
        def _validate_axes(self):
            pass

    return MultiAxisLayout


def alternative_layout_map(cls, config, mesh):
    """Our map, but head-fallback weights shard their hidden dim on 'model'.

    Every weight our plan replicated along the model axis because its heads
    do not divide it (Gemma 2B's single key/value head, GPT-2's 12 heads on
    8) gets the model axis added to its hidden dimension instead (next to
    the data axis if that is there). Weights without a hidden dimension
    (biases) stay as planned.

    Returns:
        `(layout_map, changed_paths)`; `layout_map` is a plain
        `keras.distribution.LayoutMap` keyed by exact variable paths.
    """
    import keras

    plan = cls.plan_layout(mesh, config=config)
    hidden = config["hidden_dim"]
    layout_map = keras.distribution.LayoutMap(mesh)
    changed = []
    for weight in plan.weights:
        spec = list(weight.spec)
        held_back = weight.decision == "fallback" and "heads" in weight.reason
        if held_back and hidden in weight.shape:
            dim = weight.shape.index(hidden)
            axes = spec[dim]
            axes = () if axes is None else axes
            axes = (axes,) if isinstance(axes, str) else tuple(axes)
            axes = axes + ("model",)
            spec[dim] = axes[0] if len(axes) == 1 else axes
            changed.append(weight.path)
        layout_map[weight.path] = _multi_axis_layout()(tuple(spec))
    return layout_map, changed


def inputs(vocabulary_size, sharding=None):
    """Fixed token ids and a full padding mask, `(BATCH, SEQUENCE)`."""
    import jax
    import numpy as np

    rng = np.random.default_rng(0)
    token_ids = rng.integers(0, vocabulary_size, (BATCH, SEQUENCE))
    token_ids = token_ids.astype("int32")
    padding_mask = np.ones((BATCH, SEQUENCE), "int32")
    if sharding is None:
        return jax.numpy.asarray(token_ids), jax.numpy.asarray(padding_mask)
    return (
        jax.device_put(token_ids, sharding),
        jax.device_put(padding_mask, sharding),
    )


def _output_embedding(backbone):
    """Index of the vocabulary projection among trainable variables."""
    paths = [variable.path for variable in backbone.trainable_variables]
    for suffix, transposed in (
        ("token_embedding/reverse_embeddings", True),
        ("token_embedding/embeddings", False),
    ):
        if suffix in paths:
            return paths.index(suffix), transposed
    raise ValueError(f"No token embedding among {paths[:5]}...")


class Step:
    """Jitted forward pass and training step of a (possibly sharded) backbone.

    The training step returns the next-token cross-entropy (logits through
    the token embedding, or the untied output embedding) and its gradient
    with respect to every trainable variable, each gradient sharded like its
    variable. Inputs are sharded on the mesh's batch axis.

    Attributes:
        forward: jitted `(trainable, non_trainable, token_ids, mask)` ->
            final hidden states, sharded on batch only.
        train: jitted `(trainable, non_trainable, token_ids, mask)` ->
            `(loss, gradients)`.
        args: the concrete arguments both take.
        fused: whether q/k/v and gate/up run as one matmul where sharded
            (see `keras_nlp.layers.fused_projection`).
        param_bytes_per_device: parameter bytes held by one device.
    """

    def __init__(self, backbone, distribution=None, fused=True):
        import jax
        import jax.numpy as jnp
        import numpy as np

        self.backbone = backbone
        self.distribution = distribution
        self.fused = fused
        trainable = [v.value for v in backbone.trainable_variables]
        non_trainable = [v.value for v in backbone.non_trainable_variables]
        vocabulary_size = backbone.get_config()["vocabulary_size"]
        index, transposed = _output_embedding(backbone)

        def loss_fn(trainable, non_trainable, token_ids, padding_mask):
            hidden, _ = backbone.stateless_call(
                trainable,
                non_trainable,
                {"token_ids": token_ids, "padding_mask": padding_mask},
            )
            embedding = trainable[index]
            pattern = "bsh,hv->bsv" if transposed else "bsh,vh->bsv"
            logits = jnp.einsum(pattern, hidden[:, :-1], embedding)
            log_probs = jax.nn.log_softmax(logits.astype("float32"), axis=-1)
            labels = token_ids[:, 1:, None]
            return -jnp.take_along_axis(log_probs, labels, axis=-1).mean()

        def forward_fn(trainable, non_trainable, token_ids, padding_mask):
            hidden, _ = backbone.stateless_call(
                trainable,
                non_trainable,
                {"token_ids": token_ids, "padding_mask": padding_mask},
            )
            return hidden

        grad_fn = jax.value_and_grad(loss_fn)
        if distribution is None:
            self.forward = jax.jit(forward_fn)
            self.train = jax.jit(grad_fn)
            self.args = (trainable, non_trainable, *inputs(vocabulary_size))
        else:
            P = jax.sharding.PartitionSpec
            mesh = trainable[index].sharding.mesh
            data = jax.sharding.NamedSharding(
                mesh, P(batch_axes(distribution.device_mesh))
            )
            replicated = jax.sharding.NamedSharding(mesh, P())
            t_shardings = [value.sharding for value in trainable]
            n_shardings = [value.sharding for value in non_trainable]
            in_shardings = (t_shardings, n_shardings, data, data)
            self.forward = jax.jit(
                forward_fn, in_shardings=in_shardings, out_shardings=data
            )
            self.train = jax.jit(
                grad_fn,
                in_shardings=in_shardings,
                out_shardings=(replicated, t_shardings),
            )
            self.args = (
                trainable,
                non_trainable,
                *inputs(vocabulary_size, data),
            )
        self.param_bytes_per_device = sum(
            int(np.prod(value.sharding.shard_shape(value.shape)))
            * value.dtype.itemsize
            for value in trainable + non_trainable
        )

    def _traced(self, function):
        import contextlib

        from keras_nlp.layers.fused_projection import separate_projections

        fusion = (
            contextlib.nullcontext() if self.fused else (separate_projections())
        )
        if self.distribution is None:
            with fusion:
                return function()
        with self.distribution.scope(), fusion:
            return function()

    def compiled_text(self, kind):
        """Compiled (partitioned) HLO text of `"forward"` or `"train"`."""
        jitted = self.forward if kind == "forward" else self.train
        return self._traced(
            lambda: jitted.lower(*self.args).compile().as_text()
        )

    def run_train(self):
        """One training step, waited for; returns the loss."""
        import jax

        loss, grads = self._traced(lambda: self.train(*self.args))
        jax.block_until_ready(grads)
        return float(loss)
