"""XLNet."""

from keras_nlp.models.xlnet.xlnet_backbone import XLNetBackbone

__all__ = ["XLNetBackbone"]
