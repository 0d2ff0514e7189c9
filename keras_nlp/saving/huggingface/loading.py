"""Building a backbone from a Hugging Face checkpoint, straight into shards."""

import collections
import os
import re
import warnings

import numpy as np

from keras_nlp.saving.huggingface.checkpoint import Checkpoint
from keras_nlp.saving.huggingface.checkpoint import is_huggingface_directory
from keras_nlp.saving.huggingface.checkpoint import read_huggingface_config
from keras_nlp.saving.huggingface.export import remember_import
from keras_nlp.saving.huggingface.family import family_for_model_type
from keras_nlp.saving.huggingface.family import registered_families
from keras_nlp.saving.huggingface.field_checks import check_header_counts
from keras_nlp.saving.huggingface.fp8 import FLOAT8
from keras_nlp.saving.huggingface.fp8 import Fp8
from keras_nlp.saving.huggingface.fp8 import fp8_in_config
from keras_nlp.saving.huggingface.task_heads import head_to_load
from keras_nlp.saving.huggingface.task_heads import num_labels
from keras_nlp.saving.huggingface.task_heads import task_head_patterns
from keras_nlp.saving.huggingface.tensor_table import StoredTensor
from keras_nlp.saving.huggingface.tensor_table import bind
from keras_nlp.saving.preset_files import CONFIG_FILE
from keras_nlp.saving.preset_files import PresetError
from keras_nlp.saving.preset_files import open_preset_directory
from keras_nlp.saving.weight_transfer import build_from_weights
from keras_nlp.saving.weight_transfer import castable
from keras_nlp.saving.weight_transfer import check_finite
from keras_nlp.saving.weight_transfer import device_value
from keras_nlp.saving.weight_transfer import dtype_name
from keras_nlp.saving.weight_transfer import listing
from keras_nlp.saving.weight_transfer import numpy_dtype


def huggingface_config(cls, directory):
    """`(family, backbone class, constructor arguments)` of a checkpoint.

    Reads `config.json` only.
    """
    family, owner, config, _ = _read_config(cls, directory)
    return family, owner, config


def _read_config(cls, directory):
    """`huggingface_config`'s answer and the `config.json` data."""
    with open_preset_directory(directory) as opened:
        data = read_huggingface_config(opened)
        path = opened.join(CONFIG_FILE)
    family = family_for_model_type(data["model_type"], path)
    owner = family.resolve_class(cls, opened.path)
    return family, owner, family.translate(data, path, owner), data


class _Source:
    """What one variable is read from: its binding and tensor infos (one
    `(binding, infos)` pair per slice in `parts` when rows with an
    `ours_part` fill it)."""

    def __init__(self, variable, binding, infos):
        self.variable = variable
        self.binding = binding
        self.parts = [(binding, infos)]
        # The tensor whose first row is folded in (`Weight.plus`).
        self.plus = None
        self.infos = list(infos)
        self._dtypes()

    def add(self, binding, infos):
        """Another slice of the variable."""
        self.parts.append((binding, infos))
        self.infos.extend(infos)
        self._dtypes()

    def _dtypes(self):
        dtypes = sorted({info.dtype for info in self.infos})
        # `warn_lossy` and `check_finite` describe sources by these.
        self.dtype = dtypes[-1]

    def describe(self):
        names = ", ".join(info.describe() for info in self.infos[:2])
        more = len(self.infos) - 2
        return names + (f" and {more} more" if more > 0 else "")


def _resolve_prefix(family, names, checkpoint):
    """Table names as this checkpoint spells them (with or without the base
    model prefix)."""
    prefix = family.base_prefix
    if not prefix or any(n.startswith(prefix) for n in checkpoint.tensors):
        return lambda name: name
    return lambda name: name[len(prefix) :] if name.startswith(prefix) else name


