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


# === Weights that cannot be allocated, refused before allocating ===

# 10**12 parameters in the embedding alone: 3.64 TiB in float32.
HUGE = dict(
    vocabulary_size=1_000_000,
    num_layers=1,
    num_query_heads=2,
    num_key_value_heads=1,
    hidden_dim=1_000_000,
    intermediate_dim=8,
    head_dim=4,
)


def test_weights_larger_than_memory_are_refused_and_still_planned():
    # Planning allocates nothing: the config plans.
    plan = GemmaBackbone.plan_layout({"batch": 1, "model": 8}, config=HUGE)
    assert plan.total_params > 10**12
    with pytest.raises(ValueError) as error:
        GemmaBackbone(**HUGE)
    message = str(error.value)
    assert (
        f"GemmaBackbone cannot be allocated: its {plan.total_params:,} "
        "parameters need 3.64 TiB, more than this host's memory"
    ) in message
    assert (
        "The largest weight is token_embedding/embeddings, shape "
        "(1000000, 1000000) (3.64 TiB), from vocabulary_size=1000000, "
        "hidden_dim=1000000." in message
    )
    # A size beyond every published checkpoint is refused at once.
    with pytest.raises(ValueError, match="`vocabulary_size` is at most"):
        GemmaBackbone(**{**HUGE, "vocabulary_size": 10**12})


def test_ordinary_configs_skip_the_abstract_count(monkeypatch):
    from keras_nlp.distribution import capacity

    def counted(*args):
        raise AssertionError("a tiny config was built abstractly")

    monkeypatch.setattr(capacity, "backbone_variables", counted)
    cls, config = tiny("GemmaBackbone")
    assert cls(**config).count_params() > 0


@pytest.mark.multi_device
def test_a_sharded_backbone_is_checked_by_its_shards(monkeypatch):
    import keras

    from keras_nlp.distribution import capacity

    cls, config = tiny("GemmaBackbone")
    plan = cls.plan_layout({"batch": 1, "model": 8}, config=config)
    # A host just too small for the 8 devices' shards.
    monkeypatch.setattr(
        capacity, "host_memory", lambda: plan.bytes_per_device * 8 - 1
    )
    mesh = keras.distribution.DeviceMesh(
        (1, 8), ("batch", "model"), keras.distribution.list_devices()
    )
    distribution = keras.distribution.ModelParallel(
        layout_map=cls.get_layout_map(mesh, config=config),
        batch_dim_name="batch",
    )
    with distribution.scope(), pytest.raises(ValueError) as error:
        cls(**config)
    assert (
        f"need {capacity.format_bytes(plan.bytes_per_device)} per device on "
        "mesh 1x8 (batch, model), "
        f"{capacity.format_bytes(plan.bytes_per_device * 8)} for this "
        "host's 8 devices" in str(error.value)
    )
    # Unsharded, the whole model is counted.
    monkeypatch.setattr(capacity, "host_memory", lambda: plan.total_bytes - 1)
    with pytest.raises(ValueError, match="cannot be allocated"):
        cls(**config)
