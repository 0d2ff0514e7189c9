"""The JSON files of a preset directory, read without running foreign code.

A preset's `config.json` names the backbone class and its constructor
arguments. Reading it never imports the `module` it names and never calls
`keras.saving.deserialize_keras_object`: the class is looked up among this
library's backbones by its registered name, and every argument must be plain
JSON (the dtype policy is the one serialized object allowed).
"""

import datetime
import inspect

import keras

from keras_nlp.saving.preset_files import CONFIG_FILE
from keras_nlp.saving.preset_files import METADATA_FILE
from keras_nlp.saving.preset_files import SHARDED_WEIGHTS_FILE  # noqa: F401
from keras_nlp.saving.preset_files import WEIGHTS_FILE  # noqa: F401
from keras_nlp.saving.preset_files import PresetError  # noqa: F401
from keras_nlp.saving.preset_files import open_preset_directory
from keras_nlp.saving.preset_staging import write_json
from keras_nlp.saving.registry import registered_backbones
from keras_nlp.version import __version__

# Packages whose registered names load into our classes. keras-hub registers
# every class under both of its names.
REGISTERED_PACKAGES = ("keras_nlp", "keras_hub", "keras_nlp.models")
SAVED_PACKAGE = "keras_nlp"
_DTYPE_POLICY_CLASSES = ("DTypePolicy", "FloatDTypePolicy")
# Quantized policies a preset may hold, with their mode (an int4 mode
# carries its block size: "int4/128").
_QUANTIZED_POLICY_CLASSES = {
    "QuantizedDTypePolicy": "int8",
    "Int4DTypePolicy": "int4",
    "QuantizedFloat8DTypePolicy": "float8",
}


def _check_plain(value, where, path):
    """Raises unless `value` is plain JSON data (no serialized objects)."""
    if isinstance(value, dict):
        if "class_name" in value or "registered_name" in value:
            raise PresetError(
                f"{path}: {where} is a serialized object "
                f"({value.get('class_name')!r}). Backbone configs may only "
                "hold numbers, strings, booleans, null and lists of them "
                "(plus the dtype policy); nothing else is deserialized."
            )
        for key, item in value.items():
            _check_plain(item, f"{where}.{key}", path)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_plain(item, f"{where}[{index}]", path)
    elif not (value is None or isinstance(value, (bool, int, float, str))):
        raise PresetError(
            f"{path}: {where} has unsupported type {type(value).__name__}."
        )


def _deserialize_dtype(value, path):
    if value is None or isinstance(value, str):
        return value
    if (
        isinstance(value, dict)
        and value.get("module") == "keras"
        and value.get("class_name") in _DTYPE_POLICY_CLASSES
        and isinstance(value.get("config"), dict)
        and isinstance(value["config"].get("name"), str)
    ):
        return value["config"]["name"]
    if isinstance(value, dict) and value.get("class_name") == "DTypePolicyMap":
        return _deserialize_policy_map(value, path)
    raise PresetError(
        f"{path}: config.dtype must be a dtype name, a serialized Keras "
        f"DTypePolicy ({', '.join(_DTYPE_POLICY_CLASSES)}) or a quantized "
        f"model's DTypePolicyMap. Received: {value!r}."
    )


def _deserialize_policy_map(value, path):
    """A quantized preset's `DTypePolicyMap` (as Keras serializes it, and
    keras-hub's quantized presets hold it), checked field by field before
    Keras reads it: float policies and the quantized ones we lay out."""
    config = value.get("config")
    if value.get("module") != "keras.dtype_policies" or not isinstance(
        config, dict
    ):
        raise PresetError(
            f"{path}: config.dtype is a DTypePolicyMap without Keras's "
            f"module 'keras.dtype_policies' and a config object: {value!r}."
        )
    default = config.get("default_policy")
    if default is not None:
        _deserialize_dtype(default, path)
    policy_map = config.get("policy_map")
    if not isinstance(policy_map, dict):
        raise PresetError(
            f"{path}: config.dtype.config.policy_map must be an object of "
            f"layer paths to policies. Received: {policy_map!r}."
        )
    for key, policy in policy_map.items():
        where = f"config.dtype.config.policy_map[{key!r}]"
        class_name = (
            policy.get("class_name") if isinstance(policy, dict) else None
        )
        if class_name in _DTYPE_POLICY_CLASSES:
            _deserialize_dtype(policy, path)
            continue
        mode = (policy.get("config") or {}).get("mode") if class_name else None
        if (
            class_name not in _QUANTIZED_POLICY_CLASSES
            or policy.get("module") != "keras.dtype_policies"
            or not isinstance(mode, str)
            or mode.partition("/")[0] != _QUANTIZED_POLICY_CLASSES[class_name]
        ):
            raise PresetError(
                f"{path}: {where} must be a float policy or one of "
                f"{', '.join(_QUANTIZED_POLICY_CLASSES)} (modes "
                f"{', '.join(_QUANTIZED_POLICY_CLASSES.values())}), as "
                f"Keras serializes them. Received: {policy!r}."
            )
        _check_plain(policy["config"], f"{where}.config", path)
    try:
        return keras.dtype_policies.deserialize(value)
    except (TypeError, ValueError) as error:
        raise PresetError(f"{path}: config.dtype: {error}") from None


