"""XLMRobertaBackbone is a RobertaBackbone subclass with its own identity.

As in keras-hub: an XLM-R is a RoBERTa (same architecture and arguments),
a parent-class call may build a subclass's preset, and the registry,
built-in presets and saved configs name each class as itself.
"""

import json

import keras
import pytest

from keras_nlp.models import Backbone
from keras_nlp.models import RobertaBackbone
from keras_nlp.models import XLMRobertaBackbone
from keras_nlp.saving.registry import registered_backbones

# Overrides that keep a base preset's 12 heads but build in milliseconds.
SMALL = dict(
    num_layers=1, vocabulary_size=98, hidden_dim=48, intermediate_dim=96
)


def test_registry_and_presets_name_each_class_as_itself():
    assert issubclass(XLMRobertaBackbone, RobertaBackbone)
    assert registered_backbones(RobertaBackbone) == {
        "RobertaBackbone": RobertaBackbone,
        "XLMRobertaBackbone": XLMRobertaBackbone,
    }
    assert sorted(RobertaBackbone.presets) == [
        "roberta_base_en",
        "roberta_large_en",
    ]
    assert sorted(XLMRobertaBackbone.presets) == [
        "xlm_roberta_base_multi",
        "xlm_roberta_large_multi",
    ]


@pytest.mark.parametrize("caller", [XLMRobertaBackbone, RobertaBackbone])
def test_an_xlm_preset_builds_an_xlm_roberta(caller):
    backbone = caller.from_preset(
        "xlm_roberta_base_multi", load_weights=False, **SMALL
    )
    assert type(backbone) is XLMRobertaBackbone
    assert backbone.get_config()["num_heads"] == 12


def test_a_roberta_preset_is_not_an_xlm_roberta():
    with pytest.raises(ValueError, match="Unknown preset 'roberta_base_en'"):
        XLMRobertaBackbone.from_preset("roberta_base_en", load_weights=False)
    backbone = RobertaBackbone.from_preset(
        "roberta_base_en", load_weights=False, **SMALL
    )
    assert type(backbone) is RobertaBackbone


def test_saved_configs_name_the_class_and_load_back_as_it(tmp_path):
    xlm, roberta = tmp_path / "xlm", tmp_path / "roberta"
    XLMRobertaBackbone(num_heads=12, **SMALL).save_to_preset(str(xlm))
    RobertaBackbone(num_heads=12, **SMALL).save_to_preset(str(roberta))
    # Its registered name: test_conformance.py's preset round trip.
    assert json.loads((xlm / "config.json").read_text())["class_name"] == (
        "XLMRobertaBackbone"
    )
    for caller in (Backbone, RobertaBackbone, XLMRobertaBackbone):
        assert type(caller.from_preset(str(xlm))) is XLMRobertaBackbone
    assert type(Backbone.from_preset(str(roberta))) is RobertaBackbone
    with pytest.raises(ValueError, match="holds a RobertaBackbone"):
        XLMRobertaBackbone.from_preset(str(roberta))
    # Keras's own serialization names the subclass too.
    config = keras.saving.serialize_keras_object(
        XLMRobertaBackbone.from_preset(str(xlm))
    )
    assert config["class_name"] == "XLMRobertaBackbone"
