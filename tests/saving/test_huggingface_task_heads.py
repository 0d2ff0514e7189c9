"""Hugging Face task checkpoints: `*ForSequenceClassification` and
`*ForMaskedLM` heads load into our task models and export back.

Each row writes a tiny checkpoint as `transformers` saves that class: the
encoder's tensors under the class's prefix (our backbone's export, whose
names the family tests check), plus the head's tensors under Hugging
Face's names and shapes, the decoder of a masked-LM head tied to the word
embeddings (so not saved), and the class's `config.json` fields
(`architectures`, `id2label`/`label2id`). The head is then computed in
NumPy from those very tensors, as Hugging Face's module computes it, on
the loaded backbone's outputs.
"""

import contextlib
import dataclasses
import json

import keras
import numpy as np
import pytest
from safetensors.numpy import load_file
from safetensors.numpy import save_file
from scipy.special import erf

from keras_nlp import models
from keras_nlp.saving.preset_files import PresetError
from tests.models.backbone_checks import make_mesh
from tests.models.backbone_checks import random_inputs
from tests.saving.huggingface_checkpoints import assert_follows_plan
from tests.saving.huggingface_checkpoints import randomize

VOCABULARY, HIDDEN, LABELS = 64, 16, 3
_SMALL = dict(
    vocabulary_size=VOCABULARY,
    num_layers=1,
    num_heads=2,
    hidden_dim=HIDDEN,
    intermediate_dim=32,
    max_sequence_length=16,
)


def _gelu(x):
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def _tanh_gelu(x):
    """Hugging Face's `gelu_new`."""
    inner = np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)
    return 0.5 * x * (1.0 + np.tanh(inner))


def _layer_norm(x, gamma, beta, epsilon):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


def _linear(tensors, name, x):
    return x @ tensors[name + ".weight"].T + tensors[name + ".bias"]


def _dense(rng, name, rows, columns, scale=0.5):
    return {
        name + ".weight": rng.normal(0, scale, (rows, columns)),
        name + ".bias": rng.normal(0, scale, (rows,)),
    }


@dataclasses.dataclass(frozen=True)
class HeadCase:
    """One task checkpoint.

    Attributes:
        name: the test id.
        task: our task class name.
        architecture: the Hugging Face class written.
        backbone: `(our backbone class, constructor arguments)`.
        head: `rng -> {tensor name: array}`, the head's tensors.
        reference: `(head tensors, checkpoint tensors, backbone outputs,
            inputs) -> logits`, Hugging Face's head in NumPy.
        drop: prefix of encoder tensors the class has none of (the
            pooler of a masked LM).
        atol: logits tolerance against the reference.
    """

    name: str
    task: str
    architecture: str
    backbone: tuple
    head: object
    reference: object
    drop: str = None
    atol: float = 2e-5

    @property
    def masked(self):
        return "MaskedLM" in self.task


def _bert_classifier(tensors, _, outputs, inputs):
    return _linear(tensors, "classifier", outputs["pooled_output"])


def _distil_bert_classifier(tensors, _, outputs, inputs):
    first = outputs["sequence_output"][:, 0]
    pooled = np.maximum(_linear(tensors, "pre_classifier", first), 0.0)
    return _linear(tensors, "classifier", pooled)


def _roberta_classifier(tensors, _, outputs, inputs):
    first = outputs["sequence_output"][:, 0]
    pooled = np.tanh(_linear(tensors, "classifier.dense", first))
    return _linear(tensors, "classifier.out_proj", pooled)


def _masked_lm(dense, norm, bias, embeddings, epsilon, activation=_gelu):
    """The masked-LM head (`transform` dense, GELU, LayerNorm, the tied
    decoder and the bias) at the masked positions."""

    def reference(tensors, written, outputs, inputs):
        sequence = outputs["sequence_output"]
        positions = inputs["mask_positions"][..., None]
        x = np.take_along_axis(sequence, positions, axis=1)
        x = activation(_linear(tensors, dense, x))
        x = _layer_norm(
            x, tensors[norm + ".weight"], tensors[norm + ".bias"], epsilon
        )
        return x @ written[embeddings].T + tensors[bias]

    return reference


