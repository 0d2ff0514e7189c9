"""Masked language models: an encoder backbone plus a tied masked-LM head.

`MaskedLM` predicts the tokens at given positions of an encoder's input:
the sequence output at `mask_positions` goes through a dense layer, a
LayerNorm and the backbone's token embedding run in reverse (tied, as in
keras-hub), plus a bias per token. The head's variables carry keras-hub's
paths (`mlm_head/intermediate_dense/kernel`, `mlm_head/output_bias`, ...),
so its task weights transfer. Each family's subclass only names its
backbone and the dense layer's activation (`family_masked_lms`).

Under a planned `keras.distribution.ModelParallel` the backbone follows
its plan (the tied table included) and the head follows
`masked_lm_head_rules`; `layout_plan` covers both.
"""

import keras
from keras import ops

from keras_nlp.distribution.layout_map import active_layout_map
from keras_nlp.distribution.layout_map import verify_layouts
from keras_nlp.distribution.rules import DATA
from keras_nlp.distribution.rules import MODEL
from keras_nlp.distribution.shapes import VariableInfo
from keras_nlp.layers.common import get_activation
from keras_nlp.layers.dense import named_dense
from keras_nlp.layers.layout_rules import named_rule
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.backbone import BackboneTaskConfig
from keras_nlp.models.task_checks import check_backbone
from keras_nlp.models.task_head_layout import combined_plan
from keras_nlp.models.task_head_layout import plan_head
from keras_nlp.models.task_preprocessing import TextInputsMixin
from keras_nlp.models.task_preprocessing import check_sample_preprocessor
from keras_nlp.saving.huggingface.export import exporting_task_head
from keras_nlp.saving.huggingface.export import task_head_export
from keras_nlp.saving.huggingface.loading import huggingface_task_head
from keras_nlp.saving.huggingface.loading import load_head_weights
from keras_nlp.saving.huggingface.task_heads import MASKED_LM
from keras_nlp.saving.preset_files import PresetError
from keras_nlp.saving.task_head_files import assign_stored_head
from keras_nlp.saving.task_head_files import read_head
from keras_nlp.saving.task_head_files import write_head

# The head's dense layer `(hidden, embedding)`: from the encoder's width to
# the token table's (ALBERT's narrower `embedding_dim`).
INTERMEDIATE_DIMS = ("hidden", "embedding")
HEAD_NAME = "mlm_head"
# The stem of the head's files in a preset (`masked_lm.json`, ...).
HEAD_FILES = "masked_lm"


def masked_lm_head_rules():
    """Layout rules of the masked-LM head.

    The dense layer is column-parallel like the poolers (`embedding` on the
    model axis, `hidden` on the data axis); the per-token bias is split by
    vocabulary on the model axis like the logits the tied table gives, or
    replicated where the axis does not divide the vocabulary.
    """
    head = HEAD_NAME + "/"
    return [
        named_rule(
            head + "intermediate_dense/kernel",
            INTERMEDIATE_DIMS,
            {"embedding": MODEL, "hidden": DATA},
        ),
        named_rule(head + "output_bias", ("vocab",), {"vocab": MODEL}, {}),
    ]


