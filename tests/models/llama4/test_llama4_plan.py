"""Llama 4 Maverick plans from its config alone, on 64 and 256 devices.

The plan comes from an abstract build: a 400B-parameter model (800 GB in
bfloat16) plans without allocating a weight. `benchmarks/llama4_plan.py`
times it; here the bound on time is loose (CI's cores are shared) and
the peak memory is what shows nothing was allocated.
"""

import resource
import time

import pytest

from keras_nlp.models import Llama4Backbone

MAVERICK = "llama4_maverick_17b_128e"
EXPERTS = "transformer_layer_1/llama4_sparse_moe_block/experts/"
# (mesh, bfloat16 bytes per device): experts on the expert axis, heads and
# widths on the model axis, hidden on the others; the routers (one
# (5120, 128) kernel per MoE block) are all that is whole everywhere.
MESHES = [
    ({"batch": 1, "expert": 8, "model": 8}, 12_554_188_800),
    ({"batch": 4, "expert": 8, "model": 8}, 3_162_885_120),
]


@pytest.mark.parametrize("mesh, expected", MESHES, ids=["64", "256"])
def test_maverick_plans_from_its_config_without_allocating(mesh, expected):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    plan = Llama4Backbone.plan_layout(mesh, preset=MAVERICK, dtype="bfloat16")
    seconds = time.perf_counter() - start
    grown_gib = (
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    ) / 2**20
    assert plan.total_params == 400_711_848_960
    assert plan.num_devices == 64 * mesh["batch"]
    assert plan.bytes_per_device == expected
    assert plan.fallbacks == ()
    assert plan.memory_ratio <= 1.02
    assert plan.weight(EXPERTS + "expert_feedforward_gate_dense").spec == (
        "expert",
        "batch",
        "model",
    )
    # One expert weight alone is 16 GB in bfloat16.
    assert grown_gib < 2, grown_gib
    assert seconds < 30, seconds
