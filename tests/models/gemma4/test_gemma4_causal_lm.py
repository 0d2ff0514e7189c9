"""Gemma 4's caches: a block that reads an earlier block's keys and values
has none of its own."""

from keras_nlp.models import Gemma4Backbone
from keras_nlp.models import Gemma4CausalLM
from tests.models.tiny_configs import tiny


def test_blocks_reading_earlier_keys_keep_no_cache():
    # Blocks: local (2 kv heads of 8), global (1 kv head of 16), and a
    # local one reading block 0's keys and values.
    _, config = tiny("Gemma4Backbone")
    backbone = Gemma4Backbone(**config)
    assert dict(backbone.key_value_sources) == {2: 0}
    causal_lm = Gemma4CausalLM(backbone, compile=False)
    shapes = [(2, 2, 8, 2, 8), (2, 2, 8, 1, 16)]
    assert causal_lm.cache_shapes(2, 8) == shapes
    assert [tuple(c.shape) for c in causal_lm.init_cache(2, 8)] == shapes
    attentions = [block.attention for block in backbone.transformer_layers]
    assert attentions[2].cache_shape(2, 8) is None
    assert attentions[2].key_dense is None and attentions[2].value_dense is None
    # The global block's keys are its values: no value kernel.
    assert attentions[1].value_dense is None
