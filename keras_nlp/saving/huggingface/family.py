"""Families: how one Hugging Face `model_type` maps to one of our backbones.

A family module (`keras_nlp/models/<name>/<name>_huggingface.py`) calls
`register_family(HuggingFaceFamily(...))` with its config translation (both
ways) and its tensor table (`conversions.Weight` rows). Family modules are
found by name, so adding one needs no edit elsewhere: importing
`keras_nlp.models` imports every `*_huggingface.py` module directly inside
one of its subpackages (saving never imports models; backbones register
the same way).
"""

import dataclasses

from keras_nlp.saving.huggingface.field_checks import check_field
from keras_nlp.saving.huggingface.field_checks import check_heads
from keras_nlp.saving.huggingface.fp8 import read_quantization
from keras_nlp.saving.preset_files import PresetError
from keras_nlp.saving.registry import registered_backbones

# Fields of every Hugging Face config that never change the architecture
# or its numerics (bookkeeping, token ids, generation defaults). A family
# adds its own in `ignored_fields`; any other field must be read by its
# `config_from_hf`, or the load fails naming it.
COMMON_IGNORED_FIELDS = (
    "_name_or_path",
    "_attn_implementation",
    "_attn_implementation_autoset",
    "add_cross_attention",
    "architectures",
    "auto_map",
    "bad_words_ids",
    "begin_suppress_tokens",
    "bos_token_id",
    "chunk_size_feed_forward",
    "cross_attention_hidden_size",
    "decoder_start_token_id",
    "diversity_penalty",
    "do_sample",
    "dtype",
    "early_stopping",
    "encoder_no_repeat_ngram_size",
    "eos_token_id",
    "exponential_decay_length_penalty",
    "finetuning_task",
    "forced_bos_token_id",
    "forced_eos_token_id",
    "id2label",
    "initializer_range",
    "is_decoder",
    "is_encoder_decoder",
    "label2id",
    "length_penalty",
    "max_length",
    "min_length",
    "model_type",
    "no_repeat_ngram_size",
    "num_beam_groups",
    "num_beams",
    "num_labels",
    "num_return_sequences",
    "output_attentions",
    "output_hidden_states",
    "output_scores",
    "pad_token_id",
    "prefix",
    "problem_type",
    "pruned_heads",
    "remove_invalid_values",
    "repetition_penalty",
    "return_dict",
    "return_dict_in_generate",
    "sep_token_id",
    "suppress_tokens",
    "task_specific_params",
    "temperature",
    "tf_legacy_loss",
    "tie_encoder_decoder",
    "tokenizer_class",
    "top_k",
    "top_p",
    "torch_dtype",
    "torchscript",
    "transformers_version",
    "typical_p",
    "use_bfloat16",
    "use_cache",
)

_MISSING = object()


