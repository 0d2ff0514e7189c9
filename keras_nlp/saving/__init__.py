"""Preset directories: `config.json`, `metadata.json` and the weights.

The format is keras-hub's (see `Backbone.save_to_preset` and
`Backbone.from_preset`): presets written by keras-hub for the same
architecture load here, and loading fills sharded variables in place.
Reading never leaves the directory (`preset_files`: links are refused,
data stored outside an HDF5 file too), and saving is atomic.
"""

from keras_nlp.saving.h5_loading import build_from_preset_weights
from keras_nlp.saving.h5_loading import check_weights
from keras_nlp.saving.h5_loading import load_weights
from keras_nlp.saving.h5_reader import WeightsFile
from keras_nlp.saving.h5_writer import write_weights
from keras_nlp.saving.preset_config import read_backbone_config
from keras_nlp.saving.preset_config import write_backbone_config
from keras_nlp.saving.preset_files import PresetDirectory
from keras_nlp.saving.preset_files import PresetError
from keras_nlp.saving.preset_staging import PresetBusyError
from keras_nlp.saving.weight_transfer import LossyConversionWarning

__all__ = [
    "LossyConversionWarning",
    "PresetBusyError",
    "PresetDirectory",
    "PresetError",
    "WeightsFile",
    "build_from_preset_weights",
    "check_weights",
    "load_weights",
    "read_backbone_config",
    "write_backbone_config",
    "write_weights",
]
