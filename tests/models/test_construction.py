"""What `Backbone` does for every constructor: config, checks, attributes."""

import json

import pytest

from keras_nlp.models import GemmaBackbone
from keras_nlp.models import MistralBackbone
from tests.models.tiny_configs import tiny


def test_get_config_is_the_constructor_arguments_with_defaults():
    cls, config = tiny("MistralBackbone")
    backbone = cls(**config, name="m")
    got = backbone.get_config()
    assert {key: got[key] for key in config} == config
    # Defaults the caller left out are recorded too.
    assert got["rope_max_wavelength"] == 10000
    assert got["name"] == "m"
    assert set(got) == {
        *cls.__init__.__signature__.parameters,
        "name",
        "trainable",
    } - {"self", "kwargs"}
    json.dumps(got)


def test_constructor_arguments_become_attributes():
    cls, config = tiny("LlamaBackbone")
    backbone = cls(**config)
    assert backbone.hidden_dim == config["hidden_dim"]
    assert backbone.tie_word_embeddings is False


def test_an_unknown_argument_is_an_error_listing_the_valid_ones():
    _, config = tiny("GemmaBackbone")
    with pytest.raises(TypeError) as error:
        GemmaBackbone(**config, bogus=1)
    message = str(error.value)
    assert "GemmaBackbone got unknown argument(s) ['bogus']" in message
    assert "vocabulary_size" in message and "head_dim" in message


@pytest.mark.parametrize(
    "override, message",
    [
        (
            {"vocabulary_size": 0},
            "`vocabulary_size` must be a positive integer. Received: "
            "vocabulary_size=0.",
        ),
        ({"num_layers": 2.0}, "num_layers=2.0"),
        ({"hidden_dim": True}, "hidden_dim=True"),
        (
            {"sliding_window": -1},
            "`sliding_window` must be a positive integer or None",
        ),
    ],
)
def test_sizes_are_positive_integers_named_as_written(override, message):
    _, config = tiny("MistralBackbone")
    with pytest.raises(ValueError) as error:
        MistralBackbone(**{**config, **override})
    assert message in str(error.value)
