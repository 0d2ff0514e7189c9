"""Gemma's decoder block, which Gemma 3 and PaliGemma share."""

import re
import textwrap

from keras_nlp.models.gemma.gemma_decoder_block import GemmaDecoderBlock
from keras_nlp.models.gemma.gemma_decoder_block import gemma_attention


def test_block_config_round_trip_and_example():
    block = GemmaDecoderBlock(
        attention=gemma_attention(
            hidden_dim=32,
            num_query_heads=4,
            num_key_value_heads=1,
            head_dim=8,
            logit_soft_cap=20.0,
            sliding_window_size=7,
            query_head_dim_normalize=False,
            dropout=0.1,
        ),
        hidden_dim=32,
        intermediate_dim=24,
        use_post_ffw_norm=True,
        layer_norm_epsilon=1e-5,
    )
    config = block.get_config()
    clone = GemmaDecoderBlock.from_config(config)
    assert clone.get_config() == config
    assert clone.attention.sliding_window_size == 7
    assert clone.attention.rotary_embedding.max_wavelength == 10_000.0
    # The class is not exported, so tests/test_docstring_examples.py does
    # not run its example.
    code = re.findall(r"```python\n(.*?)```", GemmaDecoderBlock.__doc__, re.S)
    namespace = {}
    exec(textwrap.dedent(code[-1]), namespace)
    assert len(namespace["outputs"].shape) == 3
