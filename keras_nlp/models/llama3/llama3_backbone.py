"""Llama 3 decoder backbone."""

from keras_nlp.models.llama.llama_backbone import LlamaBackbone
from keras_nlp.models.llama3.llama3_presets import LLAMA3_PRESETS


class Llama3Backbone(LlamaBackbone):
    """Llama 3, 3.1 and 3.2: the Llama architecture with their presets.

    The architecture and arguments are `LlamaBackbone`'s; Llama 3.1+ uses
    the RoPE scaling arguments, Llama 3.2's small models tie the output
    embedding (`tie_word_embeddings=True`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.llama3 import Llama3Backbone

    model = Llama3Backbone(
        vocabulary_size=64,
        num_layers=2,
        num_query_heads=8,
        num_key_value_heads=2,
        hidden_dim=32,
        intermediate_dim=64,
        rope_max_wavelength=500000,
        tie_word_embeddings=True,
    )
    inputs = {
        "token_ids": np.array([[5, 9, 2, 7]], dtype="int32"),
        "padding_mask": np.array([[1, 1, 1, 1]], dtype="int32"),
    }
    hidden_states = model(inputs)  # shape (1, 4, 32)
    ```
    """

    presets = LLAMA3_PRESETS