class MaskedLMHead(keras.layers.Layer):
    """Gathers masked positions and scores every token there.

    `call(sequence_output, mask_positions)` returns logits
    `(batch, masked, vocabulary)`: the hidden states at `mask_positions`
    through a dense layer (to the table's width), a LayerNorm, the tied
    token embedding reversed, and `output_bias`.

    Args:
        token_embedding: the backbone's token embedding (reversible).
        intermediate_activation: the dense layer's activation.
        layer_norm_epsilon: float, the LayerNorm's epsilon.
        **kwargs: forwarded to `keras.layers.Layer` (`name`, `dtype`).
    """

    def __init__(
        self,
        token_embedding,
        intermediate_activation="gelu",
        layer_norm_epsilon=1e-5,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.token_embedding = token_embedding
        self.intermediate_activation = intermediate_activation
        self.layer_norm_epsilon = layer_norm_epsilon

    def build(self, sequence_output_shape, mask_positions_shape=None):
        width = self.token_embedding.output_dim
        self.intermediate_dense = named_dense(
            width,
            INTERMEDIATE_DIMS,
            activation=get_activation(self.intermediate_activation),
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02),
            dtype=self.dtype_policy,
            name="intermediate_dense",
        )
        self.intermediate_layer_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon,
            dtype=self.dtype_policy,
            name="intermediate_layer_norm",
        )
        self.intermediate_dense.build((None, None, sequence_output_shape[-1]))
        self.intermediate_layer_norm.build((None, None, width))
        self.output_bias = self.add_weight(
            name="output_bias",
            shape=(self.token_embedding.input_dim,),
            initializer="zeros",
        )

    def call(self, sequence_output, mask_positions):
        positions = ops.expand_dims(ops.cast(mask_positions, "int32"), -1)
        x = ops.take_along_axis(sequence_output, positions, axis=1)
        x = self.intermediate_layer_norm(self.intermediate_dense(x))
        logits = self.token_embedding(x, reverse=True)
        return logits + ops.cast(self.output_bias, logits.dtype)


def _stored_arguments(config, preset):
    """The head's constructor arguments saved in `masked_lm.json`
    (none before the epsilon was saved)."""
    if "layer_norm_epsilon" not in config:
        return {}
    epsilon = config["layer_norm_epsilon"]
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)):
        epsilon = None
    if epsilon is None or not epsilon > 0:
        raise PresetError(
            f"{preset}: {HEAD_FILES}.json's layer_norm_epsilon must be a "
            "positive number, as `save_to_preset` writes it. Received: "
            f"{config['layer_norm_epsilon']!r}."
        )
    return {"layer_norm_epsilon": float(epsilon)}


