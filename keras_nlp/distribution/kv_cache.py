"""Layouts of the key/value caches of cached decoding.

Each self-attention of a decoder keeps its keys and values in one cache
`(batch, 2, max_length, kv_heads, head_dim)` while it generates: for long
generations the largest tensor there is. A cache holds what the attention's
key and value projections output, so it takes their layout from the same
plan and roles as the weights:

- `kv_heads` (and `head_dim`) go on the axes the key kernel has them on,
  when those are model (tensor-parallel) axes: each device keeps the keys
  and values of its own heads, and no cache entry moves while decoding;
- where the key kernel's heads fall back to being whole (one KV head on a
  model axis of 2, as in Gemma 2B), every device computes all keys and
  values, but keeps only a slice of the positions: the cache's length is
  split over that axis when it divides the cache length (else the cache
  is whole there). Decoding then scores each device's positions and XLA
  combines the softmax statistics (its maximum and sum) and the weighted
  values across the axis, the log-sum-exp combine of flash-decoding, a
  few values per head and token against a whole cache per device;
- the batch goes on the batch axes (data, and fsdp if any) when they
  divide the batch being generated, else it stays whole;
- axes that shard weights only for FSDP or experts never shard a cache.

The plan records one `CachePlan` per attention (`LayoutPlan.kv_caches`);
`cache_spec` resolves it for a batch size, and `verify_cache_layouts`
checks caches against the plan (`keras_nlp.distribution.array_placement`
allocates them).
"""

import dataclasses
import math

from keras_nlp.distribution.activations import FREE
from keras_nlp.distribution.rules import entry_axes
from keras_nlp.distribution.rules import format_spec

# The dimensions of one attention's cache.
CACHE_DIMS = ("batch", "keys_and_values", "sequence", "kv_heads", "head_dim")


@dataclasses.dataclass(frozen=True)
class AttentionCache:
    """What the plan needs to know about one attention's cache.

    Attributes:
        path: the cache's name, `<attention layer path>/cache`.
        key_kernel: the path of the kernel the cache follows (the key
            projection's, or a fused query/key/value kernel's).
        kernel_letters: the key kernel's dimensions as letters: `k` its
            kv heads, `h` its head_dim (when the cache follows it), `.`
            any other (`"dkh"`, `".k."`).
        kv_heads: number of key/value heads.
        head_dim: size of each head.
        keys_and_values: the cache's second dimension: 2 (keys, values),
            or 1 for a cache of one latent (DeepSeek-V3's MLA).
    """

    path: str
    key_kernel: str
    kernel_letters: str
    kv_heads: int
    head_dim: int
    keys_and_values: int = 2


@dataclasses.dataclass(frozen=True)
class CachePlan:
    """The layout of one attention's key/value cache.

    Attributes:
        path: `<attention layer path>/cache`.
        kv_heads: number of key/value heads.
        head_dim: size of each head.
        spec: per dimension of `CACHE_DIMS`: `FREE` (the batch, on the
            batch axes when they divide it), `None` (whole) or mesh axes.
        reason: why, in words.
        length_axes: model axes the cache's length is split over when they
            divide it (the heads being whole on them), else `()`.
        keys_and_values: the cache's second dimension (see
            `AttentionCache`).
    """

    path: str
    kv_heads: int
    head_dim: int
    spec: tuple
    reason: str
    length_axes: tuple = ()
    keys_and_values: int = 2

    def shape(self, batch_size, max_length):
        """The cache's shape for a batch and a cache length."""
        return (
            batch_size,
            self.keys_and_values,
            max_length,
            self.kv_heads,
            self.head_dim,
        )


def describe_caches(model):
    """The `AttentionCache`s of a (possibly abstract) built decoder backbone.

    A backbone has caches when it keeps a `decoder_stack` (see
    `keras_nlp.models.decoder.DecoderStack`): one per block's attention.
    A block whose `attention` is `None` (Qwen 3.5's linear attention,
    whose state has a fixed size) has none.
    """
    stack = getattr(model, "decoder_stack", None)
    if stack is None:
        return ()
    found = []
    for block in stack.blocks:
        attention = block.attention
        if attention is None:
            continue
        dense, heads_letter, head_dim_letter = attention.cache_kernel()
        kernel = getattr(dense, "_kernel", None)
        if kernel is None or attention.path is None:
            continue
        _, rest = dense.equation.split(",")
        # Only the heads (and head_dim) letters are followed.
        kernel_letters = "".join(
            {heads_letter: "k", head_dim_letter: "h"}.get(letter, ".")
            for letter in rest.split("->")[0]
        )
        shape = attention.cache_shape(1, 1)
        found.append(
            AttentionCache(
                path=f"{attention.path}/cache",
                key_kernel=kernel.path,
                kernel_letters=kernel_letters,
                kv_heads=shape[3],
                head_dim=shape[4],
                keys_and_values=shape[1],
            )
        )
    return tuple(found)


