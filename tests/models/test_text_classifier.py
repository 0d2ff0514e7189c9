"""Text classifiers and masked LMs: keras-hub's logits, sharded, and a
classifier fine-tuned with LoRA.

Every classifier sits on its family's tiny config (`tiny_configs.py`, one
block) with weights drawn by path (`unit_scale_value`: the same in every
process, unlike the zoo's unseeded random ones), head included, so
keras-hub's classifier of the same name gets the very same weights.
keras-hub's logits are oracle data (`python -m tests.oracles
text_classifier` writes `tests/oracle_data/text_classifier-<family>.npz`);
BERT's is also rebuilt live, so a keras-hub release that changes them
shows. ELECTRA and XLNet (no keras-hub classifier) are checked sharded.
The masked LMs (`masked_lm-<family>.npz`) sit on the same backbones.
"""

import functools
import tempfile

import keras
import keras_hub
import numpy as np
import pytest

import keras_nlp.models
from keras_nlp.models.text_classifier import text_classifier_class
from keras_nlp.saving.weight_transfer import forget_deferred
from tests import oracles
from tests.models.backbone_checks import jit_forward
from tests.models.backbone_checks import make_mesh
from tests.models.backbone_checks import spec_of
from tests.models.backbone_checks import unit_scale_value
from tests.models.test_causal_lm_keras_hub import deferred
from tests.models.test_causal_lm_keras_hub import give_values
from tests.models.tiny_configs import TINY_CONFIGS
from tests.models.tiny_configs import tiny
from tests.models.zoo import build_with_weights

pytestmark = pytest.mark.skipif(
    keras.backend.backend() != "jax",
    reason="keras-hub comparisons and meshes run on the JAX backend",
)

NUM_CLASSES = 3
HEAD_SEED = 1
DATA_PREFIX = "text_classifier-"
# Family -> backbone class; the classifier is found from the backbone.
FAMILIES = {
    "albert": "AlbertBackbone",
    "bert": "BertBackbone",
    "deberta_v3": "DebertaV3Backbone",
    "distil_bert": "DistilBertBackbone",
    "electra": "ElectraBackbone",
    "f_net": "FNetBackbone",
    "roberta": "RobertaBackbone",
    "xlm_roberta": "XLMRobertaBackbone",
    "xlnet": "XLNetBackbone",
}
# keras-hub 0.32 has no ELECTRA or XLNet classifier (ours follow Hugging
# Face's heads).
KERAS_HUB_FAMILIES = [
    family
    for family, backbone in FAMILIES.items()
    if hasattr(keras_hub.models, backbone.replace("Backbone", "TextClassifier"))
]
# One block: the head is what is tested, and a block costs compile time
# (ALBERT: one group of one block; its tiny config's 8 block calls leave
# every row's output alike to 4e-5 on these weights).
ONE_BLOCK = dict(num_layers=1)
OPTIONS = {"albert": dict(num_layers=1, num_groups=1, num_inner_repetitions=1)}
LIVE_FAMILY = "bert"
SHARDED_MESH = (2, 4)


def classifier_class(family):
    return text_classifier_class(getattr(keras_nlp.models, FAMILIES[family]))


def assign_head(classifier, head_variables):
    """Gives the head's variables their `unit_scale_value`s by path."""
    for variable in head_variables:
        variable.assign(
            unit_scale_value(variable.path, variable.shape, seed=HEAD_SEED)
        )


def hub_head_variables(classifier):
    backbone_ids = {id(v) for v in classifier.backbone.weights}
    return [v for v in classifier.weights if id(v) not in backbone_ids]


def config_of(family):
    backbone_cls, config = tiny(FAMILIES[family])
    return backbone_cls, {**config, **OPTIONS.get(family, ONE_BLOCK)}


def backbone_values(backbone):
    """`unit_scale_value`s by path: the same in every process (the zoo's
    random weights are not seeded)."""
    return {v.path: unit_scale_value(v.path, v.shape) for v in backbone.weights}