def match_checkpoint(model, family, config, checkpoint, fp8=None):
    """Pairs every variable of `model` with its tensors, or raises.

    Args:
        fp8: the `fp8.Fp8` form of the checkpoint's `quantization_config`
            (None without one): any tensor stored as float8 is read
            through it, with its block scales.

    Returns:
        A list of `_Source`, in the model's order.

    Raises:
        PresetError listing every missing, extra, mis-shaped or mis-typed
        tensor (and variables the family's table lacks).
    """
    variables = [v for v in model.weights]
    by_path = {v.path: v for v in variables}
    bindings, unmatched = bind(
        family.table(config), [(v.path, v.shape) for v in variables]
    )
    problems = [
        f"{path}: no row of the {family.model_types[0]!r} tensor table "
        "matches this variable (a bug in the family's table)"
        for path in unmatched
    ]
    spell = _resolve_prefix(family, [], checkpoint)
    used = set()
    # `(name, variable path)` of optional tensors the checkpoint lacks.
    absent = []
    sources = []
    fused = collections.defaultdict(list)
    # The size along the parts' axis of fused tensors with a `view`.
    views = {}
    found = {}
    for binding in bindings:
        variable = by_path[binding.path]
        names = [spell(n) for n in binding.names]
        expected = binding.converted_shape()
        region = binding.region()
        infos = []
        for name in names:
            info = _lookup(checkpoint, name, family.old_names)
            if info is None:
                info = _stored(binding.weight, name, checkpoint, problems)
            else:
                info = _dequantized(info, fp8, checkpoint, used, problems)
            if info is False:
                continue
            if info is None and binding.weight.optional:
                absent.append((name, binding.path))
                continue
            if info is None:
                problems.append(
                    f"{name}: missing (for {binding.path}, expected shape "
                    f"{_their_shape(expected, region)})"
                )
                continue
            name = info.name
            used.add(name)
            if isinstance(info, StoredTensor):
                used.update(part.name for part in info.parts)
            found[name] = info
            infos.append(info)
            if region is not None:
                fused[name].append((binding.path, region))
                if binding.weight.view is not None:
                    views[name] = binding.weight.view[region[0]]
            if not _fits(binding, info.shape, expected, region):
                stored = binding.stored_shape()
                problems.append(
                    f"{info.describe()} has shape {info.shape}, expected "
                    f"{stored or _their_shape(expected, region)} (for "
                    f"{binding.path} "
                    f"{tuple(variable.shape)})"
                )
            elif not castable(info.dtype, dtype_name(variable)):
                problems.append(
                    f"{info.describe()} has dtype {info.dtype}, expected "
                    f"{variable.dtype} (or another floating dtype) for "
                    f"{binding.path}"
                )
        plus = _plus_info(binding, spell, checkpoint, used, problems)
        if len(infos) == len(names) and plus is not False:
            if sources and sources[-1].variable is variable:
                sources[-1].add(binding, infos)
            else:
                sources.append(_Source(variable, binding, infos))
            if plus is not None:
                sources[-1].plus = plus
    for name, parts in fused.items():
        problems.extend(_tiling_problems(found[name], parts, views.get(name)))
    # A backbone drops the task heads' tensors (their tasks load them).
    ignorable = [
        re.compile(p)
        for p in family.ignorable(config)
        + task_head_patterns(family.model_types[0])
    ]
    extra = [
        name
        for name in checkpoint.tensors
        if name not in used and not any(p.fullmatch(name) for p in ignorable)
    ]
    for name in sorted(extra):
        info = checkpoint.tensors[name]
        problems.append(
            f"{info.describe()} (shape {info.shape}): unexpected; the "
            f"{type(model).__name__} has no weight for it"
        )
    if problems:
        raise PresetError(
            f"The Hugging Face checkpoint {checkpoint.path} does not match the "
            f"{type(model).__name__} built from its config "
            f"({len(problems)} problem(s); nothing was loaded):\n"
            f"{listing(problems)}"
        )
    if absent:
        warnings.warn(
            f"The Hugging Face checkpoint {checkpoint.path} has no "
            f"{', '.join(name for name, _ in absent)} (optional: a "
            "checkpoint of a class without that head, such as a masked "
            f"LM's, leaves it out). {type(model).__name__} builds "
            f"{', '.join(path for _, path in absent)} as it always does, "
            "with initial (untrained) values.",
            stacklevel=6,
        )
    return sources


def _lookup(checkpoint, name, old_names):
    """The info of `name`, or of its first older spelling (the family's
    `old_names`) the checkpoint has; None when neither."""
    info = checkpoint.tensors.get(name)
    for pattern, replacement in old_names:
        if info is not None:
            break
        info = checkpoint.tensors.get(re.sub(pattern, replacement, name))
    return info


