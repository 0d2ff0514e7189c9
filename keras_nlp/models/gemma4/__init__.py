"""Gemma 4 (text)."""

from keras_nlp.models.gemma4.gemma4_backbone import Gemma4Backbone
from keras_nlp.models.gemma4.gemma4_causal_lm import Gemma4CausalLM

__all__ = ["Gemma4Backbone", "Gemma4CausalLM"]
