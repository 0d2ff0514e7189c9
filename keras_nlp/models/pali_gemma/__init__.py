"""PaliGemma: a SigLIP vision tower feeding a Gemma decoder."""

from keras_nlp.models.pali_gemma.pali_gemma_backbone import PaliGemmaBackbone

__all__ = ["PaliGemmaBackbone"]
