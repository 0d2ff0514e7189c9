"""PaliGemma: a SigLIP vision tower feeding a Gemma decoder."""

from keras_nlp.models.pali_gemma.pali_gemma_backbone import PaliGemmaBackbone
from keras_nlp.models.pali_gemma.pali_gemma_causal_lm import PaliGemmaCausalLM

__all__ = ["PaliGemmaBackbone", "PaliGemmaCausalLM"]
