"""Block-scaled FP8, the form of `Qwen/Qwen3-8B-FP8`, `Qwen3-30B-A3B-FP8`
and DeepSeek-V3 checkpoints.

`transformers`' "fp8" quantizer (`FineGrainedFP8Config`) writes them:

- `config.json` has `"quantization_config": {"quant_method": "fp8",
  "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size":
  [128, 128]}` (also `modules_to_not_convert`, `scale_fmt`, ...);
- each quantized linear's `X.weight` is stored as `F8_E4M3`
  (`float8_e4m3fn`) in its torch layout `(out, in)`, beside
  `X.weight_scale_inv`, float32 (or bfloat16) of shape
  `(ceil(out / 128), ceil(in / 128))`: the weight is
  `weight[i, j] * weight_scale_inv[i // 128, j // 128]` (blocks of
  `weight_block_size` rows and columns; the last ones may be partial);
- embeddings, norms, routers and (usually) `lm_head` stay unquantized.

Any family reads such a checkpoint: where a table's tensor is stored as
float8 beside its `_scale_inv`, the loader reads it through `Fp8` (a
`StoredTensor`), and the table's ops convert the dequantized `(out, in)`
box as they would the unquantized tensor. Each device reads only the rows
and columns of its shard and the scales of the blocks covering them, and
dequantizes them to the variable's dtype (the product in float32, then
rounded once to bfloat16 for a bfloat16 variable). The weights are not
kept as float8: Keras's float8 layers hold one scale per tensor
(`Dense.kernel_scale`, shape `()`), so per-block scales have nowhere to
go. safetensors' NumPy reader has no float8 type: `Checkpoint` copies
float8 boxes out of its own memory map of the file.

`read_quantization` checks the config when it is translated (any other
`quant_method` is refused, naming it), `Fp8.find` each weight's scales
(missing, mis-shaped, not float) before anything is read, and `Fp8.read`
the scales it reads (a block whose scale is not finite and positive is
named).
"""

import dataclasses

import numpy as np

from keras_nlp.saving.huggingface.tensor_table import StoredTensor
from keras_nlp.saving.preset_files import PresetError

FLOAT8 = "float8_e4m3fn"
# transformers' default `weight_block_size`.
DEFAULT_BLOCK = (128, 128)
# The fields of an fp8 `quantization_config`. Those that only matter to
# `transformers`' own matmuls (the activations' scheme, `scale_fmt`, the
# modules left unquantized, which the tensors' dtypes show) may hold any
# value.
_FP8_FIELDS = (
    "quant_method",
    "fmt",
    "activation_scheme",
    "weight_block_size",
    "modules_to_not_convert",
    "ignored_layers",
    "scale_fmt",
    "dequantize",
)
# The quantization methods read: fp8 by any family, mxfp4 by gpt_oss's.
READ_METHODS = (
    "'fp8' (block-scaled float8 e4m3 weights, any model type)",
    "'mxfp4' (gpt_oss experts)",
)
# Values dequantized at a time (bounds the float32 temporaries).
_FP8_CHUNK = 1 << 22


def read_quantization(quantization, path):
    """The `Fp8` form of a `quantization_config`, or None without one.

    Args:
        quantization: the `quantization_config` of `config.json` (None
            when absent).
        path: the `config.json` path, for messages.

    Raises:
        PresetError: a method other than "fp8" (naming it and those read),
            or fp8 fields we cannot read (`fmt` other than "e4m3",
            `weight_block_size` not two positive integers, unknown keys).
    """
    if quantization is None:
        return None
    method = (
        quantization.get("quant_method")
        if isinstance(quantization, dict)
        else None
    )
    if method != "fp8":
        raise PresetError(
            f"{path}: quantization_config has quant_method={method!r}, "
            "which keras_nlp does not read. It reads "
            f"{' and '.join(READ_METHODS)}, dequantized on load; "
            "dequantize this checkpoint to bfloat16 or float32 first."
        )
    unknown = sorted(set(quantization) - set(_FP8_FIELDS))
    if unknown:
        raise PresetError(
            f"{path}: quantization_config keys {unknown} are not understood "
            f"for quant_method 'fp8' (read: {', '.join(_FP8_FIELDS)}), so "
            "the checkpoint is not loaded rather than loaded wrong."
        )
    fmt = quantization.get("fmt", "e4m3")
    if fmt != "e4m3":
        raise PresetError(
            f"{path}: quantization_config.fmt={fmt!r} is not read; fp8 "
            "checkpoints load when their weights are 'e4m3' "
            "(float8_e4m3fn)."
        )
    block = quantization.get("weight_block_size", list(DEFAULT_BLOCK))
    if (
        not isinstance(block, (list, tuple))
        or len(block) != 2
        or not all(
            isinstance(size, int) and not isinstance(size, bool) and size > 0
            for size in block
        )
    ):
        raise PresetError(
            f"{path}: quantization_config.weight_block_size={block!r} must "
            "be two positive integers [rows, columns] (e.g. [128, 128]): "
            "each weight_scale_inv entry scales one such block of its "
            "weight."
        )
    return Fp8(tuple(block))


def fp8_in_config(data, path):
    """The `Fp8` form of a `config.json` (`data`) quantized by "fp8", else
    None (another method is refused by `read_quantization` when its
    config is translated, unless its family reads it)."""
    quantization = data.get("quantization_config")
    if isinstance(quantization, dict) and (
        quantization.get("quant_method") == "fp8"
    ):
        return read_quantization(quantization, path)
    return None


