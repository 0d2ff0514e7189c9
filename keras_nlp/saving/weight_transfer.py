"""Weight values between stored tensors and sharded variables, any format.

What every preset format shares, Keras's `.weights.h5` files (`h5_*`) and
Hugging Face's safetensors (`huggingface/`) alike: dtype names, a
variable's value taken to the host piece by piece (`host_pieces`) or made
on its devices slice by slice (`device_value`), the checks of stored values
(castable dtypes, lossy casts, NaN and Inf), and `build_from_weights`, the
one way a backbone is built from stored weights without allocating twice.
"""

import warnings

import keras
import numpy as np

from keras_nlp import multihost
from keras_nlp.distribution.layout_map import active_layout_map
from keras_nlp.distribution.layout_map import verify_layouts
from keras_nlp.saving.preset_files import PresetError

_MAX_LISTED = 8


def listing(problems):
    """`problems` as an indented list, cut after the first few."""
    shown = "\n".join(f"  - {p}" for p in problems[:_MAX_LISTED])
    more = len(problems) - _MAX_LISTED
    return shown + (f"\n  - ... and {more} more" if more > 0 else "")


# === Dtypes ===


def dtype_name(value):
    return keras.backend.standardize_dtype(value.dtype)


def numpy_dtype(dtype):
    dtype = keras.backend.standardize_dtype(dtype)
    if dtype == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return np.dtype(dtype)


def is_float(dtype):
    """Whether the NumPy `dtype` is a floating one (bfloat16 included)."""
    return np.dtype(dtype) == np.dtype(
        numpy_dtype("bfloat16")
    ) or np.issubdtype(dtype, np.floating)


def castable(source, target):
    """Whether values stored as `source` may load into a `target` variable:
    any float into a float, anything else only into its own dtype."""

    def is_float_name(dtype):
        return dtype == "bfloat16" or np.issubdtype(
            np.dtype(dtype), np.floating
        )

    if is_float_name(target):
        return is_float_name(source)
    return source == target


# === Variables to the host (writing) ===


def _host_copy(array):
    """`array` (one device's JAX array) as NumPy, cached nowhere.

    `numpy.asarray` keeps the host copy of a jax.Array on the array itself
    for as long as the array lives: for a model's variables, a second copy
    of the model after `save_to_preset` returns. The copy is made here and
    the cache dropped, so it is freed with the caller's reference.
    """
    cached = getattr(array, "_npy_value", None)
    value = np.asarray(array)
    if cached is None and getattr(array, "_npy_value", None) is not None:
        array._npy_value = None
    return value


def host_pieces(value, active=True):
    """Yields `(index, numpy piece)` covering `value` once, piece by piece.

    A JAX array whose shards this process holds is yielded shard by shard
    (each distinct shard once), so the host never holds the whole tensor;
    one spanning other processes is gathered whole (a collective: every
    process takes part, and only an `active` one keeps the result).
    Other backends' tensors come whole.
    """
    if isinstance(value, keras.Variable):
        value = value.value
    if keras.backend.backend() == "jax":
        import jax

        if isinstance(value, jax.Array):
            if not value.is_fully_addressable:
                whole = multihost.gather(value)
                if active:
                    yield (), whole
                return
            if not active:
                return
            for shard in value.addressable_shards:
                if shard.replica_id == 0:
                    yield shard.index, _host_copy(shard.data)
            return
    if active:
        yield (), np.asarray(keras.ops.convert_to_numpy(value))


# === Checks of stored values ===

_ALLOW_NONFINITE = (
    "Pass allow_nonfinite=True to from_preset (or to load_weights / "
    "build_from_preset_weights) to load them anyway."
)


class LossyConversionWarning(UserWarning):
    """Preset weights loaded into a dtype that cannot hold them exactly."""


def _float_info(dtype):
    dtype = numpy_dtype(dtype)
    if np.dtype(dtype) == np.dtype(numpy_dtype("bfloat16")):
        import ml_dtypes

        return ml_dtypes.finfo(dtype)
    if np.issubdtype(dtype, np.floating):
        return np.finfo(dtype)
    return None


def is_lossy(source, target):
    """Whether casting `source` values to `target` can change them."""
    if source == target:
        return False
    source_info, target_info = _float_info(source), _float_info(target)
    if source_info is None or target_info is None:
        return False
    # Fewer mantissa bits round; a smaller exponent range overflows.
    return (
        target_info.nmant < source_info.nmant
        or target_info.maxexp < source_info.maxexp
    )


def warn_lossy(pairs, preset_dir, stacklevel):
    """Warns once, naming each variable of `pairs` (`(variable, entry)`,
    an entry having a `dtype` name) that loads rounded."""
    lossy = [
        (variable, entry)
        for variable, entry in pairs
        if is_lossy(entry.dtype, dtype_name(variable))
    ]
    if not lossy:
        return
    targets = sorted({dtype_name(v) for v, _ in lossy})
    sources = sorted({e.dtype for _, e in lossy})
    listed = [f"{v.path} ({e.dtype} in the file)" for v, e in lossy]
    warnings.warn(
        f"{len(lossy)} weight(s) of {preset_dir} are rounded to the "
        f"backbone's narrower dtype ({', '.join(targets)}) as they load:\n"
        f"{listing(listed)}\nBuild the backbone in the file's dtype "
        f"(from_preset(..., dtype={sources[-1]!r})) to keep every bit.",
        LossyConversionWarning,
        stacklevel=stacklevel + 1,
    )


