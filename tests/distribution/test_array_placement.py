"""Placing generation's arrays (`keras_nlp.distribution.array_placement`)."""

import jax
import keras
import pytest

import keras_nlp
from benchmarks.generate_decode import TRACE_EVENT
from benchmarks.generate_decode import count_events

pytestmark = pytest.mark.multi_device


def test_allocating_caches_again_compiles_nothing():
    # Every `generate` call allocates its caches: allocating the same
    # shapes again must reuse the compiled allocation, not trace (and
    # compile) one program per cache on every call.
    devices = keras.distribution.list_devices()
    mesh = keras.distribution.DeviceMesh((1, 8), ("batch", "model"), devices)
    layout_map = keras_nlp.models.LlamaBackbone.get_layout_map(mesh)
    distribution = keras_nlp.distribution.ModelParallel(
        layout_map=layout_map, batch_dim_name="batch"
    )
    with distribution.scope():
        backbone = keras_nlp.models.LlamaBackbone(
            vocabulary_size=64,
            num_layers=2,
            num_query_heads=8,
            num_key_value_heads=8,
            hidden_dim=32,
            intermediate_dim=32,
        )
        causal_lm = keras_nlp.models.LlamaCausalLM(backbone)
        causal_lm.init_cache(8, 16)
        with count_events(TRACE_EVENT) as traces:
            caches = causal_lm.init_cache(8, 16)
    assert [cache.sharding.spec for cache in caches] == [
        jax.sharding.PartitionSpec(None, None, None, "model", None)
    ] * 2
    assert traces[0] == 0
