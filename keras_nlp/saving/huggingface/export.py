"""Writing a backbone as a Hugging Face checkpoint, one tensor at a time.

The safetensors layout is written here directly (an 8-byte header size, a
JSON header of names, dtypes, shapes and byte offsets, then the bytes), so
the header is known before any value is gathered and each tensor is
written as soon as it is assembled: besides the model, the host holds one
converted tensor (and the variables it is made of).

`config.json` is the family's translation of the backbone's config, plus
what the translation cannot know, from the checkpoint the backbone was
loaded from (`remember_import`):

- `bos_token_id`, `eos_token_id` and `pad_token_id`: the tokenizer's when
  one is given (`token_ids`), else the imported config's; an id outside
  the vocabulary is written as null (with a warning), and so is an unknown
  one, so that `transformers` does not fall back to its class's default
  (GPT-2's 50256, Phi-3's 32000) whatever the vocabulary.
- The RoPE fields (`rope_theta`, `rope_scaling`, `rope_parameters`,
  `rope_local_base_freq`) and `max_position_embeddings` exactly as read,
  when the backbone still has the config it was loaded with (its
  translation is unchanged): a Llama 3.1 checkpoint's 131072 positions
  stay 131072.
"""

import contextlib
import contextvars
import copy
import dataclasses
import json
import math
import os
import struct
import warnings

import numpy as np

from keras_nlp.distribution.lora_adapters import LORA_ADAPTERS
from keras_nlp.saving.huggingface.checkpoint import CODES
from keras_nlp.saving.huggingface.checkpoint import SAFETENSORS_FILE
from keras_nlp.saving.huggingface.checkpoint import SAFETENSORS_INDEX
from keras_nlp.saving.huggingface.family import family_for_backbone
from keras_nlp.saving.huggingface.task_heads import task_head
from keras_nlp.saving.huggingface.tensor_table import bind
from keras_nlp.saving.preset_files import CONFIG_FILE
from keras_nlp.saving.preset_files import PresetError
from keras_nlp.saving.preset_staging import write_json
from keras_nlp.saving.weight_transfer import dtype_name
from keras_nlp.saving.weight_transfer import host_pieces
from keras_nlp.saving.weight_transfer import numpy_dtype


class _Tensor:
    """One tensor of the checkpoint: the bindings that fill it."""

    def __init__(self, name):
        self.name = name
        self.parts = []  # (binding, stack index or None, variable)
        self.shape = None
        self.dtype = None
        # A binding whose `Weight.view` the parts fill (then stored).
        self.view = None

    @property
    def nbytes(self):
        return (
            math.prod(self.shape) * np.dtype(numpy_dtype(self.dtype)).itemsize
        )


def _plan_tensors(backbone, family, head=None):
    config = backbone.get_config()
    variables = [v for v in backbone.weights if v.name not in LORA_ADAPTERS]
    tensors = {}
    _plan_variables(
        variables,
        family.table(config),
        f"The {family.model_types[0]!r} tensor table",
        tensors,
    )
    if head is not None:
        # Bound apart: a head's paths may repeat the backbone's
        # (`pooled_dense` of a RoBERTa classifier and of a kept pooler).
        _plan_variables(
            head.variables,
            head.head.weights,
            f"The {head.head.architecture} head table",
            tensors,
        )
    return list(tensors.values())


def _plan_variables(variables, table, what, tensors):
    """Adds the tensors that `table` makes of `variables` to `tensors`."""
    bindings, unmatched = bind(table, [(v.path, v.shape) for v in variables])
    if unmatched:
        raise ValueError(
            f"{what} has no row for {unmatched}; the model cannot be "
            "written in Hugging Face format."
        )
    by_path = {v.path: v for v in variables}
    for binding in bindings:
        variable = by_path[binding.path]
        shape = binding.converted_shape()
        region = binding.region()
        for j, name in enumerate(binding.names):
            tensor = tensors.setdefault(name, _Tensor(name))
            tensor.parts.append(
                (binding, j if binding.stacked else None, variable)
            )
            tensor.dtype = dtype_name(variable)
            if region is None:
                tensor.shape = shape
            elif binding.weight.view is not None:
                tensor.view = binding
                tensor.shape = binding.stored_shape()
            else:
                axis, _, stop = region
                full = list(shape)
                full[axis] = max(
                    stop, tensor.shape[axis] if tensor.shape else 0
                )
                tensor.shape = tuple(full)
        if binding.plus is not None:
            # Folded into this variable on import: written as zeros.
            zeros = tensors.setdefault(binding.plus, _Tensor(binding.plus))
            zeros.shape = (1, binding.shape[-1])
            zeros.dtype = dtype_name(variable)