def plan_kv_caches(
    caches,
    weights,
    *,
    model_axes,
    batch_axes,
    split_length=False,
    context_axes=(),
):
    """One `CachePlan` per `AttentionCache`, from its key kernel's layout.

    Args:
        caches: `AttentionCache`s from `describe_caches`.
        weights: the `WeightPlan`s of the same backbone.
        model_axes: the tensor-parallel mesh axes; only they shard a cache's
            heads.
        batch_axes: the mesh axes that split the batch.
        split_length: bool, whether a cache whose heads are whole on the
            model axes has its length split over them instead (decoders'
            self-attention caches).
        context_axes: mesh axes that split the sequence (context
            parallelism): a cache's length splits over them first, as the
            tokens that filled it did.

    Returns:
        A tuple of `CachePlan`.
    """
    by_path = {weight.path: weight for weight in weights}
    model_axes = set(a for a in model_axes if a)
    planned = []
    for cache in caches:
        weight = by_path.get(cache.key_kernel)
        if weight is None:
            continue
        # The key kernel's `k` (kv heads) and `h` (head_dim) letters.
        entries = dict(zip(cache.kernel_letters, weight.spec, strict=True))
        heads, head_dim = (
            _model_only(entries.get(letter), model_axes, batch_axes)
            for letter in ("k", "h")
        )
        spec = (FREE, None, None, heads, head_dim)
        length_axes = tuple(a for a in context_axes if a)
        if heads or head_dim:
            reason = (
                ", ".join(
                    f"{name} on " + ", ".join(f"'{a}'" for a in entry_axes(e))
                    for name, e in (("kv heads", heads), ("head_dim", head_dim))
                    if e
                )
                + f", as the key kernel {weight.path}'s"
            )
        else:
            reason = (
                "kv heads whole on every device, as in the key kernel "
                f"{weight.path} ({weight.reason.split(';')[0]})"
            )
            if split_length and model_axes:
                length_axes += tuple(sorted(model_axes))
        if length_axes:
            reason += (
                "; the length split over "
                + ", ".join(f"'{a}'" for a in length_axes)
                + " when that divides it (each device keeps a slice "
                "of every head's positions; decoding combines the "
                "softmax statistics across it)"
            )
        planned.append(
            CachePlan(
                path=cache.path,
                kv_heads=cache.kv_heads,
                head_dim=cache.head_dim,
                spec=spec,
                reason=reason + "; batch on the batch axes when they divide it",
                length_axes=length_axes,
                keys_and_values=cache.keys_and_values,
            )
        )
    return tuple(planned)


def _model_only(entry, model_axes, batch_axes):
    """`entry` when all its axes are model axes, else `None` (whole)."""
    if entry is None:
        return None
    axes = [a for a in entry_axes(entry) if a not in batch_axes]
    if not axes or not set(axes) <= model_axes:
        return None
    return axes[0] if len(axes) == 1 else tuple(axes)


def cache_spec(plan, batch_size, mesh_sizes, batch_axes, max_length=None):
    """A `CachePlan`'s spec for one batch size and cache length.

    The batch goes on `batch_axes` when their product divides
    `batch_size`, else it stays whole (`None`); the length on the plan's
    `length_axes`: the longest leading run of them whose product divides
    `max_length` (given).
    """
    shards = 1
    for axis in batch_axes:
        shards *= mesh_sizes[axis]
    batch = None
    if batch_axes and batch_size % shards == 0:
        batch = batch_axes[0] if len(batch_axes) == 1 else tuple(batch_axes)
    spec = [batch if entry == FREE else entry for entry in plan.spec]
    axes = tuple(a for a in plan.length_axes if mesh_sizes.get(a, 1) > 1)
    # The longest leading run of them whose product divides the length.
    while axes and not (
        max_length is not None
        and max_length % math.prod(mesh_sizes[a] for a in axes) == 0
    ):
        axes = axes[:-1]
    if axes:
        spec[CACHE_DIMS.index("sequence")] = axes[0] if len(axes) == 1 else axes
    return tuple(spec)


def cache_bytes_per_device(
    plan, batch_size, max_length, mesh_sizes, batch_axes, itemsize
):
    """Bytes of one cache on each device, and the ideal (an even split).

    Args:
        plan: a `CachePlan`.
        batch_size, max_length: the cache's batch and length.
        mesh_sizes: dict of mesh axis name -> size.
        batch_axes: the mesh axes that split the batch.
        itemsize: bytes per element of the cache's dtype.

    Returns:
        `(per_device, ideal)`: the shard's bytes, and the whole cache's
        bytes over the number of devices.
    """
    spec = cache_spec(plan, batch_size, mesh_sizes, batch_axes, max_length)
    total = itemsize
    for size in plan.shape(batch_size, max_length):
        total *= size
    shards = 1
    for entry in spec:
        for axis in entry_axes(entry) if entry else ():
            shards *= mesh_sizes[axis]
    devices = 1
    for size in mesh_sizes.values():
        devices *= size
    return total / shards, total / devices


def verify_cache_layouts(caches, plans, specs, device_mesh):
    """Raises unless every cache array is laid out as its plan says.

    Args:
        caches: the cache arrays (JAX), one per plan, in order.
        plans: the `CachePlan`s.
        specs: each plan's spec for the caches' batch size (see
            `cache_spec`).
        device_mesh: the `keras.distribution.DeviceMesh` they live on.

    Raises:
        ValueError: listing every cache whose sharding differs.
    """
    import jax

    problems = []
    for cache, plan, spec in zip(caches, plans, specs, strict=True):
        expected = jax.sharding.NamedSharding(
            device_mesh.backend_mesh, jax.sharding.PartitionSpec(*spec)
        )
        actual = getattr(cache, "sharding", None)
        if actual is None or not actual.is_equivalent_to(
            expected, len(cache.shape)
        ):
            problems.append(
                f"{plan.path}: planned {format_spec(tuple(spec))}, got "
                f"{getattr(actual, 'spec', actual)}"
            )
    if problems:
        raise ValueError(
            "Key/value caches are not laid out as planned:\n  - "
            + "\n  - ".join(problems)
        )
