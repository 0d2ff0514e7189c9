"""MXFP4, the 4-bit float form in which OpenAI's GPT-OSS stores its experts.

A `Weight` row names it in `stored_as` (`stored_as=(MXFP4,)`): a checkpoint
without the row's tensor but with its `_blocks` and `_scales` is read
through `Mxfp4`, each device dequantizing only the groups of its shard.
"""

import dataclasses

import numpy as np

from keras_nlp.saving.huggingface.tensor_table import StoredTensor

# E2M1 (4-bit float) values of the codes 0..15: the sign is bit 3, the
# exponent bits 1-2 (bias 1) and the mantissa bit 0; exponent 0 is
# subnormal (0 or 0.5).
_E2M1_VALUES = np.array(
    [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6],
    np.float32,
)
# Each byte's two values (low nibble first) as one 8-byte item: one
# gather per byte instead of two per value.
_E2M1_PAIRS = (
    np.stack(
        [_E2M1_VALUES[np.arange(256) & 15], _E2M1_VALUES[np.arange(256) >> 4]],
        axis=-1,
    )
    .view(np.uint64)
    .reshape(256)
)
# E8M0 scales: 2 ** (code - 127), exact in float32 (2 ** -127 is
# subnormal); 255 is NaN.
with np.errstate(over="ignore"):
    _E8M0_VALUES = np.ldexp(np.float32(1), np.arange(256) - 127).astype(
        np.float32
    )
_E8M0_VALUES[255] = np.nan
# Values dequantized at a time (bounds the float32 temporary).
_MXFP4_CHUNK = 1 << 22


def dequantize_mxfp4(blocks, scales, dtype="float32"):
    """MXFP4 values from their codes and scales.

    Args:
        blocks: uint8 array `(..., groups, 16)`: 32 E2M1 codes per group,
            two a byte, the first in the low nibble.
        scales: uint8 array `(..., groups)`: each group's E8M0 scale, the
            power of two `2 ** (scale - 127)` (255 is NaN).
        dtype: the result's dtype. float32 and bfloat16 hold every MXFP4
            value exactly.

    Returns:
        Array `(..., groups * 32)`.
    """
    blocks, scales = np.asarray(blocks), np.asarray(scales)
    *lead, groups, size = blocks.shape
    out = np.empty((*lead, groups, 2 * size), dtype)
    rows = blocks.reshape(-1, size)
    exponents = scales.reshape(-1)
    flat = out.reshape(-1, 2 * size)
    step = max(1, _MXFP4_CHUNK // (2 * size))
    for start in range(0, rows.shape[0], step):
        stop = start + step
        values = _E2M1_PAIRS[rows[start:stop]].view(np.float32)
        # A power of two times an E2M1 value: exact (or inf past float32).
        with np.errstate(over="ignore", invalid="ignore"):
            values *= _E8M0_VALUES[exponents[start:stop]][:, None]
        flat[start:stop] = values
    return out.reshape(*lead, groups * 2 * size)


@dataclasses.dataclass(frozen=True)
class Mxfp4:
    """MXFP4 (OCP microscaling 4-bit float), as OpenAI's GPT-OSS
    checkpoints store their experts.

    A tensor `T` of shape `(..., rows, columns)` named `name` is stored
    transposed, `(..., columns, rows)`, and quantized along that last axis
    in groups of 32 values: `name + "_blocks"`, uint8 `(..., columns,
    rows / 32, 16)`, holds each group's 32 E2M1 codes, two a byte (low
    nibble first), and `name + "_scales"`, uint8 `(..., columns, rows /
    32)`, each group's E8M0 scale `2 ** (scale - 127)`. (So `T` is
    Hugging Face's unquantized `gate_up_proj` `(experts, hidden, 2 *
    intermediate)`.) A box of `T` reads the groups that hold its rows,
    for its columns only.
    """

    blocks_suffix: str = "_blocks"
    scales_suffix: str = "_scales"
    name: str = "MXFP4"
    group: int = 32

    def find(self, name, tensors):
        """`(StoredTensor or None, problems)` for `name` in `tensors`
        (name -> `TensorInfo`): None when its blocks are absent; problems
        name malformed or missing parts."""
        blocks = tensors.get(name + self.blocks_suffix)
        if blocks is None:
            return None, []
        scales = tensors.get(name + self.scales_suffix)
        if scales is None:
            return None, [
                f"{name + self.scales_suffix}: missing (the {self.name} "
                f"scales of {blocks.describe()}, expected shape "
                f"{blocks.shape[:-1]})"
            ]
        half = self.group // 2
        problems = []
        if (
            blocks.dtype != "uint8"
            or len(blocks.shape) < 3
            or blocks.shape[-1] != half
        ):
            problems.append(
                f"{blocks.describe()} has shape {blocks.shape} and dtype "
                f"{blocks.dtype}; {self.name} blocks are uint8 of shape "
                f"(..., columns, groups, {half})"
            )
        elif scales.dtype != "uint8" or scales.shape != blocks.shape[:-1]:
            problems.append(
                f"{scales.describe()} has shape {scales.shape} and dtype "
                f"{scales.dtype}; the {self.name} scales of "
                f"{blocks.describe()} {blocks.shape} are uint8 of shape "
                f"{blocks.shape[:-1]}"
            )
        if problems:
            return None, problems
        *lead, columns, groups, _ = blocks.shape
        shape = (*lead, groups * self.group, columns)
        return StoredTensor(name, shape, "bfloat16", (blocks, scales), self), []

    def read(self, tensor, read, box, dtype):
        blocks, scales = tensor.parts
        *lead, (start, stop), columns = box
        first = start // self.group
        last = -(-stop // self.group)
        groups = (first, last)
        codes = read(
            blocks.name, (*lead, columns, groups, (0, self.group // 2))
        )
        exponents = read(scales.name, (*lead, columns, groups))
        values = dequantize_mxfp4(codes, exponents, dtype)
        offset = first * self.group
        values = values[..., start - offset : stop - offset]
        return np.swapaxes(values, -1, -2)


MXFP4 = Mxfp4()
"""Hugging Face's MXFP4 experts (`*_blocks`, `*_scales`); see `Mxfp4`."""