@functools.cache
def ours(family):
    """`(classifier, inputs, logits)`: our classifier on the family's tiny
    config with `backbone_values` and a head drawn by path."""
    backbone_cls, config = config_of(family)
    backbone = deferred(lambda: backbone_cls.from_config(config))
    give_values(backbone, backbone_values(backbone))
    classifier = classifier_class(family)(backbone, NUM_CLASSES)
    assign_head(classifier, classifier._head_variables())
    inputs = TINY_CONFIGS[FAMILIES[family]].inputs_for(backbone, config)
    logits = jit_forward(classifier, inputs)["sequence_output"]
    return classifier, inputs, logits


def hub_logits(family):
    """keras-hub's classifier on the same weights: its logits."""
    name = FAMILIES[family]
    _, config = config_of(family)
    classifier, inputs, _ = ours(family)
    hub_backbone = deferred(lambda: getattr(keras_hub.models, name)(**config))
    give_values(hub_backbone, backbone_values(hub_backbone))
    task = getattr(keras_hub.models, name.replace("Backbone", "TextClassifier"))
    hub = task(hub_backbone, NUM_CLASSES, preprocessor=None)
    head = hub_head_variables(hub)
    assert sorted(v.path for v in head) == sorted(
        v.path for v in classifier._head_variables()
    )
    assign_head(hub, head)
    return jit_forward(hub, inputs)["sequence_output"]


def generate_oracle_data():
    return {
        DATA_PREFIX + family: {
            "logits": hub_logits(family),
            **{f"inputs/{k}": v for k, v in ours(family)[1].items()},
        }
        for family in KERAS_HUB_FAMILIES
    }


# === keras-hub's numbers ===


@pytest.mark.parametrize("family", KERAS_HUB_FAMILIES)
def test_logits_equal_keras_hubs(family):
    _, inputs, logits = ours(family)
    stored = oracles.load(DATA_PREFIX + family)
    for key, value in inputs.items():
        np.testing.assert_array_equal(value, stored[f"inputs/{key}"])
    expected = stored["logits"]
    assert logits.shape == expected.shape == (8, NUM_CLASSES)
    np.testing.assert_allclose(logits, expected, atol=1e-5, rtol=1e-5)
    # The head matters: logits of different rows differ.
    assert np.abs(logits - logits[:1]).max() > 1e-2


def test_keras_hub_still_gives_the_stored_logits():
    inputs = ours(LIVE_FAMILY)[1]
    live = {"logits": hub_logits(LIVE_FAMILY)}
    live.update({f"inputs/{k}": v for k, v in inputs.items()})
    oracles.assert_oracle_unchanged(DATA_PREFIX + LIVE_FAMILY, live)


# === Sharded ===


@pytest.mark.multi_device
@pytest.mark.parametrize("mesh", [SHARDED_MESH, (1, 8)], ids=str)
@pytest.mark.parametrize("family", list(FAMILIES))
def test_sharded_logits_equal_unsharded(family, mesh):
    """On (2, 4) and (1, 8) the head follows its plan and the logits are
    the unsharded classifier's."""
    reference_classifier, inputs, expected = ours(family)
    cls = type(reference_classifier)
    distribution = keras.distribution.ModelParallel(
        layout_map=cls.get_layout_map(make_mesh(mesh)),
        batch_dim_name="batch",
    )
    with distribution.scope():
        backbone = build_with_weights(
            cls.backbone_cls,
            config_of(family)[1],
            reference_classifier.backbone.weights,
        )
        classifier = cls(backbone, NUM_CLASSES)
        for mine, theirs in zip(
            classifier._head_variables(),
            reference_classifier._head_variables(),
            strict=True,
        ):
            mine.assign(keras.ops.convert_to_numpy(theirs.value))
        logits = jit_forward(classifier, inputs)
    np.testing.assert_allclose(
        logits["sequence_output"], expected, atol=1e-5, rtol=1e-5
    )
    plan = classifier.layout_plan
    assert len(plan.weights) == len(classifier.weights)
    # Row-parallel logits: the pooled width (32) on the model axis.
    logits_kernel = classifier.get_layer("logits").kernel
    # Row-parallel where the model axis divides the pooled width, else
    # whole (a fallback, never a failed build).
    row = "model" if logits_kernel.shape[0] % mesh[1] == 0 else None
    assert plan.weight("logits/kernel").spec == (row, None)
    assert spec_of(logits_kernel) == (row, None)
    if classifier.pooled_activation is not None and row is not None:
        # Column-parallel pooler, hidden over the data axis (FSDP).
        pooled = classifier.get_layer("pooled_dense").kernel
        assert spec_of(pooled) == ("batch", "model")


