"""Text classifiers: an encoder backbone plus a classification head.

`TextClassifier` turns an encoder backbone of this library into a model
that maps the backbone's inputs to class logits `(batch, num_classes)`.
Each family's subclass (`BertTextClassifier`, `RobertaTextClassifier`,
...) only says what its head is: where it reads the backbone, whether it
has a pooler of its own, and its dropout names (`family_text_classifiers`).
The head's layers carry keras-hub's names (`logits`, `pooled_dense`), so
the variable paths of a keras-hub classifier's head are ours.

Under `keras.distribution.ModelParallel` with a layout map from
`get_layout_map`, the backbone is sharded by its plan and the head by
`head_layout_rules`: the head's pooler column-parallel on the model axis
like the backbone's pooler, the logits kernel row-parallel (its input
width on the model axis, the few classes whole). The classifier's
`layout_plan` covers both, and every built variable is checked against it.
"""

import keras

from keras_nlp.distribution.layout_map import active_layout_map
from keras_nlp.distribution.layout_map import verify_layouts
from keras_nlp.distribution.rules import DATA
from keras_nlp.distribution.rules import MODEL
from keras_nlp.distribution.shapes import VariableInfo
from keras_nlp.layers.dense import named_dense
from keras_nlp.layers.layout_rules import named_rule
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.backbone import BackboneTaskConfig
from keras_nlp.models.families.bert import POOLED_DIMS
from keras_nlp.models.task_checks import TaskRegistry
from keras_nlp.models.task_checks import check_backbone
from keras_nlp.models.task_head_layout import combined_plan
from keras_nlp.models.task_head_layout import plan_head
from keras_nlp.models.task_preprocessing import TextInputsMixin
from keras_nlp.models.task_preprocessing import check_sample_preprocessor
from keras_nlp.saving.huggingface.export import exporting_task_head
from keras_nlp.saving.huggingface.export import task_head_export
from keras_nlp.saving.huggingface.loading import huggingface_task_head
from keras_nlp.saving.huggingface.loading import load_head_weights
from keras_nlp.saving.huggingface.task_heads import TEXT_CLASSIFIER
from keras_nlp.saving.huggingface.task_heads import label_fields
from keras_nlp.saving.task_head_files import assign_stored_head
from keras_nlp.saving.task_head_files import read_head
from keras_nlp.saving.task_head_files import write_head

# The logits kernel `(pooled width, classes)`: it reads a pooled vector
# (the backbone's pooler or the head's own).
LOGITS_DIMS = ("pooled", "classes")
# What `save_to_preset` adds to the backbone's preset files.
# The stem of the head's files in a preset (`text_classifier.json`, ...).
HEAD_FILES = "text_classifier"
# The first token (`[CLS]`, `<s>`) and the last one (XLNet's `<cls>`).
FIRST_TOKEN = 0
LAST_TOKEN = -1
POOLED_OUTPUT = "pooled_output"

_TEXT_CLASSIFIERS = TaskRegistry("text classifier", "encoder")


def head_layout_rules(pooled_dense=True):
    """Layout rules of a classification head.

    The head's pooler `(hidden, pooled)` is column-parallel like the
    backbone's (`pooled` on the model axis, `hidden` on the data axis); the
    logits kernel `(pooled, classes)` is row-parallel, so the pooled
    vector, sharded on the model axis, is never gathered: one all-reduce
    of `(batch, classes)` sums the logits. The classes (2 to a few dozen)
    stay whole. Biases are replicated.

    Args:
        pooled_dense: bool, whether the head has a pooler of its own.
    """
    rules = [named_rule("logits/kernel", LOGITS_DIMS, {"pooled": MODEL})]
    if pooled_dense:
        rules.append(
            named_rule(
                "pooled_dense/kernel",
                POOLED_DIMS,
                {"pooled": MODEL, "hidden": DATA},
            )
        )
    return rules


def text_classifier_class(backbone_cls):
    """The `TextClassifier` subclass of a backbone class.

    Raises:
        ValueError: if the backbone has none (a decoder, say).
    """
    return _TEXT_CLASSIFIERS.lookup(backbone_cls)


