"""`from_preset` and `save_to_preset`: backbones in preset directories.

`keras_nlp.models.Backbone` mixes `PresetMixin` in. Built-in presets are
each class's `presets` dict (configs only); preset directories are read
and written by `preset_config`, `h5_loading` and `h5_writer`.
"""

import difflib
import math
import os

from keras_nlp import multihost
from keras_nlp.saving.h5_loading import build_from_preset_weights
from keras_nlp.saving.h5_writer import write_weights
from keras_nlp.saving.huggingface.checkpoint import is_huggingface_directory
from keras_nlp.saving.huggingface.export import write_huggingface
from keras_nlp.saving.huggingface.loading import build_from_huggingface
from keras_nlp.saving.huggingface.loading import huggingface_config
from keras_nlp.saving.lora_weights import check_no_quantized_lora
from keras_nlp.saving.preset_config import read_backbone_config
from keras_nlp.saving.preset_config import write_backbone_config
from keras_nlp.saving.preset_files import PresetDirectory
from keras_nlp.saving.preset_files import PresetError
from keras_nlp.saving.preset_staging import staged_preset
from keras_nlp.saving.registry import registered_backbones

# Endings of the files a preset directory holds: an argument ending in one
# names a file where its directory was meant.
_PRESET_FILE_ENDINGS = (".json", ".h5", ".safetensors", ".model")


def is_preset_directory(preset):
    return isinstance(preset, (str, os.PathLike)) and os.path.isdir(preset)


def looks_like_path(preset):
    """Whether `preset` is written as a path rather than a preset's name.

    Built-in names are plain words (`gemma_2b_en`); a separator, a leading
    `.` or `~`, or a preset file's ending (`config.json`) means a path.
    """
    if isinstance(preset, os.PathLike):
        return True
    if not isinstance(preset, str):
        return False
    separators = [sep for sep in ("/", os.sep, os.altsep) if sep]
    return (
        any(sep in preset for sep in separators)
        or preset.startswith((".", "~"))
        or preset.endswith(_PRESET_FILE_ENDINGS)
    )


def check_preset_path(preset):
    """Raises `PresetError` if `preset` is a path but not a directory.

    Such a path is a missing or mistyped directory, or a file in one; the
    message says which, rather than listing the built-in presets.

    Args:
        preset: the `preset` argument of `from_preset` or `plan_layout`.

    Raises:
        PresetError: `preset` looks like a path and is no directory.
    """
    if not looks_like_path(preset) or os.path.isdir(preset):
        return
    path = os.fspath(preset)
    if os.path.exists(path):
        directory = os.path.dirname(os.path.abspath(path))
        raise PresetError(
            f"{path!r} is a file, not a preset directory. Pass the "
            f"directory that holds config.json and the weights, e.g. "
            f"{directory!r}."
        )
    if path.startswith("~"):
        hint = (
            " A leading '~' is not expanded here; pass "
            f"os.path.expanduser({path!r})."
        )
    else:
        existing = os.path.dirname(os.path.abspath(path))
        while not os.path.isdir(existing):
            existing = os.path.dirname(existing)
        hint = f" The nearest directory that exists is {existing!r}."
    raise PresetError(f"The preset directory {path!r} does not exist.{hint}")


