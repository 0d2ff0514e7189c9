"""A keras-hub user's calls work unchanged: same arguments, same order."""

import inspect

import keras_hub
import pytest

import keras_nlp.models
from keras_nlp.models import MixtralBackbone
from tests.models.tiny_configs import tiny

# The base classes are subclassed, not called, by keras-hub users.
SHARED = sorted(
    name
    for name in keras_nlp.models.__all__
    if name not in ("Backbone", "CausalLM") and hasattr(keras_hub.models, name)
)


def named_parameters(cls):
    """`(name, default)` of the constructor's positional-or-keyword
    parameters, in order: the ones a keras-hub call can bind by position."""
    parameters = list(inspect.signature(cls.__init__).parameters.values())
    return [
        (p.name, None if p.default is inspect.Parameter.empty else p.default)
        for p in parameters[1:]
        if p.kind == p.POSITIONAL_OR_KEYWORD
    ]


def keyword_only_parameters(cls):
    parameters = inspect.signature(cls.__init__).parameters.values()
    return {p.name: p for p in parameters if p.kind == p.KEYWORD_ONLY}


@pytest.mark.parametrize("name", SHARED)
def test_constructor_arguments_in_keras_hubs_order(name):
    ours = named_parameters(getattr(keras_nlp.models, name))
    theirs = named_parameters(getattr(keras_hub.models, name))
    # Positional calls bind the same values to the same names.
    assert [n for n, _ in ours] == [n for n, _ in theirs]
    for (parameter, mine), (_, default) in zip(ours, theirs, strict=True):
        if not callable(default):
            assert mine == default, parameter


@pytest.mark.parametrize("name", SHARED)
def test_our_extra_options_are_keyword_only_with_defaults(name):
    # Options keras-hub lacks (e.g. exact GELU for a Hugging Face
    # checkpoint) come after `*`, so no keras-hub call binds them, and
    # their defaults keep keras-hub's architecture.
    ours = keyword_only_parameters(getattr(keras_nlp.models, name))
    theirs = keyword_only_parameters(getattr(keras_hub.models, name))
    for parameter in ours.values():
        if parameter.name not in theirs:
            assert parameter.default is not inspect.Parameter.empty, (
                parameter.name
            )


def test_mixtral_router_logits_are_a_clear_error():
    _, config = tiny("MixtralBackbone")
    with pytest.raises(ValueError, match="output_router_logits=True"):
        MixtralBackbone(**config, output_router_logits=True)
    assert "output_router_logits" in MixtralBackbone(**config).get_config()
