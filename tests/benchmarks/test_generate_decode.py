"""The helpers of `benchmarks/generate_decode.py`: the prefill/decode split,
the planned KV cache bytes and the reader of keras-hub's cache shards."""

import math

import pytest

from benchmarks.generate_decode import cache_rows
from benchmarks.generate_decode import cache_shards_in_while
from benchmarks.generate_decode import decode_rates

MIB = 2**20


def test_decode_rates_split_prefill_from_decode_steps():
    rates = decode_rates(0.5, 2.39, new_tokens=64, batch=8)
    step = (2.39 - 0.5) / 63
    assert rates["step_ms"] == pytest.approx(step * 1e3)
    assert rates["decode_tokens_per_s"] == pytest.approx(8 / step)
    assert rates["end_to_end_tokens_per_s"] == pytest.approx(8 * 64 / 2.39)
    assert rates["prefill_steps"] == pytest.approx(0.5 / step)


def test_decode_rates_are_nan_when_noise_hides_the_steps():
    rates = decode_rates(0.6, 0.55, new_tokens=4, batch=8)
    assert math.isnan(rates["step_ms"])
    assert math.isnan(rates["decode_tokens_per_s"])
    assert rates["end_to_end_tokens_per_s"] == pytest.approx(32 / 0.55)
    with pytest.raises(ValueError, match="new_tokens must be > 1"):
        decode_rates(0.5, 1.0, new_tokens=1, batch=8)


def cache_mib(layers, batch, kv_heads, head_dim, context=8192, itemsize=2):
    """A decoder's whole KV cache: keys and values of every layer."""
    return layers * batch * 2 * context * kv_heads * head_dim * itemsize / MIB


def test_gemma_2b_single_kv_head_cache_is_split_by_length():
    batch_1, batch_8 = cache_rows("gemma_2b_en", (2, 4), (1, 8))
    # 18 layers, 1 key/value head of 256.
    for row, batch in ((batch_1, 1), (batch_8, 8)):
        assert row["caches"] == 18
        assert row["total"] / MIB == pytest.approx(cache_mib(18, batch, 1, 256))
        assert row["ideal"] == pytest.approx(row["total"] / 8)
    # Batch 8 splits over 'batch' (2); the head is whole on 'model' (4),
    # so the length splits there.
    assert batch_8["per_device"] == pytest.approx(batch_8["total"] / 8)
    assert batch_8["ratio"] == pytest.approx(1.0)
    assert "the length over 'model' (4)" in batch_8["why"]
    # A batch of 1 cannot split over 'batch': twice the ideal.
    assert batch_1["per_device"] == pytest.approx(batch_1["total"] / 4)
    assert batch_1["ratio"] == pytest.approx(2.0)
    assert "batch 1 not divisible by 'batch' (2)" in batch_1["why"]


def test_llama3_8b_cache_splits_its_kv_heads_evenly():
    (row,) = cache_rows("llama3_8b_en", (1, 8), (8,))
    # 32 layers, 8 key/value heads of 128: 8 GiB at 8k positions.
    assert row["total"] / MIB == pytest.approx(cache_mib(32, 8, 8, 128))
    assert row["total"] / MIB == 8192
    assert row["per_device"] == pytest.approx(row["total"] / 8)
    assert row["ratio"] == pytest.approx(1.0)
    assert row["why"] == "8 KV heads over 'model' (8)"
    # Llama 3 8B has 8,030,261,248 parameters; bfloat16, split 8 ways.
    assert row["weights_per_device"] == pytest.approx(
        8_030_261_248 * 2 / 8, rel=1e-3
    )


HLO = """
ENTRY %main {
  %p = (s32[], f32[8,1,2,40,1,8]{5,4,3,2,1,0}, f32[8,40]{1,0}) parameter(0)
  %copy = f32[8,1,2,40,8,8]{5,4,3,2,1,0} copy(%x)
  %while.1 = (s32[], f32[8,1,2,40,1,8]{5,4,3,2,1,0}, f32[8,40]{1,0}) \
while(%tuple), condition=%cond, body=%body
  %while.2 = (s32[], bf16[4,1,2,40,2,8]{5,4,3,2,1,0}) while(%t2), \
condition=%cond.2, body=%body.2
  ROOT %r = f32[8,1,2,40,1,8]{5,4,3,2,1,0} get-tuple-element(%while.1), index=1
}
""".replace("\\\n", "")


def test_cache_shards_are_read_from_while_loop_states_only():
    # The whole-cache-shaped copy outside a while loop is not counted.
    assert cache_shards_in_while(HLO, layers=1, length=40) == {
        (8, 1, 2, 40, 1, 8),
        (4, 1, 2, 40, 2, 8),
    }
    assert cache_shards_in_while(HLO, layers=2, length=40) == set()
