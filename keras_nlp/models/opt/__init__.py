"""OPT backbones."""

from keras_nlp.models.opt.opt_backbone import OPTBackbone

__all__ = ["OPTBackbone"]