class PresetMixin:
    """Preset loading and saving for `Backbone` subclasses.

    Attributes:
        presets: dict of preset name -> config (constructor arguments) of
            the built-in presets of the class.
    """

    presets = {}

    @classmethod
    def _preset_owner(cls, preset):
        for backbone_cls in registered_backbones(cls).values():
            if preset in backbone_cls.__dict__.get("presets", {}):
                return backbone_cls
        return None

    @classmethod
    def _available_presets(cls):
        names = []
        for backbone_cls in registered_backbones(cls).values():
            names.extend(backbone_cls.__dict__.get("presets", {}))
        return sorted(names)

    @classmethod
    def _preset_config(cls, preset):
        """`(class, config)` of a built-in preset name or a preset directory."""
        if is_preset_directory(preset):
            if is_huggingface_directory(preset):
                _, owner, config = huggingface_config(cls, preset)
                return owner, config
            owner, config = read_backbone_config(preset)
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
            check_preset_path(preset)
            available = cls._available_presets()
            close = difflib.get_close_matches(str(preset), available, n=3)
            suggestion = (
                f" Did you mean {' or '.join(repr(n) for n in close)}?"
                if close
                else ""
            )
            raise ValueError(
                f"Unknown preset {preset!r} for {cls.__name__}.{suggestion} "
                f"Built-in presets: {', '.join(available) or 'none'}; "
                "or pass the path of a preset directory."
            )
        return owner, dict(owner.presets[preset])

    @classmethod
    def _class_and_config(cls, instance, config, preset, caller):
        """`(class, config, preset)` a call such as `plan_layout` is about.

        From a built backbone (`instance`), a `preset` name or directory, or
        a `config` of this class; `(cls, None, None)` when none is given.
        """
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
            if cls not in registered_backbones().values():
                raise ValueError(
                    "Backbone.get_layout_map(config=...) cannot tell which "
                    "architecture the config is for. Call it on the "
                    "backbone class, e.g. GemmaBackbone.get_layout_map."
                )
            return cls, dict(config), None
        return cls, None, None

    @classmethod
    def from_preset(
        cls,
        preset,
        load_weights=True,
        verbose=False,
        allow_nonfinite=False,
        **kwargs,
    ):
        """Builds a backbone from a preset directory or a built-in config.

        A preset directory holds `config.json`, `metadata.json` and the
        weights (`model.weights.h5`, or `model.weights.json` and the
        `model_NNNNN.weights.h5` files it lists), as written by
        `save_to_preset` here or by keras-hub for the same architecture.
        `config.json` is read safely: only backbone classes of this library
        (registered as `keras_nlp>Name` or `keras_hub>Name`) are built, and
        only from plain arguments. No file outside the directory is read:
        every file must be a regular file in it, symbolic links (the
        directory's own name included) are refused rather than followed,
        and weights stored outside their HDF5 file (external storage,
        virtual datasets, external links) or not numeric are refused. Every
        weight's shape and dtype are checked against the built backbone
        before any value is read; values must be finite, and weights
        loaded into a narrower dtype (float32 into bfloat16) are rounded
        with a `LossyConversionWarning` naming them.

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
            allow_nonfinite: bool, load weights holding NaN or Inf instead
                of raising.
            **kwargs: constructor arguments overriding the preset's config,
                e.g. `dtype="bfloat16"`.

        Returns:
            The backbone.

        Raises:
            ValueError (`keras_nlp.saving.PresetError` for files): an unknown
                preset, a preset of another class, or files that are
                missing, unsafe (links, data outside the file), truncated,
                hold NaN or Inf, or do not match the config.

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
        if not is_preset_directory(preset):
            owner, config = cls._preset_config(preset)
            if load_weights:
                raise ValueError(
                    f"The built-in preset {preset!r} is a config only: "
                    "keras_nlp bundles no weights and never downloads them. "
                    "Pass load_weights=False to build it with random "
                    "weights, or the path of a preset directory."
                )
            return owner.from_config(dict(config, **kwargs))
        # One open directory for the config and the weights: a save that
        # swaps the preset meanwhile cannot pair one's config with the
        # other's weights.
        with PresetDirectory(preset) as directory:
            if is_huggingface_directory(directory):
                if not load_weights:
                    _, owner, config = huggingface_config(cls, directory)
                    return owner.from_config(dict(config, **kwargs))
                return build_from_huggingface(
                    cls, directory, kwargs, verbose, allow_nonfinite
                )
            owner, config = cls._preset_config(directory)
            config.update(kwargs)
            if not load_weights:
                return owner.from_config(config)
            return build_from_preset_weights(
                owner, config, directory, verbose, allow_nonfinite
            )

    def save_to_preset(
        self, preset_dir, max_shard_size=10, format="keras", *, token_ids=None
    ):
        """Saves the backbone as a preset directory.

        In keras-hub's format (`format="keras"`, the default) or as a
        Hugging Face checkpoint (`format="huggingface"`).

        Writes `model.weights.h5` (laid out as Keras's `save_weights` does,
        so keras-hub reads it for the same architecture), `config.json`
        (registered name `keras_nlp>ClassName`) and `metadata.json`. LoRA
        adapters are merged into their kernels, so the preset is a plain
        backbone with the adapted outputs.

        The save is atomic: the preset is written into a new directory
        beside `preset_dir` and swapped in only once complete, so a save
        that fails, runs out of space or is killed leaves the previous
        preset as it was, and a second save to the same directory while
        one is running fails with `keras_nlp.saving.PresetBusyError`.
        Nothing is written through a symbolic link. Each variable is
        written shard by shard from the devices that hold it, so besides
        the model the host holds at most one tensor, and nothing once this
        returns. In a JAX cluster every process calls this and process 0
        writes (the directory must be shared).

        With `format="huggingface"` the directory holds `config.json` (the
        Hugging Face config of the backbone's `model_type`) and
        `model.safetensors`, or `model-00001-of-0000N.safetensors`, ...
        listed in `model.safetensors.index.json` above `max_shard_size`:
        what `transformers` and keras-hub's Hugging Face loader read, and
        `from_preset` here. The same atomic save, one tensor at a time.

        Args:
            preset_dir: str, the directory; created if missing. Its backbone
                files (config, metadata, weights of either format) are
                replaced; other files in it (a tokenizer, a README) are
                kept.
            max_shard_size: float, in GB. Weights larger than this are
                written as `model.weights.json` plus `model_00000.weights.h5`,
                `model_00001.weights.h5`, ... of at most this size each
                (Hugging Face: the safetensors files above).
            format: `"keras"` (default) or `"huggingface"`.
            token_ids: dict of `bos_token_id`, `eos_token_id` and
                `pad_token_id` for a Hugging Face `config.json` (a
                `CausalLM` passes its tokenizer's), or None: those the
                backbone was loaded with, if any. Ids outside the
                vocabulary are written as null. `format="huggingface"`
                only.

        Raises:
            ValueError: a bad `max_shard_size` or `format`, a backbone with
                no Hugging Face format, or `preset_dir` is a file or a
                symbolic link.
            OSError: a file could not be written (permissions, disk full);
                the message names it, and the old preset is intact.
            keras_nlp.saving.PresetBusyError: another save to `preset_dir`
                is in progress.

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
        if (
            not isinstance(max_shard_size, (int, float))
            or isinstance(max_shard_size, bool)
            or not math.isfinite(max_shard_size)
            or max_shard_size <= 0
        ):
            raise ValueError(
                "max_shard_size must be a positive number of GB. Received: "
                f"max_shard_size={max_shard_size!r}."
            )
        if format not in ("keras", "huggingface"):
            raise ValueError(
                "format must be 'keras' (keras-hub's preset format) or "
                f"'huggingface' (a Hugging Face checkpoint). Received: "
                f"format={format!r}."
            )
        if token_ids is not None and format != "huggingface":
            raise ValueError(
                "token_ids are written into a Hugging Face config.json; "
                "pass format='huggingface' (a keras preset keeps them in "
                "its tokenizer files)."
            )
        # Presets hold LoRA merged; QLoRA adapters cannot be (say why).
        check_no_quantized_lora(self, "save_to_preset")
        if format == "huggingface":
            quantized = [
                layer.path
                for layer in self._flatten_layers(include_self=False)
                if getattr(layer, "quantization_mode", None) is not None
            ]
            if quantized:
                raise ValueError(
                    "format='huggingface' writes float checkpoints, but "
                    f"{len(quantized)} layers are quantized (e.g. "
                    f"{quantized[0]}). Save the float backbone, or save "
                    "this one with format='keras' (a quantized preset)."
                )
            # Fails before anything is written for a class with no family.
            from keras_nlp.saving.huggingface.family import family_for_backbone

            family_for_backbone(type(self))
        with staged_preset(
            preset_dir, active=multihost.is_main_process()
        ) as staging:
            # Every process takes part in the gathers; process 0 writes.
            if format == "huggingface":
                write_huggingface(
                    self,
                    staging,
                    max_shard_size=max_shard_size,
                    token_ids=token_ids,
                )
            else:
                write_weights(self, staging, max_shard_size=max_shard_size)
                if staging is not None:
                    write_backbone_config(self, staging)
        multihost.barrier("keras_nlp.save_to_preset")
