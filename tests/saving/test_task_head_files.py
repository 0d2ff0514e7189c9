"""A task's head files: written atomically, read back, refused clearly."""

import keras
import numpy as np
import pytest

from keras_nlp.saving.preset_files import PresetError
from keras_nlp.saving.task_head_files import assign_stored_head
from keras_nlp.saving.task_head_files import read_head
from keras_nlp.saving.task_head_files import write_head

WEIGHTS = {"logits/kernel": np.arange(6, dtype="float32").reshape(3, 2)}


def test_head_files_round_trip(tmp_path):
    write_head(
        tmp_path, "text_classifier", "BertTextClassifier", {"a": 1}, WEIGHTS
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "text_classifier.json",
        "text_classifier.weights.npz",
    ]
    stored, weights = read_head(tmp_path, "text_classifier")
    assert stored == {"class_name": "BertTextClassifier", "config": {"a": 1}}
    np.testing.assert_array_equal(
        weights["logits/kernel"], WEIGHTS["logits/kernel"]
    )
    assert read_head(tmp_path, "masked_lm") == (None, None)


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("masked_lm.json", b"{not json", "is not valid JSON"),
        (
            "masked_lm.json",
            b"[1, 2]",
            "must hold an object with a `class_name`",
        ),
        ("masked_lm.weights.npz", b"PK\x03\x04 broken", "is not a NumPy .npz"),
    ],
)
def test_malformed_head_files_are_refused_by_name(
    tmp_path, name, content, message
):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(PresetError, match=message) as error:
        read_head(tmp_path, "masked_lm")
    assert name in str(error.value)


@pytest.mark.parametrize(
    "stored_class, shape, why",
    [
        ("RobertaTextClassifier", (3, 2), "it is a RobertaTextClassifier's"),
        ("BertTextClassifier", (3, 5), r"its shapes .* are not this head's"),
    ],
)
def test_a_head_that_does_not_fit_is_not_loaded_and_says_why(
    tmp_path, stored_class, shape, why
):
    variable = keras.Variable(np.zeros(shape, "float32"), name="kernel")
    weights = {variable.path: WEIGHTS["logits/kernel"]}
    with pytest.warns(UserWarning, match=why):
        loaded = assign_stored_head(
            [variable],
            {"class_name": stored_class},
            weights,
            "BertTextClassifier",
            tmp_path,
        )
    assert not loaded and not np.any(keras.ops.convert_to_numpy(variable))
    fitting = keras.Variable(np.zeros((3, 2), "float32"), name="kernel")
    assert assign_stored_head(
        [fitting],
        {"class_name": "BertTextClassifier"},
        {fitting.path: WEIGHTS["logits/kernel"]},
        "BertTextClassifier",
        tmp_path,
    )
    np.testing.assert_array_equal(fitting.numpy(), WEIGHTS["logits/kernel"])


@pytest.mark.parametrize("value", ["1e-12", 0, -1e-5, True, None])
def test_a_masked_lm_heads_stored_epsilon_must_be_positive(value):
    from keras_nlp.models.masked_lm import _stored_arguments

    with pytest.raises(PresetError) as error:
        _stored_arguments({"layer_norm_epsilon": value}, "dir")
    assert str(error.value) == (
        "dir: masked_lm.json's layer_norm_epsilon must be a positive "
        "number, as `save_to_preset` writes it. Received: "
        f"{value!r}."
    )
    # Files written before the epsilon was saved hold none.
    assert _stored_arguments({}, "dir") == {}
    assert _stored_arguments({"layer_norm_epsilon": 1e-12}, "dir") == {
        "layer_norm_epsilon": 1e-12
    }