def _files(info):
    """The files `info` is read from (a `StoredTensor`'s parts' files)."""
    if isinstance(info, StoredTensor):
        return info.filenames
    return (info.filename,)


def _stored(weight, name, checkpoint, problems):
    """`name` in the first of the row's `stored_as` forms the checkpoint
    has (a `StoredTensor`); None when none; False (with the problems
    listed) when its parts are missing or malformed."""
    for form in weight.stored_as:
        tensor, malformed = form.find(name, checkpoint.tensors)
        if malformed:
            problems.extend(malformed)
            return False
        if tensor is not None:
            return tensor
    return None


def _dequantized(info, fp8, checkpoint, used, problems):
    """`info`, or for a float8 tensor its `fp8.Fp8` `StoredTensor` (with
    its block scales); False (with the problems listed, and the tensor
    and its scales marked `used`: named once) when the config has no fp8
    quantization or the scales are missing or malformed."""
    if info.dtype != FLOAT8:
        return info
    used.update((info.name, info.name + Fp8.scale_suffix))
    if fp8 is None:
        problems.append(
            f"{info.describe()} is stored as {FLOAT8}, but config.json "
            "has no quantization_config with quant_method 'fp8' (which "
            "gives the weight_block_size of its weight_scale_inv); "
            "float8 weights load only as such block-scaled checkpoints"
        )
        return False
    tensor, malformed = fp8.find(info.name, checkpoint.tensors)
    problems.extend(malformed)
    return tensor or False


def _plus_info(binding, spell, checkpoint, used, problems):
    """The info of the tensor `binding` folds in (`Weight.plus`): None
    without one, False (with the problem listed) when it is missing or
    mis-shaped."""
    if binding.plus is None:
        return None
    name = spell(binding.plus)
    info = checkpoint.tensors.get(name)
    width = binding.shape[-1]
    if info is None:
        problems.append(
            f"{name}: missing (its first row is added to {binding.path}; "
            f"expected shape (>=1, {width}))"
        )
        return False
    used.add(name)
    if len(info.shape) != 2 or info.shape[0] < 1 or info.shape[1] != width:
        problems.append(
            f"{info.describe()} has shape {info.shape}, expected (>=1, "
            f"{width}) (its first row is added to {binding.path})"
        )
        return False
    return info


def _their_shape(expected, region):
    if region is None:
        return tuple(expected)
    axis = region[0]
    shape = list(expected)
    shape[axis] = f">={region[2]}"
    return tuple(shape)


def _shape_fits(shape, expected, region):
    if len(shape) != len(expected):
        return False
    for axis, (size, want) in enumerate(zip(shape, expected, strict=True)):
        if region is not None and axis == region[0]:
            if size < region[2]:
                return False
        elif size != want:
            return False
    return True


def _fits(binding, shape, expected, region):
    """Whether a tensor of `shape` holds `binding`'s part."""
    stored = binding.stored_shape()
    if stored is None:
        return _shape_fits(shape, expected, region)
    # A part of a `view`: the view holds it, and is the tensor stored.
    view = tuple(binding.weight.view)
    return tuple(shape) == stored and _shape_fits(view, expected, region)


def _tiling_problems(info, parts, size=None):
    """Gaps or a shortfall in the `parts` of `info` along their axis (of
    `size` when they tile a view of it)."""
    axis = parts[0][1][0]
    size = info.shape[axis] if size is None else size
    spans = sorted((start, stop, path) for path, (_, start, stop) in parts)
    position = 0
    for start, stop, path in spans:
        if start != position:
            return [
                f"{info.describe()}: the parts of this fused tensor do not "
                f"tile it along axis {axis} (at {position}, {path} starts "
                f"at {start})"
            ]
        position = stop
    if position != size:
        return [
            f"{info.describe()} has {size} rows along axis "
            f"{axis}, its parts ({', '.join(p for _, _, p in spans)}) fill "
            f"{position}"
        ]
    return []


def _box(index, shape):
    """A tuple of slices (JAX's shard index) as `(start, stop)` pairs."""
    if not index:
        return tuple((0, size) for size in shape)
    return tuple(
        slice_.indices(size)[:2]
        for slice_, size in zip(index, shape, strict=True)
    )


