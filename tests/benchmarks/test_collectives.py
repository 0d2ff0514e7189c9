"""The HLO collective parser of `benchmarks/collectives.py`."""

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from benchmarks.collectives import collective_stats
from benchmarks.collectives import shape_bytes

pytestmark = pytest.mark.multi_device

HLO = """
HloModule jit_step, entry_computation_layout={(f32[8,64]{1,0})->f32[8,64]}

%add (x: f32[], y: f32[]) -> f32[] {
  ROOT %sum = f32[] add(f32[] %x, f32[] %y)
}

ENTRY %main (p0: f32[8,64]) -> f32[8,64] {
  %p0 = f32[8,64]{1,0} parameter(0)
  %all-reduce = f32[8,64]{1,0} all-reduce(%p0), channel_id=1, to_apply=%add
  %all-reduce.1 = (f32[8,64]{1,0}, bf16[4,2]{1,0}) all-reduce(%a, %b), \
channel_id=2, to_apply=%add
  %all-gather-start = (f32[2,64]{1,0}, f32[8,64]{1,0}) all-gather-start(\
f32[2,64]{1,0} %p0), dimensions={0}
  %all-gather-done = f32[8,64]{1,0} all-gather-done(\
(f32[2,64]{1,0}, f32[8,64]{1,0}) %all-gather-start)
  %all-reduce-start = f32[16]{0} all-reduce-start(%c), to_apply=%add
  %all-reduce-done = f32[16]{0} all-reduce-done(%all-reduce-start)
  %reduce-scatter = s32[2,64]{1,0} reduce-scatter(%d), dimensions={0}
  %ragged = f32[4]{0} ragged-all-to-all(%e, %f, %g, %h, %i, %j)
  %collective-permute-start.3 = (f32[8]{0}, f32[8]{0}, u32[], u32[]) \
collective-permute-start(%k), source_target_pairs={{0,1}}
  %collective-permute-done.3 = f32[8]{0} collective-permute-done(\
%collective-permute-start.3)
  ROOT %all-to-all = f32[8,64]{0,1} all-to-all(%p0), dimensions={0}
}
""".replace("\\\n", "")


def test_shape_bytes_sums_tuples_and_dtypes():
    assert shape_bytes("f32[8,64]{1,0}") == 8 * 64 * 4
    assert shape_bytes("(f32[8,64]{1,0}, bf16[4,2]{1,0})") == 2048 + 16
    assert shape_bytes("(f32[], pred[3], token[])") == 4 + 3
    assert shape_bytes("s8[0,4]") == 0


def test_handcrafted_hlo():
    stats = collective_stats(HLO)
    # A plain op and a tuple-shaped (combined) one, plus an async pair
    # counted once with its -done's bytes.
    assert stats["all-reduce"] == (3, 2048 + (2048 + 16) + 16 * 4)
    # The -start tuple also holds the operand: bytes come from the -done.
    assert stats["all-gather"] == (1, 8 * 64 * 4)
    assert stats["reduce-scatter"] == (1, 2 * 64 * 4)
    # ragged-all-to-all is not an all-to-all.
    assert stats["all-to-all"] == (1, 8 * 64 * 4)
    assert stats["collective-permute"] == (1, 8 * 4)


def _mesh():
    return jax.make_mesh(
        (2, 4),
        ("batch", "model"),
        axis_types=(jax.sharding.AxisType.Auto,) * 2,
    )


def test_real_sharded_matmul():
    # x's features and w's rows on 'model': each device holds a partial
    # product, all-reduced over the 4 devices of its 'model' group.
    mesh = _mesh()
    x = jax.ShapeDtypeStruct(
        (16, 64), jnp.float32, sharding=NamedSharding(mesh, P("batch", "model"))
    )
    w = jax.ShapeDtypeStruct(
        (64, 32), jnp.float32, sharding=NamedSharding(mesh, P("model", None))
    )
    matmul = jax.jit(
        lambda x, w: x @ w, out_shardings=NamedSharding(mesh, P("batch"))
    )
    stats = collective_stats(matmul.lower(x, w).compile().as_text())
    assert stats["all-reduce"] == (1, 8 * 32 * 4)
    assert sum(stat.count for stat in stats.values()) == 1


def test_real_psum():
    mesh = _mesh()

    def total(x):
        return jax.lax.psum(x, "model")

    psum = jax.jit(
        jax.shard_map(
            total, mesh=mesh, in_specs=P("batch", "model"), out_specs=P("batch")
        )
    )
    # float32: XLA:CPU all-reduces bfloat16 in float32.
    x = jax.ShapeDtypeStruct((16, 8), jnp.float32)
    stats = collective_stats(psum.lower(x).compile().as_text())
    # One device's block: 16 / 2 rows, 8 / 4 columns.
    assert stats["all-reduce"] == (1, 8 * 2 * 4)
    assert stats["all-gather"].count == 0