class HuggingFaceConfig:
    """A Hugging Face `config.json`, read field by field.

    `config_from_hf` reads every field it translates through this object;
    `check_all_read` then fails on any field that was neither read nor
    ignored, so a field that changes the model is never dropped silently.
    Every value read is checked against its field's kind
    (`field_checks.FIELD_KINDS`: types, ranges, bounds) as it is read, and
    `check_all_read` checks the fields not read (ignored ones too) and
    that the heads fit, so a bad value fails naming its field before
    anything is built.

    Args:
        data: the parsed `config.json`.
        path: its path, for messages.
        model: what it is loaded as (e.g. `"LlamaBackbone"`), for
            messages.

    Attributes:
        derived_head_dim: whether the model derives its head size from
            the width and the head count (which must then divide it);
            None (the default): when the config has no `head_dim`.
            `HuggingFaceFamily.translate` sets it from the translated
            arguments (no `head_dim` argument, or None).
    """

    def __init__(self, data, path, model):
        self.data = dict(data)
        self.path = path
        self.model = model
        self.read = set()
        self.derived_head_dim = None

    def __contains__(self, key):
        return key in self.data

    def get(self, key, default=None):
        """The value of `key` (`default` when absent or null)."""
        self.read.add(key)
        value = self.data.get(key)
        if value is None:
            return default
        check_field(self.path, key, value)
        return value

    def require(self, key):
        """The value of `key`; raises naming it when absent or null."""
        self.read.add(key)
        value = self.data.get(key)
        if value is None:
            raise PresetError(
                f"{self.path}: the field {key!r} is missing; {self.model} "
                "needs it."
            )
        check_field(self.path, key, value)
        return value

    def expect(self, key, allowed, default=_MISSING):
        """Reads `key`, which must be one of `allowed` (absent: `default`).

        Raises naming the field, its value and the supported values.
        """
        self.read.add(key)
        if key not in self.data or self.data[key] is None:
            if default is _MISSING:
                return self.require(key)
            return default
        value = self.data[key]
        check_field(self.path, key, value)
        if value not in allowed:
            self.unsupported(key, value, allowed)
        return value

    def unsupported(self, key, value, supported=None, why=""):
        """Raises: the field `key` has a `value` this model cannot load."""
        listed = (
            f" Supported: {', '.join(repr(v) for v in supported)}."
            if supported is not None
            else ""
        )
        raise PresetError(
            f"{self.path}: {key}={value!r} changes the architecture in a "
            f"way {self.model} does not support{why}.{listed}"
        )

    def check_all_read(self, ignored):
        """Raises listing the fields neither read nor in `ignored`, or
        naming a bad value of a field that was not read (an ignored
        `max_position_embeddings`, `torch_dtype` / `dtype`) or heads that
        do not fit."""
        for key, value in self.data.items():
            check_field(self.path, key, value)
        derived = self.derived_head_dim
        if derived is None:
            derived = self.data.get("head_dim") is None
        check_heads(self.path, self.data, derived)
        unknown = sorted(
            set(self.data)
            - self.read
            - set(ignored)
            - set(COMMON_IGNORED_FIELDS)
        )
        if unknown:
            raise PresetError(
                f"{self.path}: field(s) {unknown} are not understood for "
                f"{self.model}. They may change the architecture, so the "
                "checkpoint is not loaded rather than loaded wrong."
            )