def _masked_lm_head(dense, norm, bias, width=HIDDEN):
    """Its tensors; `width`: the token embedding's (ALBERT's is not the
    hidden width)."""

    def head(rng):
        return {
            **_dense(rng, dense, width, HIDDEN),
            norm + ".weight": rng.normal(1, 0.2, (width,)),
            norm + ".bias": rng.normal(0, 0.2, (width,)),
            bias: rng.normal(0, 0.5, (VOCABULARY,)),
        }

    return head


_BERT = (models.BertBackbone, dict(_SMALL, hidden_activation="gelu"))
_ROBERTA = (models.RobertaBackbone, _SMALL)
_DISTIL_BERT = (models.DistilBertBackbone, _SMALL)
_ALBERT = (models.AlbertBackbone, dict(_SMALL, num_layers=2, embedding_dim=8))

CASES = [
    HeadCase(
        "bert_classifier",
        "BertTextClassifier",
        "BertForSequenceClassification",
        _BERT,
        lambda rng: _dense(rng, "classifier", LABELS, HIDDEN),
        _bert_classifier,
    ),
    HeadCase(
        "roberta_classifier",
        "RobertaTextClassifier",
        "RobertaForSequenceClassification",
        _ROBERTA,
        lambda rng: {
            **_dense(rng, "classifier.dense", HIDDEN, HIDDEN),
            **_dense(rng, "classifier.out_proj", LABELS, HIDDEN),
        },
        _roberta_classifier,
    ),
    HeadCase(
        "bert_masked_lm",
        "BertMaskedLM",
        "BertForMaskedLM",
        _BERT,
        _masked_lm_head(
            "cls.predictions.transform.dense",
            "cls.predictions.transform.LayerNorm",
            "cls.predictions.bias",
        ),
        _masked_lm(
            "cls.predictions.transform.dense",
            "cls.predictions.transform.LayerNorm",
            "cls.predictions.bias",
            "bert.embeddings.word_embeddings.weight",
            1e-12,
        ),
        # The head's LayerNorm takes the checkpoint's 1e-12 (keras-hub's
        # 1e-5 was 7.8e-5 apart here).
        drop="bert.pooler.",
    ),
    HeadCase(
        "roberta_masked_lm",
        "RobertaMaskedLM",
        "RobertaForMaskedLM",
        _ROBERTA,
        _masked_lm_head("lm_head.dense", "lm_head.layer_norm", "lm_head.bias"),
        _masked_lm(
            "lm_head.dense",
            "lm_head.layer_norm",
            "lm_head.bias",
            "roberta.embeddings.word_embeddings.weight",
            1e-5,
        ),
    ),
    HeadCase(
        "distil_bert_classifier",
        "DistilBertTextClassifier",
        "DistilBertForSequenceClassification",
        _DISTIL_BERT,
        lambda rng: {
            **_dense(rng, "pre_classifier", HIDDEN, HIDDEN),
            **_dense(rng, "classifier", LABELS, HIDDEN),
        },
        _distil_bert_classifier,
    ),
    HeadCase(
        "distil_bert_masked_lm",
        "DistilBertMaskedLM",
        "DistilBertForMaskedLM",
        _DISTIL_BERT,
        _masked_lm_head(
            "vocab_transform", "vocab_layer_norm", "vocab_projector.bias"
        ),
        _masked_lm(
            "vocab_transform",
            "vocab_layer_norm",
            "vocab_projector.bias",
            "distilbert.embeddings.word_embeddings.weight",
            1e-12,
        ),
    ),
    HeadCase(
        "albert_classifier",
        "AlbertTextClassifier",
        "AlbertForSequenceClassification",
        _ALBERT,
        lambda rng: _dense(rng, "classifier", LABELS, HIDDEN),
        _bert_classifier,
    ),
    # Dense to the embedding width, `gelu_new` (ALBERT's default), the
    # LayerNorm at 1e-12, as BERT's.
    HeadCase(
        "albert_masked_lm",
        "AlbertMaskedLM",
        "AlbertForMaskedLM",
        _ALBERT,
        _masked_lm_head(
            "predictions.dense",
            "predictions.LayerNorm",
            "predictions.bias",
            width=8,
        ),
        _masked_lm(
            "predictions.dense",
            "predictions.LayerNorm",
            "predictions.bias",
            "albert.embeddings.word_embeddings.weight",
            1e-12,
            activation=_tanh_gelu,
        ),
        drop="albert.pooler",
    ),
]
_BY_NAME = {case.name: case for case in CASES}


