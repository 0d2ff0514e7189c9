"""A task's head beside its backbone in a preset directory.

A task preset (`TextClassifier.save_to_preset`, `MaskedLM.save_to_preset`)
is the backbone's preset plus two files named after the task:
`<task>.json` (`{"class_name", "config"}`: the task class and its head's
arguments) and `<task>.weights.npz` (the head's weights by variable path,
gathered from their shards). Each is written atomically, as the
backbone's files are (`preset_staging.write_file`); reading refuses a file
that is not what these functions write, naming it.
"""

import io
import json
import os
import warnings
import zipfile

import numpy as np

from keras_nlp.saving.preset_files import PresetError
from keras_nlp.saving.preset_staging import write_file
from keras_nlp.saving.preset_staging import write_json


def head_file_names(task):
    """`(config file, weights file)` of a task, e.g. `"text_classifier"`."""
    return f"{task}.json", f"{task}.weights.npz"


def write_head(preset_dir, task, class_name, config, weights):
    """Writes a task's head files into `preset_dir`.

    Args:
        preset_dir: the preset directory (the backbone already written).
        task: the files' stem, e.g. `"text_classifier"`.
        class_name: the task class's name.
        config: dict of the head's arguments (JSON values).
        weights: dict of variable path -> NumPy array.
    """
    config_name, weights_name = head_file_names(task)
    buffer = io.BytesIO()
    np.savez(buffer, **weights)
    write_file(preset_dir, weights_name, buffer.getvalue())
    write_json(
        preset_dir, config_name, {"class_name": class_name, "config": config}
    )


def read_head(preset, task):
    """A task's head files in a preset directory.

    Args:
        preset: a directory (anything else holds no head).
        task: the files' stem.

    Returns:
        `(stored, weights)`: the config file's dict (`class_name`,
        `config`) and `{path: array}`, or `None` for a file that is not
        there.

    Raises:
        PresetError: a file that is not valid JSON with a `class_name` and
            a `config` dict, or not a NumPy `.npz` of arrays.
    """
    if not isinstance(preset, (str, os.PathLike)) or not os.path.isdir(preset):
        return None, None
    config_name, weights_name = head_file_names(task)
    config_path = os.path.join(preset, config_name)
    weights_path = os.path.join(preset, weights_name)
    stored = None
    if os.path.isfile(config_path):
        try:
            with open(config_path, encoding="utf-8") as file:
                stored = json.load(file)
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise PresetError(
                f"{config_path} is not valid JSON ({error}). It is written "
                f"by save_to_preset: save the {task} again."
            ) from error
        if not (
            isinstance(stored, dict)
            and isinstance(stored.get("class_name"), str)
            and isinstance(stored.get("config", {}), dict)
        ):
            raise PresetError(
                f"{config_path} must hold an object with a `class_name` "
                f"string and a `config` object. Received: {stored!r:.200}."
            )
        stored.setdefault("config", {})
    weights = None
    if os.path.isfile(weights_path):
        try:
            with np.load(weights_path, allow_pickle=False) as data:
                weights = {key: data[key] for key in data.files}
        except (OSError, ValueError, zipfile.BadZipFile) as error:
            raise PresetError(
                f"{weights_path} is not a NumPy .npz of arrays ({error}). "
                f"It is written by save_to_preset: save the {task} again."
            ) from error
    return stored, weights


def assign_stored_head(variables, stored, weights, task_name, preset):
    """Assigns a stored head's weights to a task's head `variables`.

    A head of another class, or of other shapes (another `num_classes`,
    say), is not loaded: the task keeps its fresh head, and a warning says
    why, so a stored head is never dropped unseen.

    Args:
        variables: the task's head variables.
        stored: the head's config file (`read_head`), or `None`.
        weights: `{path: array}` of the stored head.
        task_name: the task class's name.
        preset: the directory, for the warning.

    Returns:
        bool: whether the stored weights were assigned.
    """
    expected = {v.path: tuple(v.shape) for v in variables}
    found = {path: tuple(value.shape) for path, value in weights.items()}
    stored_class = (stored or {}).get("class_name", task_name)
    if stored_class == task_name and expected == found:
        for variable in variables:
            variable.assign(weights[variable.path])
        return True
    if stored_class != task_name:
        why = f"it is a {stored_class}'s"
    else:
        why = f"its shapes {found} are not this head's {expected}"
    warnings.warn(
        f"The head stored in {preset} is not loaded ({why}): the "
        f"{task_name}'s head starts from its initializers.",
        stacklevel=3,
    )
    return False
