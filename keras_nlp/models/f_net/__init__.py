"""F-Net."""

from keras_nlp.models.f_net.f_net_backbone import FNetBackbone

__all__ = ["FNetBackbone"]
