"""GPT-2 and OPT, which share their blocks: their initializers, OPT's
embeddings layer. Shared checks: tests/models/test_backbone_table.py."""

import numpy as np
import pytest
from keras import ops

from tests.models.tiny_configs import tiny
from tests.models.zoo import reference


# Initial kernels' std bounds: RandomNormal(0.02) and TruncatedNormal(0.02),
# which cuts at two deviations. The name puts these tests with the zoo's
# models (tests/conftest.py).
@pytest.mark.parametrize(
    "name, low, high, cut",
    [("GPT2Backbone", 0.01, 0.03, None), ("OPTBackbone", 0.01, 0.02, 0.04)],
)
def test_initial_kernels_differ_and_have_the_familys_spread(
    name, low, high, cut
):
    backbone_cls, config = tiny(name)
    model = backbone_cls(**config)
    kernels = {
        v.path: ops.convert_to_numpy(v)
        for v in model.weights
        if v.path.endswith("/kernel")
    }
    attention = [k for p, k in kernels.items() if "self_attention/" in p]
    assert len(attention) == 8
    for i, first in enumerate(attention):
        for second in attention[i + 1 :]:
            assert first.shape != second.shape or not np.allclose(first, second)
    assert all(low < kernel.std() < high for kernel in attention)
    for path, kernel in kernels.items():
        assert cut is None or np.abs(kernel).max() <= cut + 1e-6, path


@pytest.mark.parametrize("name", ["OPTBackbone"])
def test_opt_embeddings_are_one_layer_holding_both_tables(name):
    ref = reference(name, "tiny")
    model = ref.backbone
    assert model.token_embedding is model.embeddings.token_embedding
    hidden = ops.convert_to_tensor(ref.outputs["sequence_output"])
    logits = model.token_embedding(hidden, reverse=True)
    assert tuple(ops.shape(logits)) == (8, 12, ref.config["vocabulary_size"])
