"""GPT-NeoX backbone (Pythia and GPT-NeoX-20B architecture)."""

from keras_nlp.models.gpt_neo_x.gpt_neo_x_backbone import GPTNeoXBackbone

__all__ = ["GPTNeoXBackbone"]