class MaskedLM(TextInputsMixin, BackboneTaskConfig, keras.Model):
    """An encoder backbone and a tied masked-LM head: token logits.

    Calling the model on the backbone's input dict plus `mask_positions`
    (int `(batch, masked)`) returns logits `(batch, masked, vocabulary)`.
    `compile()` with no arguments uses keras-hub's defaults (Adam 5e-5,
    cross-entropy from logits, accuracy weighted by the sample weights);
    `fit` takes the masked tokens as labels. `enable_lora` adds adapters
    to the backbone. `save_to_preset` writes the backbone's preset plus
    `masked_lm.json` and `masked_lm.weights.npz` (the head's own weights by
    path; the table is the backbone's), which `from_preset` reads.

    Build a family's subclass (e.g. `keras_nlp.models.BertMaskedLM`).

    Args:
        backbone: an encoder backbone of the subclass's `backbone_cls`.
        preprocessor: optional, what makes raw text the model's inputs
            in `fit`, `evaluate` and `predict`: keras-hub's
            `XMaskedLMPreprocessor` (it picks the masked positions), or
            any callable as `preprocessor(x, y, sample_weight)` returning
            the inputs dict with `mask_positions`.
        layer_norm_epsilon: keyword-only, the epsilon of the head's
            LayerNorm: keras-hub's 1e-5 by default; a Hugging Face
            checkpoint's head sets its own (BERT's 1e-12) in `from_preset`.
        **kwargs: forwarded to `keras.Model`.

    Example:

    ```python
    import numpy as np
    import keras_nlp

    backbone = keras_nlp.models.BertBackbone(
        vocabulary_size=64, num_layers=1, num_heads=2, hidden_dim=16,
        intermediate_dim=32, max_sequence_length=16,
    )
    masked_lm = keras_nlp.models.BertMaskedLM(backbone)
    inputs = {
        "token_ids": np.array([[2, 5, 1, 3]], "int32"),
        "segment_ids": np.zeros((1, 4), "int32"),
        "padding_mask": np.ones((1, 4), "int32"),
        "mask_positions": np.array([[2]], "int32"),
    }
    masked_lm.predict(inputs, verbose=0).shape  # (1, 1, 64)
    ```
    """

    # Set by each family's subclass.
    backbone_cls = None
    intermediate_activation = "gelu"

    def __init__(
        self, backbone, preprocessor=None, *, layer_norm_epsilon=1e-5, **kwargs
    ):
        name = type(self).__name__
        if self.backbone_cls is None:
            raise ValueError(
                "MaskedLM is the base class: build a family's masked LM, "
                "e.g. keras_nlp.models.BertMaskedLM."
            )
        check_backbone(name, self.backbone_cls, backbone)
        check_sample_preprocessor(name, preprocessor)
        layout_map = active_layout_map()
        head_plan = None
        if layout_map is not None and backbone.layout_plan is not None:
            head_plan = plan_head(
                name,
                masked_lm_head_rules(),
                self._head_variable_infos(backbone),
                layout_map,
            )
            layout_map.add_head(head_plan)
        inputs = {
            **backbone.input,
            "mask_positions": keras.Input(
                shape=(None,), dtype="int32", name="mask_positions"
            ),
        }
        outputs = backbone(backbone.input)
        if isinstance(outputs, dict):
            outputs = outputs["sequence_output"]
        head = MaskedLMHead(
            backbone.token_embedding,
            self.intermediate_activation,
            layer_norm_epsilon=layer_norm_epsilon,
            dtype=backbone.dtype_policy,
            name=HEAD_NAME,
        )
        logits = head(outputs, inputs["mask_positions"])
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
        self.backbone = backbone
        self.preprocessor = preprocessor
        self.masked_lm_head = head
        self.layer_norm_epsilon = layer_norm_epsilon
        self._head_plan = head_plan
        if head_plan is not None:
            verify_layouts(self, self.layout_plan, layout_map.device_mesh)

    def _input_names(self):
        return (*self.backbone.input, "mask_positions")

    def head_config(self):
        return {"layer_norm_epsilon": self.layer_norm_epsilon}

    @staticmethod
    def _head_variable_infos(backbone):
        table = backbone.token_embedding
        dtype = backbone.dtype_policy.variable_dtype
        hidden, width = backbone.hidden_dim, table.output_dim
        head = HEAD_NAME + "/"
        return [
            VariableInfo(
                head + "intermediate_dense/kernel",
                (hidden, width),
                dtype,
                True,
                INTERMEDIATE_DIMS,
            ),
            VariableInfo(
                head + "intermediate_dense/bias",
                (width,),
                dtype,
                True,
                ("embedding",),
            ),
            VariableInfo(
                head + "intermediate_layer_norm/gamma", (width,), dtype, True
            ),
            VariableInfo(
                head + "intermediate_layer_norm/beta", (width,), dtype, True
            ),
            VariableInfo(
                head + "output_bias",
                (table.input_dim,),
                dtype,
                True,
                ("vocab",),
            ),
        ]

    def _head_variables(self):
        backbone_ids = {id(v) for v in self.backbone.weights}
        return [v for v in self.weights if id(v) not in backbone_ids]

    @property
    def layout_plan(self):
        """The `LayoutPlan` of the backbone and the head, or `None`."""
        return combined_plan(self, self._head_plan)

    @classmethod
    def get_layout_map(cls, device_mesh, *args, **kwargs):
        """The backbone's layout map (`Backbone.get_layout_map`'s
        arguments); the head's layouts are added when the masked LM is
        built in the distribution's scope."""
        return (cls.backbone_cls or Backbone).get_layout_map(
            device_mesh, *args, **kwargs
        )

    def compile(
        self,
        optimizer="auto",
        loss="auto",
        *,
        weighted_metrics="auto",
        **kwargs,
    ):
        """Configures training, with keras-hub's defaults.

        Args:
            optimizer: `"auto"` (Adam, 5e-5) or a Keras optimizer.
            loss: `"auto"` (sparse categorical cross-entropy from logits)
                or a Keras loss.
            weighted_metrics: `"auto"` (sparse categorical accuracy) or a
                list.
            **kwargs: forwarded to `keras.Model.compile`.
        """
        if optimizer == "auto":
            optimizer = keras.optimizers.Adam(5e-5)
        if loss == "auto":
            loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        if weighted_metrics == "auto":
            weighted_metrics = [keras.metrics.SparseCategoricalAccuracy()]
        super().compile(
            optimizer=optimizer,
            loss=loss,
            weighted_metrics=weighted_metrics,
            **kwargs,
        )

    def enable_lora(self, rank, target_layer_names=None):
        """Adds LoRA adapters to the backbone; the head stays trainable."""
        self.backbone.enable_lora(rank, target_layer_names=target_layer_names)
        layout_map = active_layout_map()
        if self._head_plan is not None and layout_map is not None:
            layout_map.add_head(self._head_plan)
            verify_layouts(self, self.layout_plan, layout_map.device_mesh)

    def save_to_preset(self, preset_dir, **kwargs):
        """Saves the backbone's preset (`Backbone.save_to_preset`), then
        `masked_lm.json` (the class) and `masked_lm.weights.npz` (the
        head's own weights by path, gathered from their shards).

        With `format="huggingface"`, a `*ForMaskedLM` checkpoint: the
        backbone's tensors and the head's (the decoder is tied to the token
        embedding, so not written)."""
        if kwargs.get("format") == "huggingface":
            export = task_head_export(
                self.backbone,
                MASKED_LM,
                self._head_variables(),
                {},
                type(self).__name__,
            )
            with exporting_task_head(export):
                self.backbone.save_to_preset(preset_dir, **kwargs)
            return
        self.backbone.save_to_preset(preset_dir, **kwargs)
        weights = {
            v.path: keras.ops.convert_to_numpy(v.value)
            for v in self._head_variables()
        }
        write_head(
            preset_dir,
            HEAD_FILES,
            type(self).__name__,
            self.head_config(),
            weights,
        )

    @classmethod
    def from_preset(cls, preset, load_weights=True, **kwargs):
        """Builds a masked LM from a preset directory: the backbone as
        `Backbone.from_preset` builds it, and the head saved by
        `save_to_preset` if the directory holds one of the same shapes
        (else a fresh head). A Hugging Face `*ForMaskedLM` checkpoint
        loads with its head, into shards like the backbone's; its tied
        decoder is the backbone's token embedding.

        Args:
            preset: a preset directory (or a built-in preset name, with
                `load_weights=False`).
            load_weights: bool.
            **kwargs: `preprocessor`, and the backbone's `from_preset`
                arguments.

        Raises:
            PresetError: a Hugging Face checkpoint of another head type
                (a fine-tuned classifier), whose head activation differs
                from ours, or whose head tensors do not fit.
        """
        preprocessor = kwargs.pop("preprocessor", None)
        # A Hugging Face `*ForMaskedLM` checkpoint's head (checked first).
        found = huggingface_task_head(preset, MASKED_LM, cls.__name__)
        backbone = cls.backbone_cls.from_preset(
            preset, load_weights=load_weights, **kwargs
        )
        stored, weights = read_head(preset, HEAD_FILES)
        # The head computes what its weights were trained with: a Hugging
        # Face head's epsilon, or the one saved with the head.
        arguments = {}
        if found is not None and found.head is not None:
            arguments = found.head.task_arguments
        elif stored is not None and isinstance(stored.get("config"), dict):
            arguments = _stored_arguments(stored["config"], preset)
        masked_lm = cls(backbone, preprocessor=preprocessor, **arguments)
        if found is not None and found.head is not None:
            if load_weights:
                load_head_weights(
                    masked_lm._head_variables(),
                    preset,
                    found.head,
                    cls.__name__,
                )
        elif load_weights and weights is not None:
            assign_stored_head(
                masked_lm._head_variables(),
                stored,
                weights,
                cls.__name__,
                preset,
            )
        return masked_lm