def _reader(source, read, allow_nonfinite):
    variable = source.variable
    target = numpy_dtype(variable.dtype)
    shape = tuple(int(d) for d in variable.shape)

    def read_binding(binding, infos, box):
        indices, their_box, cut = binding.plan(box)
        pieces = []
        for stack_index in indices:
            info = infos[0] if stack_index is None else infos[stack_index]
            if isinstance(info, StoredTensor):
                piece = cut(info.read(read, their_box, target))
            else:
                piece = cut(read(info.name, their_box))
            if binding.plus is not None:
                # Folded in as their model adds it (in float32 at least).
                row = read(source.plus.name, ((0, 1), box[-1]))
                dtype = np.result_type(piece.dtype, row.dtype, np.float32)
                piece = piece.astype(dtype) + row.astype(dtype)
            with np.errstate(over="ignore"):
                pieces.append(piece.astype(target, copy=False))
        if binding.stacked:
            return np.stack(pieces, axis=binding.weight.stack_axis)
        return pieces[0]

    def read_box(index):
        box = _box(index, shape)
        (binding, infos), *more = source.parts
        if not more and binding.within is None:
            value = read_binding(binding, infos, box)
        else:
            # Slices of the variable from different rows (`ours_part`):
            # each fills its overlap with the box.
            value = np.empty([stop - start for start, stop in box], target)
            for binding, infos in source.parts:
                axis, start, stop = binding.within
                low, high = box[axis]
                low, high = max(low, start), min(high, stop)
                if low >= high:
                    continue
                sub = list(box)
                sub[axis] = (low - start, high - start)
                where = [slice(None)] * len(box)
                where[axis] = slice(low - box[axis][0], high - box[axis][0])
                value[tuple(where)] = read_binding(binding, infos, tuple(sub))
        if not allow_nonfinite:
            check_finite(value, variable, source)
        # (`ascontiguousarray` makes a scalar 1-D: keep its shape.)
        return np.ascontiguousarray(value).reshape(np.shape(value))

    return read_box


def _read_source(checkpoint, source, allow_nonfinite):
    """The value of `source.variable` (see `device_value`), each device
    reading and converting only its box of the files."""
    infos = source.infos + [source.plus] * bool(source.plus)
    files = sorted({f for info in infos for f in _files(info)})
    # One memory map per variable: its pages leave the process with it.
    with checkpoint.reading(files) as read:
        return device_value(
            source.variable, _reader(source, read, allow_nonfinite)
        )


def build_from_huggingface(
    cls, directory, overrides=None, verbose=False, allow_nonfinite=False
):
    """Builds a backbone whose variables are created from a checkpoint.

    As `build_from_preset_weights` (both call `build_from_weights`): the
    backbone is built with deferred variables, every tensor is checked
    (names, shapes, dtypes) before any value is read, and each variable is
    then created slice by slice on its devices under the active layout,
    each device reading and converting only its box of the file.

    Args:
        cls: the class `from_preset` was called on.
        directory: the checkpoint directory (a path or an open
            `PresetDirectory`).
        overrides: dict of constructor arguments replacing the translated
            ones (e.g. `dtype`).
        verbose: bool, show a progress bar.
        allow_nonfinite: bool, load NaN and Inf values instead of raising.

    Returns:
        The backbone, verified against its layout plan when sharded.

    Raises:
        PresetError: see `Checkpoint` and `match_checkpoint`, and NaN or
            Inf values.
    """

    def pair(model):
        sources = match_checkpoint(model, family, config, checkpoint, fp8)
        return [(source.variable, source) for source in sources]

    with open_preset_directory(directory) as opened:
        family, owner, config, data = _read_config(cls, opened)
        fp8 = fp8_in_config(data, opened.join(CONFIG_FILE))
        with Checkpoint(opened) as checkpoint:
            # Arguments that follow from the tensors present (a pooler).
            config.update(family.options_for_tensors(checkpoint.tensors))
            # More layers or experts than the headers show fail here,
            # before any layer is built.
            check_header_counts(
                opened.join(CONFIG_FILE),
                family,
                config,
                data,
                checkpoint.tensors,
            )
            config.update(overrides or {})
            model = build_from_weights(
                owner,
                config,
                checkpoint.path,
                pair=pair,
                read=lambda variable, source: _read_source(
                    checkpoint, source, allow_nonfinite
                ),
                verbose=verbose,
            )
    # Export writes back the fields it does not translate (token ids,
    # RoPE fields as spelled, `max_position_embeddings`).
    remember_import(model, data, config)
    return model