def check_finite(value, variable, entry):
    """Raises PresetError if `value` (read for `variable`) has NaN or Inf.

    Two reductions and no temporary array: a NaN makes both the minimum
    and the maximum NaN, an infinity is one of them.
    """
    if value.size == 0 or not is_float(value.dtype):
        return
    with np.errstate(invalid="ignore", over="ignore"):
        if np.isfinite(value.min()) and np.isfinite(value.max()):
            return
        count = int(value.size - np.count_nonzero(np.isfinite(value)))
    cast = (
        f" once cast to {dtype_name(variable)}"
        if entry.dtype != dtype_name(variable)
        else ""
    )
    raise PresetError(
        f"{variable.path}: {entry.describe()} holds {count:,} NaN or "
        f"infinite value(s){cast}; nothing was loaded. {_ALLOW_NONFINITE}"
    )


# === Stored tensors to the devices (reading) ===


def device_value(variable, read):
    """A variable's value read slice by slice, placed as its layout says.

    On JAX each device's slice is read on its own, straight into that
    device's buffer; the previous slice is kept, so replicated dimensions
    are read once. On other backends the tensor is read whole.

    Args:
        variable: the `keras.Variable` the value is for (its shape and
            layout say which slices are read).
        read: `read(index)` returns a NumPy array in the variable's dtype,
            already checked: the slices `index` (a tuple of slices, one per
            dimension), or the whole tensor for `index == ()`.

    Returns:
        A `jax.Array` sharded as the variable's layout says; on other
        backends the NumPy array `read(())`.
    """
    if keras.backend.backend() != "jax":
        return read(())
    import jax
    from keras.distribution import TensorLayout

    variable._initialize_layout()
    sharding = variable._layout
    if isinstance(sharding, TensorLayout):
        sharding = sharding.backend_layout
    if sharding is None:
        sharding = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    last = {}

    def read_slice(index):
        key = tuple((s.start, s.stop, s.step) for s in index)
        if last.get("key") != key:
            last.clear()
            last["key"] = key
            value = read(index)
            # JAX may alias a host array on CPU instead of copying it: a
            # view into a memory map closed after this variable would be
            # read after unmapping. Hand it arrays that own their data.
            if not value.flags.owndata:
                value = np.array(value)
            last["value"] = value
        return last["value"]

    return jax.make_array_from_callback(
        tuple(variable.shape), sharding, read_slice
    )


def with_progress(pairs, preset_dir, verbose):
    if not verbose:
        return pairs
    from rich.progress import track

    return track(pairs, description=f"Loading {preset_dir}")


def forget_deferred(model):
    """Drops `model`'s variables from Keras's list of ones to initialize."""
    from keras.src.backend.common import global_state

    pending = global_state.get_global_attribute("uninitialized_variables")
    if pending:
        ours = {id(v) for v in model.variables}
        pending[:] = [v for v in pending if id(v) not in ours]


def build_from_weights(backbone_cls, config, source, pair, read, verbose):
    """Builds a backbone whose variables are created from stored tensors.

    The backbone is built with deferred variables (nothing is allocated),
    `pair` checks its weights against the stored tensors before any value
    is read, and each variable is then created from its tensor (`read`),
    slice by slice on its devices under the active layout. No random
    initialization happens; a weight loaded into a narrower float dtype is
    rounded, with a `LossyConversionWarning` naming it. Each format's
    builder calls this from `from_preset`.

    Args:
        backbone_cls: the backbone class (its `from_config` takes
            `verify_layout=False` to defer the check of its layout until
            its variables have values).
        config: dict of constructor arguments.
        source: str, the preset or checkpoint, as messages name it.
        pair: `pair(model)` returns `(variable, entry)` for every variable
            the files hold, in the model's order (an entry has a `dtype`
            name and a `describe()`), or raises `PresetError`.
        read: `read(variable, entry)` returns the variable's value (see
            `device_value`).
        verbose: bool, show a progress bar.

    Returns:
        The backbone, verified against its layout plan when sharded.
    """
    with keras.StatelessScope(initialize_variables=False):
        model = backbone_cls.from_config(config, verify_layout=False)
    try:
        pairs = pair(model)
        # Warn at the caller of `from_preset`, which called the format's
        # builder, which called this.
        warn_lossy(pairs, source, stacklevel=4)
        for variable, entry in with_progress(pairs, source, verbose):
            variable._initialize(read(variable, entry))
            variable._initializer = None
        # Variables no file holds (e.g. random seed states) start as
        # their initializers say.
        for variable in model.variables:
            if variable._value is None:
                variable._deferred_initialize()
    finally:
        forget_deferred(model)
    layout_map = active_layout_map()
    if model.layout_plan is not None and layout_map is not None:
        verify_layouts(model, model.layout_plan, layout_map.device_mesh)
    return model