def _whole(variable, active):
    """A variable's whole value on the host (None on inactive processes)."""
    value = None
    for index, piece in host_pieces(variable, active=active):
        if not index:
            value = np.asarray(piece)
            continue
        if value is None:
            value = np.empty(tuple(variable.shape), piece.dtype)
        value[index] = piece
    return value


def _check_same_tensor(tensor, value, active):
    """Raises unless every variable written whole as `tensor` gives
    `value`: Hugging Face keeps one tensor where the backbone has two
    tied tables (T5Gemma 2's encoder and decoder embeddings)."""
    first = tensor.parts[0][2]
    for binding, _, variable in tensor.parts[1:]:
        other = _whole(variable, active)
        if other is None:
            continue
        if not np.array_equal(binding.convert(binding.select(other)), value):
            raise ValueError(
                f"`{tensor.name}` holds both `{first.path}` and "
                f"`{variable.path}` (tied in Hugging Face's model), but they "
                "differ: make them equal to write this checkpoint."
            )


def _assemble(tensor, active, cache):
    """The converted value of `tensor` (None on inactive processes)."""
    if not tensor.parts:
        # A tensor folded into a variable (`Weight.plus`).
        if not active:
            return None
        return np.zeros(tensor.shape, numpy_dtype(tensor.dtype))
    if len(tensor.parts) == 1 and tensor.parts[0][1] is None:
        binding, _, variable = tensor.parts[0]
        value = _whole(variable, active)
        return None if value is None else binding.convert(binding.select(value))
    out = None
    for binding, stack_index, variable in tensor.parts:
        # A stacked variable gives many tensors: keep its value for the
        # next ones (they follow in order).
        key = variable.path
        if cache.get("key") != key:
            cache.clear()
            cache["key"] = key
            cache["value"] = _whole(variable, active)
        value = cache["value"]
        if value is None:
            continue
        value = binding.select(value)
        if stack_index is not None:
            axis = binding.weight.stack_axis
            piece = binding.convert(np.take(value, stack_index, axis=axis))
        else:
            piece = binding.convert(value)
        region = binding.region()
        if region is None:
            _check_same_tensor(tensor, piece, active)
            return piece
        if out is None:
            shape = tensor.shape if tensor.view is None else binding.weight.view
            out = np.zeros(shape, numpy_dtype(tensor.dtype))
        axis, start, stop = region
        where = [slice(None)] * out.ndim
        where[axis] = slice(start, stop)
        out[tuple(where)] = piece
    if tensor.view is not None and out is not None:
        return tensor.view.fuse(out)
    return out


def _header(tensors):
    header = {"__metadata__": {"format": "pt"}}
    offset = 0
    for tensor in tensors:
        header[tensor.name] = {
            "dtype": CODES[tensor.dtype],
            "shape": list(tensor.shape),
            "data_offsets": [offset, offset + tensor.nbytes],
        }
        offset += tensor.nbytes
    data = json.dumps(header, separators=(",", ":")).encode("utf-8")
    return data + b" " * (-len(data) % 8)


def _group(tensors, max_bytes):
    files, current, size = [], [], 0
    for tensor in tensors:
        if (
            current
            and max_bytes is not None
            and size + tensor.nbytes > max_bytes
        ):
            files.append(current)
            current, size = [], 0
        current.append(tensor)
        size += tensor.nbytes
    files.append(current)
    return files


# What an import keeps for the export (see the module docstring).
TOKEN_ID_FIELDS = ("bos_token_id", "eos_token_id", "pad_token_id")
ROPE_FIELDS = (
    "rope_theta",
    "rope_scaling",
    "rope_parameters",
    "rope_local_base_freq",
)
KEPT_FIELDS = ("max_position_embeddings",)
# Nested configs (Gemma 3's, PaliGemma's text model) restored alike.
NESTED_CONFIGS = ("text_config",)
_IMPORTED = "_huggingface_import"


class ImportedConfig:
    """The `config.json` a backbone was loaded from, and the arguments it
    was built with (to tell whether it has changed since)."""

    def __init__(self, data, config):
        self.data = copy.deepcopy(dict(data))
        self.config = dict(config)