def load_head_weights(variables, directory, head, owner):
    """Reads a task head's tensors into its variables, each device reading
    only its slice (as the backbone's weights are read).

    Args:
        variables: the head's variables (the task model's, by path).
        directory: the checkpoint directory (path or open directory).
        head: the `TaskHead` mapping them to the checkpoint's tensors.
        owner: the task class name, for messages.

    Raises:
        PresetError listing every missing, mis-shaped or mis-typed tensor
        of the head (nothing is assigned then).
    """
    bindings, unmatched = bind(
        list(head.weights), [(v.path, v.shape) for v in variables]
    )
    by_path = {v.path: v for v in variables}
    problems = [
        f"{path}: no row of the {head.architecture} head table matches this "
        f"variable of the {owner}; its head cannot load from this checkpoint"
        for path in unmatched
    ]
    family = registered_families()[head.model_type]
    with open_preset_directory(directory) as opened:
        fp8 = fp8_in_config(
            read_huggingface_config(opened), opened.join(CONFIG_FILE)
        )
    with Checkpoint(directory) as checkpoint:
        sources = []
        for binding in bindings:
            variable = by_path[binding.path]
            (name,) = binding.names
            info = _lookup(checkpoint, name, family.old_names)
            if info is not None:
                info = _dequantized(info, fp8, checkpoint, set(), problems)
                if info is False:
                    continue
            expected = tuple(binding.converted_shape())
            if info is None:
                problems.append(
                    f"{name}: missing (for {owner}'s {binding.path}, "
                    f"expected shape {expected})"
                )
            elif tuple(info.shape) != expected:
                problems.append(
                    f"{info.describe()} has shape {tuple(info.shape)}, "
                    f"expected {expected} (for {owner}'s {binding.path} "
                    f"{tuple(variable.shape)})"
                )
            elif not castable(info.dtype, dtype_name(variable)):
                problems.append(
                    f"{info.describe()} has dtype {info.dtype}, expected "
                    f"{variable.dtype} (or another floating dtype) for "
                    f"{binding.path}"
                )
            else:
                sources.append(_Source(variable, binding, [info]))
        if problems:
            raise PresetError(
                f"The {head.architecture} head of {checkpoint.path} does not "
                f"fit the {owner} built from it ({len(problems)} "
                f"problem(s); the head was not loaded):\n{listing(problems)}"
            )
        for source in sources:
            source.variable.assign(_read_source(checkpoint, source, False))


class FoundHead:
    """A Hugging Face checkpoint's config, read for a task built on it.

    Attributes:
        head: the `TaskHead` its head loads through, or None (a fresh
            head: a pretraining checkpoint).
        data: its `config.json`.
        path: the `config.json` path, for messages.
    """

    def __init__(self, head, data, path):
        self.head = head
        self.data = data
        self.path = path

    def num_classes(self, num_classes, owner):
        """The classifier's `num_classes`: the checkpoint's `num_labels`
        (`id2label`); a given `num_classes` must agree."""
        count = num_labels(self.data, self.path)
        if num_classes is not None and num_classes != count:
            raise PresetError(
                f"{owner}.from_preset: num_classes={num_classes!r}, but the "
                f"{self.head.architecture} checkpoint {self.path} has "
                f"num_labels={count} (its classifier's rows). Pass "
                f"num_classes={count} or leave it out; for another number "
                "of classes, load the backbone with Backbone.from_preset "
                "and build the classifier on it."
            )
        return count


def huggingface_task_head(preset, task, owner):
    """The `FoundHead` of `preset` for `task`, or None when `preset` is not
    a Hugging Face checkpoint directory.

    Raises:
        PresetError: the checkpoint holds another kind of fine-tuned head
            (see `task_heads.head_to_load`).
    """
    if not isinstance(preset, (str, os.PathLike)) or not os.path.isdir(preset):
        return None
    if not is_huggingface_directory(preset):
        return None
    with open_preset_directory(preset) as opened:
        data = read_huggingface_config(opened)
        path = opened.join(CONFIG_FILE)
    return FoundHead(head_to_load(data, path, task, owner), data, path)