# === Fine-tuning with LoRA, saving, loading on another mesh ===


def labelled_examples(vocabulary_size, size=16, seed=3):
    """Inputs and labels a tiny model can learn: whether the first token
    (the one the pooler reads) is in the vocabulary's lower half."""
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(1, vocabulary_size, (size, 8)).astype("int32")
    inputs = {
        "token_ids": token_ids,
        "segment_ids": np.zeros_like(token_ids),
        "padding_mask": np.ones_like(token_ids),
    }
    return inputs, (token_ids[:, 0] < vocabulary_size // 2).astype("int32")


@pytest.mark.multi_device
def test_lora_fine_tune_on_a_mesh_saves_and_loads_on_another(tmp_path):
    backbone_cls, config = config_of("bert")
    inputs, labels = labelled_examples(config["vocabulary_size"])
    # Unit norms and zero biases: the outputs depend on the tokens more
    # than with `backbone_values`, whose random LayerNorm offsets dominate.
    weights = [
        np.ones(v.shape, "float32")
        if v.path.endswith("gamma")
        else np.zeros(v.shape, "float32")
        if v.path.endswith(("beta", "bias"))
        else v
        for v in ours("bert")[0].backbone.weights
    ]
    cls = keras_nlp.models.BertTextClassifier
    distribution = keras.distribution.ModelParallel(
        layout_map=cls.get_layout_map(make_mesh(SHARDED_MESH)),
        batch_dim_name="batch",
    )
    with distribution.scope():
        backbone = build_with_weights(
            backbone_cls,
            {**config, "dropout": 0.0},
            weights,
        )
        classifier = cls(backbone, 2, dropout=0.0)
        classifier.enable_lora(2)
        before = {
            v.path: keras.ops.convert_to_numpy(v.value)
            for v in classifier.weights
        }
        trainable = sorted(v.path for v in classifier.trainable_weights)
        assert spec_of(classifier.get_layer("logits").kernel) == (
            "model",
            None,
        )
        classifier.compile(optimizer=keras.optimizers.Adam(3e-2))
        history = classifier.fit(
            inputs, labels, batch_size=8, epochs=5, verbose=0
        )
        predictions = classifier.predict(inputs, batch_size=8, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.8 * losses[0], losses
    adapters = [p for p in trainable if "lora_kernel" in p]
    assert len(adapters) == 2 * 2 * config["num_layers"]
    assert sorted(set(trainable) - set(adapters)) == [
        "logits/bias",
        "logits/kernel",
    ]
    changed = sorted(
        v.path
        for v in classifier.weights
        if not np.array_equal(before[v.path], keras.ops.convert_to_numpy(v))
    )
    # lora_kernel_b starts at zero and moves; every trained weight moved.
    assert set(changed) == set(trainable), set(changed) ^ set(trainable)

    classifier.save_to_preset(tmp_path)
    other = keras.distribution.ModelParallel(
        layout_map=cls.get_layout_map(make_mesh((1, 8))),
        batch_dim_name="batch",
    )
    with other.scope():
        loaded = keras_nlp.models.TextClassifier.from_preset(tmp_path)
        reloaded = loaded.predict(inputs, batch_size=8, verbose=0)
    assert type(loaded) is cls and loaded.num_classes == 2
    assert loaded.layout_plan.num_devices == 8
    np.testing.assert_allclose(reloaded, predictions, atol=1e-5, rtol=1e-5)


# === Config and errors ===


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_config_round_trip(family):
    classifier = ours(family)[0]
    config = classifier.get_config()
    # Deferred: no initializer runs (a program each, seconds in all).
    restored = deferred(lambda: type(classifier).from_config(config))
    assert restored.get_config() == config
    assert [tuple(v.shape) for v in restored._head_variables()] == [
        tuple(v.shape) for v in classifier._head_variables()
    ]
    forget_deferred(restored)


def _bert():
    return ours("bert")[0].backbone


@pytest.mark.parametrize(
    "build, message",
    [
        (
            lambda: keras_nlp.models.BertTextClassifier(
                deferred(
                    lambda: keras_hub.models.BertBackbone(
                        **config_of("bert")[1]
                    )
                ),
                2,
            ),
            "Received: keras_hub.models.BertBackbone. Build ours from the same",
        ),
        (
            lambda: keras_nlp.models.RobertaTextClassifier(_bert(), 2),
            "takes a keras_nlp.models.RobertaBackbone. Received: "
            "keras_nlp.models.BertBackbone.",
        ),
        (
            lambda: keras_nlp.models.BertTextClassifier(_bert(), 0),
            "num_classes must be a positive integer. Received: num_classes=0",
        ),
        (
            lambda: keras_nlp.models.BertTextClassifier(_bert(), "3"),
            "Received: num_classes='3'",
        ),
        (
            lambda: keras_nlp.models.BertTextClassifier(
                _bert(), 2, hidden_dim=8
            ),
            "takes no hidden_dim",
        ),
        (
            lambda: keras_nlp.models.TextClassifier(_bert(), 2),
            "the base class",
        ),
        (
            lambda: keras_nlp.models.TextClassifier.from_preset(
                tempfile.mkdtemp()
            ),
            "needs num_classes=: .* holds no classification head",
        ),
    ],
    ids=[
        "keras_hub_backbone",
        "other_family",
        "zero_classes",
        "string_classes",
        "hidden_dim_without_pooler",
        "base_class",
        "preset_without_head",
    ],
)
def test_errors_name_the_bad_value(build, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        build()


# === Masked LMs ===

MLM_PREFIX = "masked_lm-"
MLM_FAMILIES = [
    family
    for family, backbone in FAMILIES.items()
    if hasattr(keras_hub.models, backbone.replace("Backbone", "MaskedLM"))
]
# Three positions per row, one of them the first row's padding.
MASK_POSITIONS = np.tile(np.array([[1, 5, 10]], "int32"), (8, 1))


def masked_lm_class(family):
    return getattr(
        keras_nlp.models, FAMILIES[family].replace("Backbone", "MaskedLM")
    )


@functools.cache
def our_masked_lm(family):
    """`(masked LM, inputs, logits)` on `ours(family)`'s backbone."""
    classifier, inputs, _ = ours(family)
    masked_lm = masked_lm_class(family)(classifier.backbone)
    assign_head(masked_lm, masked_lm._head_variables())
    inputs = {**inputs, "mask_positions": MASK_POSITIONS}
    logits = jit_forward(masked_lm, inputs)["sequence_output"]
    return masked_lm, inputs, logits


def hub_masked_lm_logits(family):
    name = FAMILIES[family]
    _, config = config_of(family)
    masked_lm, inputs, _ = our_masked_lm(family)
    hub_backbone = deferred(lambda: getattr(keras_hub.models, name)(**config))
    give_values(hub_backbone, backbone_values(hub_backbone))
    task = getattr(keras_hub.models, name.replace("Backbone", "MaskedLM"))
    hub = task(hub_backbone, preprocessor=None)
    head = hub_head_variables(hub)
    assert sorted(v.path for v in head) == sorted(
        v.path for v in masked_lm._head_variables()
    )
    assign_head(hub, head)
    return jit_forward(hub, inputs)["sequence_output"]


def generate_masked_lm_oracle_data():
    return {
        MLM_PREFIX + family: {"logits": hub_masked_lm_logits(family)}
        for family in MLM_FAMILIES
    }


@pytest.mark.parametrize("family", MLM_FAMILIES)
def test_masked_lm_logits_equal_keras_hubs(family):
    masked_lm, _, logits = our_masked_lm(family)
    expected = oracles.load(MLM_PREFIX + family)["logits"]
    vocabulary = masked_lm.backbone.token_embedding.input_dim
    assert logits.shape == expected.shape == (8, 3, vocabulary)
    np.testing.assert_allclose(logits, expected, atol=1e-5, rtol=1e-5)


# BERT's vocabulary (98) divides by 2 only, F-Net's (96) by the model
# axis (4).
@pytest.mark.multi_device
@pytest.mark.parametrize(
    "family, mesh",
    [("bert", SHARDED_MESH), ("f_net", SHARDED_MESH), ("bert", (1, 8))],
    ids=str,
)
def test_sharded_masked_lm_follows_its_plan(family, mesh):
    reference_lm, inputs, expected = our_masked_lm(family)
    cls = type(reference_lm)
    distribution = keras.distribution.ModelParallel(
        layout_map=cls.get_layout_map(make_mesh(mesh)),
        batch_dim_name="batch",
    )
    with distribution.scope():
        backbone = build_with_weights(
            cls.backbone_cls,
            config_of(family)[1],
            reference_lm.backbone.weights,
        )
        masked_lm = cls(backbone)
        for mine, theirs in zip(
            masked_lm._head_variables(),
            reference_lm._head_variables(),
            strict=True,
        ):
            mine.assign(keras.ops.convert_to_numpy(theirs.value))
        logits = jit_forward(masked_lm, inputs)["sequence_output"]
    np.testing.assert_allclose(logits, expected, atol=1e-5, rtol=1e-5)
    plan = masked_lm.layout_plan
    assert len(plan.weights) == len(masked_lm.weights)
    dense = masked_lm.masked_lm_head.intermediate_dense.kernel
    assert spec_of(dense) == ("batch", "model")
    # The bias is split by vocabulary where the model axis divides it,
    # else replicated, as planned.
    bias = masked_lm.masked_lm_head.output_bias
    split = bias.shape[0] % mesh[1] == 0
    expected_spec = ("model",) if split else (None,)
    assert spec_of(bias) == plan.weight("mlm_head/output_bias").spec
    assert spec_of(bias) == expected_spec


def test_masked_lm_config_round_trip():
    masked_lm = our_masked_lm("albert")[0]
    config = masked_lm.get_config()
    restored = deferred(lambda: type(masked_lm).from_config(config))
    assert restored.get_config() == config
    assert [tuple(v.shape) for v in restored._head_variables()] == [
        tuple(v.shape) for v in masked_lm._head_variables()
    ]
    # ALBERT's head narrows to the table's width (embedding_dim).
    dense = restored.masked_lm_head.intermediate_dense.kernel
    assert tuple(dense.shape) == (
        config["backbone"]["config"]["hidden_dim"],
        config["backbone"]["config"]["embedding_dim"],
    )
    forget_deferred(restored)


# === Text in: keras-hub's preprocessor and ours ===

WORDS = ["the", "quick", "brown", "fox", "a", "cat", "sat", "on", "mat"]
BERT_VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
TEXT_LENGTH = 8
# Rows that fit, and rows that each truncation cuts differently.
FIRSTS = ["the quick brown fox sat on the mat", "a cat", "the fox sat", "mat"]
SECONDS = ["a cat sat on the mat", "the mat", "on a mat", "the quick fox"]


def hub_text_preprocessor(truncate="round_robin"):
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=BERT_VOCABULARY)
    return keras_hub.models.BertTextClassifierPreprocessor(
        tokenizer, sequence_length=TEXT_LENGTH, truncate=truncate
    )


def our_text_preprocessor(truncate="round_robin"):
    """Ours, on BERT's `tokenizer.json` layout for the same vocabulary,
    written by the `tokenizers` library."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models
    from tokenizers import normalizers
    from tokenizers import pre_tokenizers
    from tokenizers import processors

    ids = {token: index for index, token in enumerate(BERT_VOCABULARY)}
    hf = HFTokenizer(models.WordPiece(ids, unk_token="[UNK]"))
    hf.normalizer = normalizers.BertNormalizer(lowercase=True)
    hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    hf.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])],
    )
    tokenizer = keras_nlp.tokenizers.Tokenizer(
        {
            "tokenizer.json": hf.to_str().encode("utf-8"),
            "tokenizer_config.json": b'{"pad_token": "[PAD]"}',
        }
    )
    return keras_nlp.tokenizers.ClassifierPreprocessor(
        tokenizer, sequence_length=TEXT_LENGTH, truncate=truncate
    )


@pytest.mark.parametrize("truncate", ["round_robin", "waterfall"])
def test_our_packing_equals_keras_hubs(truncate):
    hub = hub_text_preprocessor(truncate)
    ours_ = our_text_preprocessor(truncate)
    for x in (FIRSTS, (FIRSTS, SECONDS)):
        theirs = hub(x=x)
        mine = ours_(x)
        for key in ("token_ids", "segment_ids", "padding_mask"):
            np.testing.assert_array_equal(
                mine[key], np.asarray(theirs[key]).astype("int32"), key
            )
    # The rows are cut (the first to the 5 tokens a pair leaves room for,
    # in either mode), so the comparison covers truncation.
    assert mine["padding_mask"][0].all()
    kept_first = int((mine["segment_ids"][0] == 0).sum()) - 2
    assert kept_first == (5 if truncate == "waterfall" else 3)


def test_classifier_preprocessor_errors_name_the_bad_value():
    with pytest.raises(ValueError, match="truncate=.*'longest'"):
        our_text_preprocessor("longest")
    with pytest.raises(ValueError, match="same number of texts"):
        our_text_preprocessor()((["a", "b"], ["a"]))
    with pytest.raises(ValueError, match="BertTextClassifierPreprocessor"):
        keras_nlp.models.BertTextClassifier(
            _bert(), NUM_CLASSES, preprocessor=object()
        )


def test_classifier_fits_and_predicts_text():
    """keras-hub's preprocessor drives `fit` and `predict` on raw pairs;
    ours gives the logits of the packed ids, from a dataset too."""
    import tensorflow as tf

    backbone_cls, config = config_of("bert")
    backbone = backbone_cls.from_config(config)
    classifier = keras_nlp.models.BertTextClassifier(
        backbone, NUM_CLASSES, preprocessor=hub_text_preprocessor()
    )
    # Compiled: eager steps compile every op of the model (~4x longer).
    classifier.compile(optimizer=keras.optimizers.Adam(1e-2))
    labels = np.array([0, 1, 2, 1])
    history = classifier.fit(
        (FIRSTS, SECONDS), labels, batch_size=4, epochs=3, verbose=0
    )
    assert history.history["loss"][-1] < history.history["loss"][0]

    packed = {
        k: np.asarray(v).astype("int32")
        for k, v in hub_text_preprocessor()(x=(FIRSTS, SECONDS)).items()
    }
    expected = classifier.predict(packed, batch_size=4, verbose=0)
    from_hub = classifier.predict((FIRSTS, SECONDS), batch_size=4, verbose=0)
    classifier.preprocessor = our_text_preprocessor()
    from_ours = classifier.predict((FIRSTS, SECONDS), batch_size=4, verbose=0)
    assert expected.shape == (4, NUM_CLASSES)
    np.testing.assert_array_equal(from_hub, expected)
    np.testing.assert_array_equal(from_ours, expected)
    # A dataset of pairs is read on the host by ours; its elements are
    # `(x,)`, as `Dataset.map` would spread a bare `(a, b)` into `(x, y)`.
    pairs = tf.data.Dataset.from_tensor_slices(((FIRSTS, SECONDS),))
    from_dataset = classifier.predict(pairs.batch(4), verbose=0)
    np.testing.assert_array_equal(from_dataset, expected)


def test_masked_lm_fits_and_predicts_text_with_keras_hubs_preprocessor():
    """keras-hub's masked-LM preprocessor picks the positions: `fit` and
    `predict` take the raw text."""
    backbone_cls, config = config_of("bert")
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=BERT_VOCABULARY)
    preprocessor = keras_hub.models.BertMaskedLMPreprocessor(
        tokenizer, sequence_length=TEXT_LENGTH, mask_selection_length=2
    )
    masked_lm = keras_nlp.models.BertMaskedLM(
        backbone_cls.from_config(config), preprocessor=preprocessor
    )
    masked_lm.compile()
    history = masked_lm.fit(FIRSTS, batch_size=4, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    logits = masked_lm.predict(FIRSTS, batch_size=4, verbose=0)
    assert logits.shape == (len(FIRSTS), 2, config["vocabulary_size"])