def remember_import(backbone, data, config):
    """Keeps, on `backbone`, the checkpoint's `config.json` `data` and the
    `config` it was built with, for `write_huggingface`."""
    setattr(backbone, _IMPORTED, ImportedConfig(data, config))


def imported_config(backbone):
    """The `ImportedConfig` of a backbone loaded from a Hugging Face
    checkpoint, or None."""
    return getattr(backbone, _IMPORTED, None)


def _restore_read_fields(fields, data):
    """Puts the RoPE fields and `KEPT_FIELDS` of `data` (as read) into
    `fields` (as exported), in place, nested configs too."""
    if any(key in data for key in ROPE_FIELDS):
        for key in ROPE_FIELDS:
            fields.pop(key, None)
        for key in ROPE_FIELDS:
            if key in data:
                fields[key] = copy.deepcopy(data[key])
    for key in KEPT_FIELDS:
        if key in data:
            fields[key] = copy.deepcopy(data[key])
    for key in NESTED_CONFIGS:
        if isinstance(fields.get(key), dict) and isinstance(
            data.get(key), dict
        ):
            _restore_read_fields(fields[key], data[key])


def _unchanged(family, imported, config):
    """Whether the family writes the same translation for `config` as for
    the config the backbone was loaded with."""
    # Arguments the import left to their defaults are the current ones.
    loaded = {**config, **imported.config}
    try:
        return family.export_config(loaded) == family.export_config(config)
    except (ValueError, KeyError, TypeError):
        return False


def _valid_id(value, vocabulary_size):
    """`value` (an id or a list of ids) without the ids outside the
    vocabulary; None when none is left."""
    if isinstance(value, (list, tuple)):
        kept = [v for v in value if _valid_id(v, vocabulary_size) is not None]
        return kept or None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    if vocabulary_size is not None and value >= vocabulary_size:
        return None
    return value


def _read_id(data, field):
    value = data.get(field)
    for key in NESTED_CONFIGS:
        if value is None and isinstance(data.get(key), dict):
            value = data[key].get(field)
    return value


def token_id_fields(fields, config, imported, token_ids):
    """`bos_token_id`, `eos_token_id` and `pad_token_id` for `config.json`.

    Args:
        fields: the family's `config.json` fields; ids it writes itself
            (RoBERTa's padding id, part of its architecture) stay.
        config: our config (its `vocabulary_size` bounds the ids).
        imported: the `ImportedConfig`, or None.
        token_ids: dict of those fields from the tokenizer, or None; a
            field it has (None included) wins over the imported one.

    Returns:
        A dict of the fields the family does not write, each an id (or
        a list of EOS ids) in the vocabulary, or None.
    """
    vocabulary_size = config.get("vocabulary_size")
    out, dropped = {}, []
    for field in TOKEN_ID_FIELDS:
        if field in fields:
            continue
        if token_ids is not None and field in token_ids:
            value = token_ids[field]
        elif imported is not None:
            value = _read_id(imported.data, field)
        else:
            value = None
        if isinstance(value, tuple):
            value = list(value)
        out[field] = _valid_id(value, vocabulary_size)
        if value is not None and out[field] != value:
            kept = f" (kept {out[field]!r})" if out[field] else ""
            dropped.append(f"{field}={value!r}{kept}")
    if dropped:
        warnings.warn(
            f"Token id(s) outside the vocabulary ({vocabulary_size} tokens) "
            f"are not written to config.json: {', '.join(dropped)}.",
            stacklevel=4,
        )
    return out


def export_fields(backbone, family, config, token_ids=None):
    """The `config.json` fields of `backbone` (see the module docstring),
    but `torch_dtype`."""
    fields = family.export_config(config)
    imported = imported_config(backbone)
    if imported is not None and _unchanged(family, imported, config):
        _restore_read_fields(fields, imported.data)
    fields.update(token_id_fields(fields, config, imported, token_ids))
    return fields


@dataclasses.dataclass(frozen=True)
class HeadExport:
    """A task head written with its backbone (`exporting_task_head`).

    Attributes:
        backbone: the task's backbone (the export it joins).
        head: the `TaskHead` naming the head's tensors.
        variables: the head's variables.
        fields: `config.json` fields of the task (`id2label`, ...).
    """

    backbone: object
    head: object
    variables: tuple
    fields: dict