class TextClassifier(TextInputsMixin, BackboneTaskConfig, keras.Model):
    """An encoder backbone and a classification head: class logits.

    Calling the model on the backbone's input dict (`token_ids`,
    `padding_mask`, and `segment_ids` where the backbone takes them)
    returns `(batch, num_classes)` logits, or probabilities with
    `activation="softmax"`.

    - `compile()` with no arguments uses keras-hub's defaults: Adam
      (learning rate 5e-5), sparse categorical cross-entropy (from logits
      unless the activation is softmax) and sparse categorical accuracy.
      `fit` takes the input dicts and integer labels; with a
      `preprocessor`, `fit`, `evaluate` and `predict` also take text: a
      batch of str, a tuple of two batches (pairs), or a `tf.data.Dataset`
      of them, packed by the preprocessor first.
    - `enable_lora(rank)` adds LoRA adapters to the backbone and freezes
      its other weights; the head stays trainable.
    - `get_layout_map(mesh)` lays out the backbone by its plan and the head
      by `head_layout_rules`, when the classifier is built in the
      distribution's scope.
    - `save_to_preset(dir)` writes the backbone's preset (LoRA merged) plus
      `text_classifier.json` (class and head arguments) and
      `text_classifier.weights.npz` (the head's weights by variable path);
      `from_preset(dir, num_classes=...)` reads them back.

    Each family's subclass (e.g. `keras_nlp.models.BertTextClassifier`)
    takes keras-hub's constructor arguments in keras-hub's order; build
    those, not this base class.

    Args:
        backbone: an encoder backbone of the subclass's `backbone_cls`.
        num_classes: int, the number of classes.
        preprocessor: optional, what packs text into the backbone's
            inputs in `fit`, `evaluate` and `predict`: a
            `keras_nlp.tokenizers.ClassifierPreprocessor`, or keras-hub's
            `XTextClassifierPreprocessor` (any callable as
            `preprocessor(x, y, sample_weight)`). Input dicts are never
            preprocessed.
        activation: optional activation of the logits (`"softmax"` for
            probabilities); `None` returns logits.
        hidden_dim: int, the width of the head's pooler, for heads that
            have one; defaults to the backbone's `hidden_dim`.
        dropout: float, the head's dropout rate (see each subclass).
        **kwargs: forwarded to `keras.Model` (`name`, ...).

    Example:

    ```python
    import numpy as np
    import keras_nlp

    backbone = keras_nlp.models.BertBackbone(
        vocabulary_size=64, num_layers=1, num_heads=2, hidden_dim=16,
        intermediate_dim=32, max_sequence_length=16,
    )
    classifier = keras_nlp.models.BertTextClassifier(backbone, num_classes=3)
    inputs = {
        "token_ids": np.array([[2, 5, 6, 3]], "int32"),
        "segment_ids": np.zeros((1, 4), "int32"),
        "padding_mask": np.ones((1, 4), "int32"),
    }
    classifier.predict(inputs, verbose=0).shape  # (1, 3)
    ```
    """

    # Set by each family's subclass:
    # The backbone class it serves; `None` on `TextClassifier` itself.
    backbone_cls = None
    # Where the head reads the backbone: its `"pooled_output"`, or the
    # sequence output at a position (`FIRST_TOKEN`, `LAST_TOKEN`).
    head_input = POOLED_OUTPUT
    # The activation of the head's own pooler `pooled_dense`, or `None`
    # for a head without one (it reads the backbone's pooler).
    pooled_activation = None
    # The dropout before the head's pooler (`None`: none) and the one
    # before the logits, by keras-hub's layer names.
    pooled_dropout_name = None
    output_dropout_name = "output_dropout"
    # DeBERTa: the dropout before the logits has the backbone's rate.
    output_dropout_from_backbone = False
    # Optimizer learning rate of `compile()` (ALBERT's is 1e-5).
    learning_rate = 5e-5

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _TEXT_CLASSIFIERS.register(cls)

    def __init__(
        self,
        backbone,
        num_classes,
        preprocessor=None,
        activation=None,
        *,
        hidden_dim=None,
        dropout=0.1,
        **kwargs,
    ):
        self._check_arguments(backbone, num_classes, hidden_dim, dropout)
        check_sample_preprocessor(type(self).__name__, preprocessor)
        head_width = None
        if self.pooled_activation is not None:
            head_width = hidden_dim or backbone.hidden_dim
        dtype = backbone.dtype_policy
        layout_map = active_layout_map()
        head_plan = None
        if layout_map is not None and backbone.layout_plan is not None:
            head_plan = self._plan_head(
                backbone, num_classes, head_width, layout_map
            )
            layout_map.add_head(head_plan)

        inputs = backbone.input
        outputs = backbone(inputs)
        if self.head_input == POOLED_OUTPUT:
            x = outputs[POOLED_OUTPUT]
        else:
            if isinstance(outputs, dict):
                outputs = outputs["sequence_output"]
            x = outputs[:, self.head_input, :]
        # Layers are created here, in keras-hub's order and names, before
        # the functional model: their paths are `logits/kernel`, ...
        if self.pooled_dropout_name:
            x = keras.layers.Dropout(
                dropout, dtype=dtype, name=self.pooled_dropout_name
            )(x)
        if head_width is not None:
            x = named_dense(
                head_width,
                POOLED_DIMS,
                activation=self.pooled_activation,
                kernel_initializer=_kernel_initializer(),
                dtype=dtype,
                name="pooled_dense",
            )(x)
        output_rate = (
            backbone.dropout if self.output_dropout_from_backbone else dropout
        )
        x = keras.layers.Dropout(
            output_rate, dtype=dtype, name=self.output_dropout_name
        )(x)
        logits = named_dense(
            num_classes,
            LOGITS_DIMS,
            activation=activation,
            kernel_initializer=_kernel_initializer(),
            dtype=dtype,
            name="logits",
        )(x)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)

        self.backbone = backbone
        self.preprocessor = preprocessor
        self.num_classes = num_classes
        self.activation = keras.activations.get(activation)
        self.hidden_dim = head_width
        self.dropout = dropout
        self._head_plan = head_plan
        if head_plan is not None:
            verify_layouts(self, self.layout_plan, layout_map.device_mesh)

    def _input_names(self):
        # keras-hub's packed dicts hold `segment_ids` even for backbones
        # without them (RoBERTa): only the backbone's inputs are fed.
        return tuple(self.backbone.input)

    def _check_arguments(self, backbone, num_classes, hidden_dim, dropout):
        name = type(self).__name__
        if self.backbone_cls is None:
            raise ValueError(
                "TextClassifier is the base class: build a family's "
                "classifier, e.g. keras_nlp.models.BertTextClassifier, or "
                "TextClassifier.from_preset(dir, num_classes=...)."
            )
        check_backbone(name, self.backbone_cls, backbone)
        for label, value in (
            ("num_classes", num_classes),
            ("hidden_dim", hidden_dim),
        ):
            if value is None and label == "hidden_dim":
                continue
            if (
                not isinstance(value, int)
                or isinstance(value, bool)
                or value < 1
            ):
                raise ValueError(
                    f"{name}: {label} must be a positive integer. "
                    f"Received: {label}={value!r}."
                )
        if hidden_dim is not None and self.pooled_activation is None:
            raise ValueError(
                f"{name}'s head has no pooler of its own (it reads the "
                "backbone's pooled output), so it takes no hidden_dim. "
                f"Received: hidden_dim={hidden_dim!r}."
            )
        if not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
            raise ValueError(
                f"{name}: dropout must be a rate in [0, 1). Received: "
                f"dropout={dropout!r}."
            )

    # === Layouts ===

    def _plan_head(self, backbone, num_classes, head_width, layout_map):
        """The head's `LayoutPlan` on the map's mesh and axes."""
        dtype = backbone.dtype_policy.variable_dtype
        pooled_width = backbone.hidden_dim
        variables = []
        if head_width is not None:
            variables += [
                VariableInfo(
                    "pooled_dense/kernel",
                    (backbone.hidden_dim, head_width),
                    dtype,
                    True,
                    POOLED_DIMS,
                ),
                VariableInfo(
                    "pooled_dense/bias", (head_width,), dtype, True, ("pooled",)
                ),
            ]
            pooled_width = head_width
        variables += [
            VariableInfo(
                "logits/kernel",
                (pooled_width, num_classes),
                dtype,
                True,
                LOGITS_DIMS,
            ),
            VariableInfo(
                "logits/bias", (num_classes,), dtype, True, ("classes",)
            ),
        ]
        return plan_head(
            type(self).__name__,
            head_layout_rules(head_width is not None),
            variables,
            layout_map,
        )

    @property
    def layout_plan(self):
        """The `LayoutPlan` of the backbone and the head, or `None` when
        built without a planned `ModelParallel` layout."""
        return combined_plan(self, self._head_plan)

    @classmethod
    def get_layout_map(cls, device_mesh, *args, **kwargs):
        """A layout map for the classifier: the backbone's plan, to which
        the head's layouts (`head_layout_rules`) are added when the
        classifier is built in the distribution's scope.

        Takes `Backbone.get_layout_map`'s arguments.

        Example:

        ```python
        import keras
        import keras_nlp

        devices = keras.distribution.list_devices()
        mesh = keras.distribution.DeviceMesh(
            (1, len(devices)), ("batch", "model"), devices
        )
        layout_map = keras_nlp.models.BertTextClassifier.get_layout_map(mesh)
        distribution = keras.distribution.ModelParallel(
            layout_map=layout_map, batch_dim_name="batch"
        )
        with distribution.scope():
            backbone = keras_nlp.models.BertBackbone(
                vocabulary_size=64, num_layers=1, num_heads=2,
                hidden_dim=16, intermediate_dim=32, max_sequence_length=16,
            )
            classifier = keras_nlp.models.BertTextClassifier(backbone, 2)
        classifier.layout_plan.weight("logits/kernel").spec
        ```
        """
        backbone_cls = cls.backbone_cls or Backbone
        return backbone_cls.get_layout_map(device_mesh, *args, **kwargs)

    # === Training ===

    def compile(
        self, optimizer="auto", loss="auto", *, metrics="auto", **kwargs
    ):
        """Configures training, with keras-hub's defaults.

        Args:
            optimizer: `"auto"` (Adam with the class's `learning_rate`,
                5e-5; ALBERT's 1e-5) or a Keras optimizer.
            loss: `"auto"` (sparse categorical cross-entropy, from logits
                unless the activation is softmax) or a Keras loss.
            metrics: `"auto"` (sparse categorical accuracy) or a list.
            **kwargs: forwarded to `keras.Model.compile`.
        """
        if optimizer == "auto":
            optimizer = keras.optimizers.Adam(self.learning_rate)
        if loss == "auto":
            from_logits = self.activation != keras.activations.softmax
            loss = keras.losses.SparseCategoricalCrossentropy(from_logits)
        if metrics == "auto":
            metrics = [keras.metrics.SparseCategoricalAccuracy()]
        super().compile(
            optimizer=optimizer, loss=loss, metrics=metrics, **kwargs
        )

    def enable_lora(self, rank, target_layer_names=None):
        """Adds LoRA adapters to the backbone (see `Backbone.enable_lora`).

        The backbone's other weights are frozen; the head stays trainable.
        Under a planned `ModelParallel`, call it in the distribution's
        scope.
        """
        self.backbone.enable_lora(rank, target_layer_names=target_layer_names)
        layout_map = active_layout_map()
        if self._head_plan is not None and layout_map is not None:
            # The backbone's new plan replaced the map's entries.
            layout_map.add_head(self._head_plan)
            verify_layouts(self, self.layout_plan, layout_map.device_mesh)

    # === Presets ===

    def head_config(self):
        """The head's constructor arguments (what `get_config` adds to the
        backbone's)."""
        config = {
            "num_classes": self.num_classes,
            "activation": keras.activations.serialize(self.activation),
            "dropout": self.dropout,
        }
        if self.pooled_activation is not None:
            config["hidden_dim"] = self.hidden_dim
        return config

    def head_weights(self):
        """The head's weights as `{variable path: NumPy array}`."""
        return {
            v.path: keras.ops.convert_to_numpy(v.value)
            for v in self._head_variables()
        }

    def _head_variables(self):
        # By identity: a backbone may hold a path the head also has
        # (RoBERTa's kept pooler is `pooled_dense` too).
        backbone_ids = {id(v) for v in self.backbone.weights}
        return [v for v in self.weights if id(v) not in backbone_ids]

    def save_to_preset(self, preset_dir, **kwargs):
        """Saves the backbone's preset, then the head's files beside it.

        The backbone is written as `Backbone.save_to_preset` writes it
        (LoRA adapters merged into their kernels). Added:
        `text_classifier.json` (`{"class_name", "config"}`: the class and
        `head_config()`) and `text_classifier.weights.npz` (the head's
        weights by variable path, gathered from their shards).

        With `format="huggingface"`, a `*ForSequenceClassification`
        checkpoint instead: the backbone's tensors and the head's under
        Hugging Face's names, `architectures` naming that class, and
        `id2label`/`label2id` (as imported, else `LABEL_<i>`).

        Args:
            preset_dir: the directory.
            **kwargs: forwarded to the backbone's `save_to_preset`.

        Raises:
            ValueError: `format="huggingface"` for a classifier Hugging
                Face cannot express (an activation, another head width, a
                family without a mapped head).
        """
        if kwargs.get("format") == "huggingface":
            self._save_huggingface(preset_dir, kwargs)
            return
        self.backbone.save_to_preset(preset_dir, **kwargs)
        write_head(
            preset_dir,
            HEAD_FILES,
            type(self).__name__,
            self.head_config(),
            self.head_weights(),
        )

    def _save_huggingface(self, preset_dir, kwargs):
        """Writes a `*ForSequenceClassification` checkpoint: the backbone's
        tensors, the head's, and `id2label` (as imported, else
        `LABEL_<i>`)."""
        name = type(self).__name__
        if self.activation != keras.activations.linear:
            raise ValueError(
                f"{name} with activation="
                f"{keras.activations.serialize(self.activation)!r} cannot be "
                "saved in Hugging Face format: its classifiers return "
                "logits. Save it with format='keras'."
            )
        if self.hidden_dim not in (None, self.backbone.hidden_dim):
            raise ValueError(
                f"{name} with hidden_dim={self.hidden_dim} cannot be saved "
                "in Hugging Face format: its head's dense layer keeps the "
                f"backbone's width ({self.backbone.hidden_dim})."
            )
        fields = label_fields(
            self.num_classes, getattr(self, "_huggingface_id2label", None)
        )
        export = task_head_export(
            self.backbone,
            TEXT_CLASSIFIER,
            self._head_variables(),
            fields,
            name,
        )
        with exporting_task_head(export):
            self.backbone.save_to_preset(preset_dir, **kwargs)

    @classmethod
    def from_preset(cls, preset, load_weights=True, **kwargs):
        """Builds a classifier from a preset directory.

        The backbone is built as `Backbone.from_preset` builds it (ours or
        keras-hub's directory; inside a `ModelParallel` scope, straight
        into its shards). When the directory holds a head saved by
        `save_to_preset` with the same `num_classes` (and head width), its
        weights are loaded; otherwise the head is fresh. A Hugging Face
        `*ForSequenceClassification` checkpoint loads with its head
        (`num_classes` is its `num_labels`), into shards like the
        backbone's; a pretraining checkpoint (`*Model`, `*ForMaskedLM`)
        gives a fresh head; another head type is refused. On
        `TextClassifier` itself, the subclass comes from the backbone.

        Args:
            preset: a preset directory, or a built-in preset name (configs
                only: with `load_weights=False`).
            load_weights: bool.
            **kwargs: the classifier's arguments (`num_classes`,
                `activation`, `hidden_dim`, `dropout`, `preprocessor`;
                `num_classes` defaults to the stored head's); the rest go
                to the backbone's `from_preset`.

        Raises:
            ValueError: no `num_classes` and no stored head.
            PresetError: a Hugging Face checkpoint whose `num_labels`
                differs from `num_classes`, of another head type, or whose
                head tensors do not fit (the message names them).
        """
        head_keys = ("num_classes", "activation", "hidden_dim", "dropout")
        head_kwargs = {k: kwargs.pop(k) for k in head_keys if k in kwargs}
        preprocessor = kwargs.pop("preprocessor", None)
        stored, weights = read_head(preset, HEAD_FILES)
        # A Hugging Face `*ForSequenceClassification` checkpoint's head.
        found = huggingface_task_head(preset, TEXT_CLASSIFIER, cls.__name__)
        if found is not None and found.head is not None:
            head_kwargs["num_classes"] = found.num_classes(
                head_kwargs.get("num_classes"), cls.__name__
            )
        if "num_classes" not in head_kwargs:
            if stored is None:
                raise ValueError(
                    f"{cls.__name__}.from_preset needs num_classes=: "
                    f"{preset!r} holds no classification head."
                )
            head_kwargs = {**stored["config"], **head_kwargs}
        backbone = (cls.backbone_cls or Backbone).from_preset(
            preset, load_weights=load_weights, **kwargs
        )
        task_cls = (
            cls if cls.backbone_cls else text_classifier_class(type(backbone))
        )
        classifier = task_cls(
            backbone, preprocessor=preprocessor, **head_kwargs
        )
        if found is not None and found.head is not None:
            classifier._huggingface_id2label = found.data.get("id2label")
            if load_weights:
                load_head_weights(
                    classifier._head_variables(),
                    preset,
                    found.head,
                    task_cls.__name__,
                )
        elif load_weights and weights is not None:
            assign_stored_head(
                classifier._head_variables(),
                stored,
                weights,
                task_cls.__name__,
                preset,
            )
        return classifier


def _kernel_initializer():
    return keras.initializers.TruncatedNormal(stddev=0.02)
