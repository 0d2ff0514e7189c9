"""Qwen 3 MoE's query/key norms keep keras-hub's epsilon."""

import pytest

from tests.models.zoo import reference


# The name puts this test with the zoo's models (tests/conftest.py).
@pytest.mark.parametrize("name", ["Qwen3MoeBackbone"])
def test_query_key_norms_keep_keras_hubs_epsilon(name):
    model = reference(name, "e16_top8_gqa_32_4_sparse_step_2").backbone
    assert model.layer_norm.epsilon == 1e-4
    for block in model.transformer_layers:
        assert block.attention.layer_norm_epsilon == 1e-6