def task_head_export(backbone, task, variables, fields, owner):
    """The `HeadExport` of a task model's head, for `exporting_task_head`.

    Raises:
        ValueError: the backbone's family maps no head of `task`.
    """
    family = family_for_backbone(type(backbone))
    head = task_head(family.model_types[0], task)
    if head is None:
        raise ValueError(
            f"{owner} has no Hugging Face format: keras_nlp maps no "
            f"{family.model_types[0]!r} {task} head. Save it with "
            "format='keras'."
        )
    return HeadExport(backbone, head, tuple(variables), dict(fields))


_HEAD_EXPORT = contextvars.ContextVar("keras_nlp_head_export", default=None)


@contextlib.contextmanager
def exporting_task_head(export):
    """Within it, `write_huggingface` of `export.backbone` writes the head
    too: its tensors beside the backbone's, `architectures` naming the
    task's class, and the task's fields."""
    token = _HEAD_EXPORT.set(export)
    try:
        yield
    finally:
        _HEAD_EXPORT.reset(token)


def _open_new(path):
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    return os.fdopen(os.open(path, flags, 0o666), "wb")


def write_huggingface(backbone, directory, max_shard_size=None, token_ids=None):
    """Writes `backbone` into `directory` as a Hugging Face checkpoint.

    Every process must call this (gathers are collective); only process 0
    writes (pass `directory=None` elsewhere).

    Args:
        backbone: a built backbone of a class with a Hugging Face family.
        directory: an existing, empty directory, or None.
        max_shard_size: float, in GB, or None. Larger checkpoints are split
            into `model-0000k-of-0000n.safetensors` files of at most this
            size (a larger tensor gets a file of its own), listed in
            `model.safetensors.index.json`.
        token_ids: dict of `bos_token_id`, `eos_token_id` and
            `pad_token_id` (the tokenizer's), or None: the ids the
            backbone was loaded with, if any.

    Returns:
        The names of the files written.
    """
    family = family_for_backbone(type(backbone))
    config = backbone.get_config()
    if config.get("lora_rank"):
        raise ValueError(
            "A backbone with LoRA adapters cannot be saved in Hugging Face "
            "format (it has no place for them). Save it with "
            "format='keras', which merges them, and load that preset."
        )
    hf_config = export_fields(backbone, family, config, token_ids)
    head = _HEAD_EXPORT.get()
    if head is not None and head.backbone is not backbone:
        head = None
    if head is not None:
        hf_config["architectures"] = [head.head.architecture]
        hf_config.update(head.fields)
        if head.head.check is not None:
            # A config whose head Hugging Face would compute otherwise
            # (another activation) is refused, as import refuses it.
            try:
                head.head.check(hf_config, "the exported config.json")
            except PresetError as error:
                raise ValueError(
                    f"Cannot save in Hugging Face format: {error}"
                ) from None
    tensors = _plan_tensors(backbone, family, head)
    hf_config["torch_dtype"] = tensors[0].dtype if tensors else "float32"
    total = sum(t.nbytes for t in tensors)
    max_bytes = None
    if max_shard_size is not None and total > max_shard_size * 1024**3:
        max_bytes = max_shard_size * 1024**3
    groups = _group(tensors, max_bytes)
    active = directory is not None
    if len(groups) == 1:
        names = [SAFETENSORS_FILE]
    else:
        names = [
            f"model-{k + 1:05d}-of-{len(groups):05d}.safetensors"
            for k in range(len(groups))
        ]
    cache = {}
    for filename, group in zip(names, groups, strict=True):
        file = None
        if active:
            path = os.path.join(directory, filename)
            file = _open_new(path)
            header = _header(group)
            file.write(struct.pack("<Q", len(header)))
            file.write(header)
        try:
            for tensor in group:
                value = _assemble(tensor, active, cache)
                if file is not None:
                    value = np.ascontiguousarray(
                        value, dtype=numpy_dtype(tensor.dtype)
                    )
                    file.write(value.reshape(-1).view(np.uint8).data)
                del value
        finally:
            if file is not None:
                file.flush()
                os.fsync(file.fileno())
                file.close()
    cache.clear()
    written = list(names)
    if active:
        if len(groups) > 1:
            index = {
                "metadata": {"total_size": total},
                "weight_map": {
                    t.name: name
                    for name, group in zip(names, groups, strict=True)
                    for t in group
                },
            }
            write_json(directory, SAFETENSORS_INDEX, index)
            written.append(SAFETENSORS_INDEX)
        write_json(directory, CONFIG_FILE, hf_config)
        written.append(CONFIG_FILE)
    return written