@dataclasses.dataclass(frozen=True)
class HuggingFaceFamily:
    """How one Hugging Face `model_type` loads into our backbone, and back.

    Args:
        model_type: the `model_type` of `config.json` (a tuple for
            aliases; export writes the first).
        backbone: name of the backbone class built by
            `Backbone.from_preset`.
        config_from_hf: `(HuggingFaceConfig) -> dict` of our constructor
            arguments. Read every field through the `HuggingFaceConfig`
            (`require`, `get`, `expect`, `unsupported`).
        config_to_hf: `(our config dict) -> dict` of `config.json` fields
            (`model_type` and `architectures` are added). Raise `ValueError`
            for a config Hugging Face cannot express.
        weights: the tensor table: a list of `conversions.Weight`, or a
            callable `(our config dict) -> list` when rows depend on it
            (fused tensors' offsets).
        also_loads: names of other backbone classes that load this
            checkpoint when called on them (`LlamaBackbone` for `llama`)
            and export to it.
        architectures: `config.json`'s `architectures` on export.
        ignored_fields: config fields this family knows change nothing we
            build (`max_position_embeddings`, `attention_dropout`, ...).
        ignorable_tensors: regexes (full match) of checkpoint tensors that
            are not weights of ours and may be present (`rotary_emb.inv_freq`
            caches, an `lm_head.weight` tied to the embedding).
        base_prefix: the prefix of the base model's tensors in a
            `...ForCausalLM` checkpoint; a checkpoint of the base model
            alone (no prefix) loads too. Table names carry it.
        old_names: `(regex, replacement)` pairs: how older checkpoints
            spell a table name (`LayerNorm.weight` as `LayerNorm.gamma`).
            A name the checkpoint lacks is looked up under each
            replacement (`re.sub`) in turn; export writes the table's.
        tensor_options: `(tensor names) -> dict` of constructor arguments
            that follow from which tensors a checkpoint holds rather than
            from its config (RoBERTa's pooler: `keep_pooler=True`), or
            None. Applied when weights load.
        ignorable_for_config: `(our config) -> regexes`, more
            `ignorable_tensors` that depend on the config (DeepSeek-V3's
            multi-token-prediction block after its `num_layers` blocks),
            or None.
    """

    model_type: object
    backbone: str
    config_from_hf: object
    config_to_hf: object
    weights: object
    also_loads: tuple = ()
    architectures: tuple = ()
    ignored_fields: tuple = ()
    ignorable_tensors: tuple = ()
    base_prefix: str = "model."
    old_names: tuple = ()
    tensor_options: object = None
    ignorable_for_config: object = None

    @property
    def model_types(self):
        if isinstance(self.model_type, str):
            return (self.model_type,)
        return tuple(self.model_type)

    @property
    def class_names(self):
        return (self.backbone, *self.also_loads)

    def table(self, config):
        """The `Weight` rows for our `config`."""
        if callable(self.weights):
            return list(self.weights(config))
        return list(self.weights)

    def ignorable(self, config):
        """The regexes of tensors our `config` may leave unused."""
        extra = ()
        if self.ignorable_for_config is not None:
            extra = tuple(self.ignorable_for_config(config))
        return tuple(self.ignorable_tensors) + extra

    def options_for_tensors(self, names):
        """Our arguments that the checkpoint's tensor `names` decide."""
        if self.tensor_options is None:
            return {}
        return dict(self.tensor_options(set(names)))

    def translate(self, data, path, owner):
        """Our constructor arguments for a `config.json`'s `data`."""
        config = HuggingFaceConfig(data, path, owner.__name__)
        arguments = self.config_from_hf(config)
        if "quantization_config" not in config.read:
            # Unless the family reads its own (gpt_oss's MXFP4), "fp8"
            # loads whatever the family: its weights are dequantized by
            # tensor, as the checkpoint's float8 dtypes say.
            read_quantization(config.get("quantization_config"), path)
        config.derived_head_dim = arguments.get("head_dim") is None
        config.check_all_read(self.ignored_fields)
        return arguments

    def export_config(self, backbone_config):
        """`config.json` for our config."""
        data = {
            "architectures": list(self.architectures),
            "model_type": self.model_types[0],
        }
        data.update(self.config_to_hf(dict(backbone_config)))
        return data

    def resolve_class(self, cls, path):
        """The class that `cls.from_preset` builds for this checkpoint."""
        classes = registered_backbones()
        if any(classes.get(name) is cls for name in self.class_names):
            return cls
        default = classes[self.backbone]
        if issubclass(default, cls):
            return default
        loads = " or ".join(self.class_names)
        raise ValueError(
            f"The Hugging Face checkpoint {path} is a "
            f"{self.model_types[0]!r} model, which loads as {loads}, not as "
            f"{cls.__name__}. Load it with {self.backbone}.from_preset or "
            "keras_nlp.models.Backbone.from_preset."
        )


_FAMILIES = {}
_BY_CLASS = {}


def register_family(family):
    """Registers `family` for its model types and classes; returns it."""
    for model_type in family.model_types:
        other = _FAMILIES.get(model_type)
        if other is not None and other is not family:
            raise ValueError(
                f"Two Hugging Face families claim model_type "
                f"{model_type!r}: for {other.backbone} and {family.backbone}."
            )
        _FAMILIES[model_type] = family
    for name in family.class_names:
        _BY_CLASS.setdefault(name, family)
    return family


def registered_families():
    """`{model_type: HuggingFaceFamily}` of every family."""
    return dict(_FAMILIES)


def family_for_model_type(model_type, path):
    families = registered_families()
    if model_type not in families:
        raise PresetError(
            f"{path}: model_type {model_type!r} has no Hugging Face loader in "
            f"keras_nlp. Supported model types: {', '.join(sorted(families))}."
        )
    return families[model_type]


def family_for_backbone(backbone_cls):
    """The family a backbone class exports to (its own or an ancestor's)."""
    for cls in backbone_cls.__mro__:
        if cls.__name__ in _BY_CLASS:
            return _BY_CLASS[cls.__name__]
    exporting = sorted(_BY_CLASS)
    raise ValueError(
        f"{backbone_cls.__name__} has no Hugging Face format in keras_nlp; "
        f"save_to_preset(..., format='huggingface') supports "
        f"{', '.join(exporting)}. Use format='keras'."
    )