def _plain_nested_object(value, allowed, where, path):
    """A serialized sub-layer a backbone takes as an argument, made plain.

    Only the class names the backbone lists in its
    `serialized_config_arguments` are accepted (its own code builds them);
    their config must be plain data, as a backbone config's. Returns
    `{"class_name", "config"}` with the dtype policy reduced to its name.
    """
    class_name = value.get("class_name")
    registered = value.get("registered_name")
    package, _, registered_class = (registered or "").rpartition(">")
    if class_name not in allowed or (
        registered is not None
        and (
            registered_class != class_name or package not in REGISTERED_PACKAGES
        )
    ):
        raise PresetError(
            f"{path}: {where} is a serialized {class_name!r} (registered "
            f"{registered!r}); this argument takes only {', '.join(allowed)}."
        )
    config = value.get("config")
    if not isinstance(config, dict):
        raise PresetError(f"{path}: {where}.config must be an object.")
    config = dict(config)
    config.pop("build_config", None)
    dtype = _deserialize_dtype(config.pop("dtype", None), path)
    for key, item in config.items():
        _check_plain(item, f"{where}.config.{key}", path)
    if dtype is not None:
        config["dtype"] = dtype
    return {"class_name": class_name, "config": config}


def backbone_class_for(registered_name, class_name, path):
    """Our backbone class for a registered name such as `keras_hub>X`."""
    classes = registered_backbones()
    package, _, name = (registered_name or "").rpartition(">")
    if package not in REGISTERED_PACKAGES or name not in classes:
        known = ", ".join(sorted(classes))
        raise PresetError(
            f"{path} is for {registered_name!r} (class_name "
            f"{class_name!r}), which is not a keras_nlp backbone. Loadable "
            f"registered names are '<package>>Name' with package one of "
            f"{', '.join(REGISTERED_PACKAGES)} and Name one of: {known}."
        )
    if class_name is not None and class_name != name:
        raise PresetError(
            f"{path}: class_name {class_name!r} does not match "
            f"registered_name {registered_name!r}."
        )
    return classes[name]


def read_backbone_config(preset_dir):
    """Reads `config.json`: returns `(backbone class, constructor kwargs)`.

    Args:
        preset_dir: the preset directory (a path or an open
            `PresetDirectory`). `config.json` must be a regular file in it,
            not a symbolic link.

    Raises:
        PresetError: the file is missing, a link or not JSON, names a class
            that is not one of our backbones, or holds anything but plain
            arguments of that class's constructor.
    """
    with open_preset_directory(preset_dir) as directory:
        path = directory.join(CONFIG_FILE)
        data = directory.read_json(CONFIG_FILE)
    if not isinstance(data, dict) or not isinstance(data.get("config"), dict):
        raise PresetError(
            f"{path} must be a serialized backbone: an object with "
            "'class_name', 'registered_name' and a 'config' object."
        )
    cls = backbone_class_for(
        data.get("registered_name"), data.get("class_name"), path
    )
    config = dict(data["config"])
    dtype = config.pop("dtype", None)
    # Sub-layers a backbone takes as arguments (Gemma 3's vision encoder).
    nested = getattr(cls, "serialized_config_arguments", {})
    for key, allowed in nested.items():
        value = config.get(key)
        if isinstance(value, dict) and "class_name" in value:
            config[key] = _plain_nested_object(
                value, allowed, f"config.{key}", path
            )
    for key, value in config.items():
        if key in nested and isinstance(value, dict) and "class_name" in value:
            continue
        _check_plain(value, f"config.{key}", path)
    parameters = inspect.signature(cls.__init__).parameters
    # `name` and `trainable` reach keras.Model through **kwargs.
    known = [
        name
        for name, parameter in parameters.items()
        if name != "self" and parameter.kind is not parameter.VAR_KEYWORD
    ] + ["name", "trainable"]
    unknown = sorted(set(config) - set(known))
    if unknown:
        raise PresetError(
            f"{path}: {cls.__name__} has no argument(s) {unknown}. Its "
            f"arguments are: {', '.join(known)}."
        )
    config["dtype"] = _deserialize_dtype(dtype, path)
    return cls, config


def write_backbone_config(backbone, preset_dir):
    """Writes `config.json` and `metadata.json` for `backbone`.

    Each file is written whole under a new name and renamed into place, so
    a link already at its name is replaced, never written through.
    """
    config = backbone.get_config()
    # Weights are saved with LoRA merged, so the preset is a plain backbone.
    for key in ("lora_rank", "lora_target_names"):
        config.pop(key, None)
    cls = type(backbone)
    serialized = {
        "module": cls.__module__,
        "class_name": cls.__name__,
        "config": config,
        "registered_name": f"{SAVED_PACKAGE}>{cls.__name__}",
    }
    write_json(preset_dir, CONFIG_FILE, serialized)
    metadata = {
        "keras_version": keras.__version__,
        "keras_nlp_version": __version__,
        "parameter_count": int(backbone.count_params()),
        "date_saved": datetime.datetime.now().strftime("%Y-%m-%d@%H:%M:%S"),
    }
    write_json(preset_dir, METADATA_FILE, metadata)