def _inputs(case):
    with_segments = (models.BertBackbone, models.AlbertBackbone)
    segments = 2 if case.backbone[0] in with_segments else None
    inputs = random_inputs(VOCABULARY, batch=2, length=8, num_segments=segments)
    if case.masked:
        inputs["mask_positions"] = np.array([[1, 4], [5, 7]], "int32")
    return inputs


@pytest.fixture(scope="module")
def encoders(tmp_path_factory):
    """`{backbone class: (tensors, config.json)}` of a random tiny encoder
    in Hugging Face's form, written once."""
    written = {}
    for backbone_cls, config in (_BERT, _ROBERTA, _DISTIL_BERT, _ALBERT):
        path = tmp_path_factory.mktemp(backbone_cls.__name__)
        randomize(backbone_cls(**config)).save_to_preset(
            str(path / "base"), format="huggingface"
        )
        written[backbone_cls] = (
            load_file(str(path / "base" / "model.safetensors")),
            json.loads((path / "base" / "config.json").read_text()),
        )
    return written


def write_task_checkpoint(case, encoders, path, **fields):
    """`case`'s checkpoint at `path`; returns `(head tensors, all)`."""
    tensors, config = encoders[case.backbone[0]]
    rng = np.random.default_rng(len(case.name))
    head = {k: v.astype("float32") for k, v in case.head(rng).items()}
    written = {
        name: value
        for name, value in tensors.items()
        if case.drop is None or not name.startswith(case.drop)
    }
    written.update(head)
    config = dict(config, architectures=[case.architecture])
    if not case.masked:
        labels = {str(i): f"label_{i}" for i in range(LABELS)}
        config.update(
            id2label=labels, label2id={v: int(k) for k, v in labels.items()}
        )
    config.update(fields)
    path.mkdir()
    save_file(written, str(path / "model.safetensors"))
    (path / "config.json").write_text(json.dumps(config))
    return head, written


def _logits(model, inputs):
    return keras.ops.convert_to_numpy(model(inputs, training=False))


def _backbone_outputs(model, inputs):
    outputs = model.backbone(
        {k: v for k, v in inputs.items() if k != "mask_positions"}
    )
    if not isinstance(outputs, dict):
        outputs = {"sequence_output": outputs}
    return {k: keras.ops.convert_to_numpy(v) for k, v in outputs.items()}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_head_loads_and_exports(case, encoders, tmp_path):
    head, written = write_task_checkpoint(case, encoders, tmp_path / "hf")
    task_cls = getattr(models, case.task)
    with pytest.warns(UserWarning) if case.drop else contextlib.nullcontext():
        ours = task_cls.from_preset(str(tmp_path / "hf"))
    if not case.masked:
        assert ours.num_classes == LABELS
    inputs = _inputs(case)
    logits = _logits(ours, inputs)
    expected = case.reference(
        head, written, _backbone_outputs(ours, inputs), inputs
    )
    np.testing.assert_allclose(logits, expected, atol=case.atol, rtol=1e-5)

    ours.save_to_preset(str(tmp_path / "export"), format="huggingface")
    exported = load_file(str(tmp_path / "export" / "model.safetensors"))
    config = json.loads((tmp_path / "export" / "config.json").read_text())
    assert config["architectures"] == [case.architecture]
    for name, value in head.items():
        np.testing.assert_array_equal(exported[name], value, err_msg=name)
    if not case.masked:
        assert config["id2label"] == {
            str(i): f"label_{i}" for i in range(LABELS)
        }
    reloaded = task_cls.from_preset(str(tmp_path / "export"))
    np.testing.assert_array_equal(_logits(reloaded, inputs), logits)
    if case.masked:
        # Our own preset keeps the head's epsilon (the checkpoint's).
        ours.save_to_preset(str(tmp_path / "ours"))
        reloaded = task_cls.from_preset(str(tmp_path / "ours"))
        assert reloaded.layer_norm_epsilon == ours.layer_norm_epsilon
        np.testing.assert_array_equal(_logits(reloaded, inputs), logits)


