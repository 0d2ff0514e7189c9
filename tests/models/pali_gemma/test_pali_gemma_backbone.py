"""PaliGemma's own layers: what no shared table checks."""

import keras
import numpy as np

from keras_nlp.models.pali_gemma.pali_gemma_backbone import PrefixLMMask
from keras_nlp.models.pali_gemma.pali_gemma_backbone import (
    pali_gemma_vision_tower,
)


def test_prefix_lm_mask_spec_is_its_traced_boolean_output():
    # Its spec is built from the inputs' shapes (NumPy ones too), so it
    # must say what its call returns: a boolean (batch, length, length)
    # over the image tokens and the text.
    batch, text_length, image_tokens = 2, 5, 4
    padding_mask = np.ones((batch, text_length), "int32")
    response_mask = np.zeros((batch, text_length), "int32")
    response_mask[:, 3:] = 1
    length = image_tokens + text_length
    for window in (None, 3):
        mask = PrefixLMMask(image_tokens, sliding_window_size=window)
        # Keras's own inference, which traces `call`.
        traced = keras.Operation.compute_output_spec(
            mask, padding_mask, response_mask
        )
        spec = mask.compute_output_spec(padding_mask, response_mask)
        assert (spec.shape, spec.dtype) == (traced.shape, traced.dtype)
        assert (traced.shape, traced.dtype) == ((batch, length, length), "bool")


def test_vision_tower_spec_from_numpy_images():
    # Keras hands `compute_output_shape` tensors' shapes only; the ViT
    # reads NumPy images' shapes itself, as the tower's first layer.
    tower = pali_gemma_vision_tower(
        image_size=8,
        patch_size=4,
        hidden_dim=16,
        num_layers=1,
        num_heads=2,
        intermediate_dim=32,
        output_dim=24,
        activation=None,
        dtype=None,
        name="vision_tower",
    )
    images = np.zeros((2, 8, 8, 3), "float32")
    spec = tower.compute_output_spec(images)
    symbolic = tower.compute_output_spec(keras.KerasTensor(images.shape))
    assert (spec.shape, spec.dtype) == (symbolic.shape, symbolic.dtype)
    assert (spec.shape, spec.dtype) == ((2, 4, 24), "float32")