def dequantize_fp8(weight, scale_inv, block=DEFAULT_BLOCK, dtype="float32"):
    """Block-scaled float8 values, dequantized.

    Args:
        weight: float8_e4m3fn array `(..., rows, columns)`.
        scale_inv: float array `(..., ceil(rows / block[0]),
            ceil(columns / block[1]))`: each block's scale.
        block: `(rows, columns)` of a block (`weight_block_size`).
        dtype: the result's dtype.

    Returns:
        `weight[..., i, j] * scale_inv[..., i // block[0], j // block[1]]`,
        computed in float32 and cast to `dtype`.
    """
    return _dequantize(weight, scale_inv, block, (0, 0), dtype)


def _dequantize(codes, scales, block, offset, dtype):
    """`dequantize_fp8` of a box whose first row and column lie at
    `offset` within the first block of `scales`."""
    codes = np.asarray(codes)
    rows, columns = codes.shape[-2:]
    scales = np.asarray(scales, np.float32)
    scales = scales.reshape(-1, *scales.shape[-2:])
    row_blocks = (np.arange(rows) + offset[0]) // block[0]
    column_blocks = (np.arange(columns) + offset[1]) // block[1]
    out = np.empty(codes.shape, dtype)
    flat_codes = codes.reshape(-1, rows, columns)
    flat_out = out.reshape(-1, rows, columns)
    step = max(1, _FP8_CHUNK // max(columns, 1))
    for k in range(flat_codes.shape[0]):
        # Each row's scales, one per column (a block-row's repeated).
        by_column = scales[k][:, column_blocks]
        for start in range(0, rows, step):
            stop = start + step
            values = flat_codes[k, start:stop].astype(np.float32)
            with np.errstate(over="ignore", invalid="ignore"):
                values *= by_column[row_blocks[start:stop]]
                flat_out[k, start:stop] = values
    return out


@dataclasses.dataclass(frozen=True)
class Fp8:
    """Block-scaled FP8 (float8 e4m3 with one inverse scale per block), as
    `transformers`' "fp8" quantizer stores linear weights.

    A tensor `T` `(..., out, in)` named `name` is stored as float8_e4m3fn
    under its own name, beside `name + "_scale_inv"`, float32 or bfloat16
    of shape `(..., ceil(out / block[0]), ceil(in / block[1]))`. A box of
    `T` reads its rows and columns of `T` and the scales of the blocks
    covering them.
    """

    block: tuple = DEFAULT_BLOCK
    scale_suffix: str = "_scale_inv"
    name: str = "FP8"

    def scale_shape(self, shape):
        """The scales' shape for a weight of `shape`."""
        *lead, rows, columns = shape
        return (*lead, -(-rows // self.block[0]), -(-columns // self.block[1]))

    def find(self, name, tensors):
        """`(StoredTensor or None, problems)` for `name` in `tensors`
        (name -> `TensorInfo`): None when it is absent or not float8;
        problems name a missing or malformed scale."""
        weight = tensors.get(name)
        if weight is None or weight.dtype != FLOAT8:
            return None, []
        scale_name = name + self.scale_suffix
        scale = tensors.get(scale_name)
        blocks = f"weight_block_size {list(self.block)}"
        if len(weight.shape) < 2:
            return None, [
                f"{weight.describe()} is {FLOAT8} of shape {weight.shape}; "
                f"{self.name} weights are matrices (..., out, in) scaled "
                "by blocks"
            ]
        expected = self.scale_shape(weight.shape)
        if scale is None:
            return None, [
                f"{scale_name}: missing (the {self.name} block scales of "
                f"{weight.describe()} {weight.shape} {FLOAT8}, expected "
                f"shape {expected} for {blocks})"
            ]
        if scale.shape != expected:
            return None, [
                f"{scale.describe()} has shape {scale.shape}, expected "
                f"{expected}: the {self.name} block scales of "
                f"{weight.describe()} {weight.shape}, one per block of "
                f"{blocks} (the last blocks partial)"
            ]
        if scale.dtype not in ("float32", "bfloat16", "float16", "float64"):
            return None, [
                f"{scale.describe()} has dtype {scale.dtype}; the "
                f"{self.name} block scales of {weight.describe()} are "
                "floats (float32 or bfloat16 as published)"
            ]
        # The product of a float8 value (4 significant bits) and a
        # bfloat16 scale is exact in float32, and a float32 scale's is
        # rounded to float32 once: float32 loads warn of no rounding.
        return StoredTensor(
            name, weight.shape, "float32", (weight, scale), self
        ), []

    def read(self, tensor, read, box, dtype):
        weight, scale = tensor.parts
        *lead, rows, columns = box
        row_blocks = (rows[0] // self.block[0], -(-rows[1] // self.block[0]))
        column_blocks = (
            columns[0] // self.block[1],
            -(-columns[1] // self.block[1]),
        )
        scales = read(scale.name, (*lead, row_blocks, column_blocks))
        scales = np.asarray(scales, np.float32)
        self._check_scales(tensor, scales, (*lead, row_blocks, column_blocks))
        codes = read(weight.name, box)
        offset = (
            rows[0] - row_blocks[0] * self.block[0],
            columns[0] - column_blocks[0] * self.block[1],
        )
        return _dequantize(codes, scales, self.block, offset, dtype)

    def _check_scales(self, tensor, scales, scale_box):
        """Raises naming the first block (of the box read) whose scale is
        not finite and positive."""
        with np.errstate(invalid="ignore"):
            good = np.isfinite(scales) & (scales > 0)
        if good.all():
            return
        weight, scale = tensor.parts
        where = np.argwhere(~good)[0]
        index = tuple(
            int(i) + start
            for i, (start, _) in zip(where, scale_box, strict=True)
        )
        value = scales[tuple(where)]
        raise PresetError(
            f"{scale.describe()}: block {list(index)} of {weight.describe()} "
            f"has scale {float(value)!r}; {self.name} block scales must be "
            "finite and positive (a corrupt or mis-converted checkpoint)."
        )