@pytest.mark.parametrize("name", ["roberta_classifier", "bert_masked_lm"])
def test_head_loads_into_shards(name, encoders, tmp_path):
    case = _BY_NAME[name]
    write_task_checkpoint(case, encoders, tmp_path / "hf")
    task_cls = getattr(models, case.task)
    inputs = _inputs(case)
    with pytest.warns(UserWarning) if case.drop else contextlib.nullcontext():
        expected = _logits(task_cls.from_preset(str(tmp_path / "hf")), inputs)
    distribution = keras.distribution.ModelParallel(
        layout_map=task_cls.get_layout_map(make_mesh((2, 4))),
        batch_dim_name="batch",
    )
    with distribution.scope():
        with (
            pytest.warns(UserWarning) if case.drop else contextlib.nullcontext()
        ):
            ours = task_cls.from_preset(str(tmp_path / "hf"))
        assert_follows_plan(ours)
        planned = {w.path: w.spec for w in ours.layout_plan.weights}
        head = {v.path: v for v in ours._head_variables()}
        # The head is sharded as planned, not replicated.
        assert any(any(planned[path]) for path in head), planned
        logits = _logits(ours, inputs)
    np.testing.assert_allclose(logits, expected, atol=1e-5, rtol=1e-5)


def test_num_labels_disagreeing_with_num_classes(encoders, tmp_path):
    write_task_checkpoint(_BY_NAME["bert_classifier"], encoders, tmp_path / "a")
    with pytest.raises(PresetError, match=r"num_classes=5.*num_labels=3"):
        models.BertTextClassifier.from_preset(
            str(tmp_path / "a"), num_classes=5
        )


def test_other_head_type_refused(encoders, tmp_path):
    case = _BY_NAME["bert_classifier"]
    write_task_checkpoint(
        case,
        encoders,
        tmp_path / "a",
        architectures=["BertForTokenClassification"],
    )
    with pytest.raises(
        PresetError,
        match=r"\['BertForTokenClassification'\].*BertForSequenceClassification",
    ):
        models.BertTextClassifier.from_preset(str(tmp_path / "a"))


def test_head_tensor_of_wrong_shape_named(encoders, tmp_path):
    case = _BY_NAME["roberta_classifier"]
    write_task_checkpoint(case, encoders, tmp_path / "a", num_labels=3)
    path = tmp_path / "a" / "model.safetensors"
    tensors = load_file(str(path))
    tensors["classifier.dense.weight"] = np.zeros((HIDDEN, 8), "float32")
    save_file(tensors, str(path))
    with pytest.raises(
        PresetError, match=r"classifier\.dense\.weight.*\(16, 8\)"
    ):
        models.RobertaTextClassifier.from_preset(str(tmp_path / "a"))


def test_masked_lm_head_activation_refused(encoders, tmp_path):
    case = _BY_NAME["bert_masked_lm"]
    write_task_checkpoint(case, encoders, tmp_path / "a", hidden_act="gelu_new")
    with pytest.raises(PresetError, match=r"hidden_act='gelu_new'"):
        models.BertMaskedLM.from_preset(str(tmp_path / "a"))
