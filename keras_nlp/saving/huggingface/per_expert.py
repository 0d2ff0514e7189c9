"""Experts stored one tensor per expert, read as the fused tensor.

transformers 5 holds a mixture of experts' weights fused, one tensor for
all experts (`mlp.experts.gate_up_proj` `(experts, 2 * width, hidden)`,
`mlp.experts.down_proj` `(experts, hidden, width)`), and writes them so;
many published checkpoints store one tensor per expert and projection
(`mlp.experts.{e}.gate_proj.weight` `(width, hidden)`, ...), which it fuses
as it loads. A `Weight` row of the fused tensor names a `PerExpert` form in
`stored_as`: a checkpoint without the fused tensor but with the per-expert
ones is read through it, each device reading only the experts and rows of
its shard.
"""

import dataclasses

import numpy as np

from keras_nlp.saving.huggingface.fp8 import FLOAT8
from keras_nlp.saving.huggingface.tensor_table import StoredTensor


@dataclasses.dataclass(frozen=True)
class PerExpert:
    """A fused experts tensor stored as one tensor per expert.

    The fused tensor `<prefix>.<fused>` `(experts, rows, columns)` is, for
    each expert `e`, the tensors `<prefix>.<e>.<part>.weight` of `parts`
    concatenated along their rows (`gate_up_proj` is `gate_proj` then
    `up_proj`, as transformers fuses them).

    Attributes:
        fused: the fused tensor's last name part (`"gate_up_proj"`).
        parts: the per-expert tensors' names, in row order
            (`("gate_proj", "up_proj")`).
    """

    fused: str
    parts: tuple
    name: str = "one tensor per expert"

    def _expert_name(self, prefix, expert, part):
        return f"{prefix}.{expert}.{part}.weight"

    def find(self, name, tensors):
        """`(StoredTensor or None, problems)` for `name` in `tensors`
        (name -> `TensorInfo`): None when expert 0's first tensor is
        absent; problems name missing, extra or mis-shaped experts."""
        if not name.endswith("." + self.fused):
            return None, []
        prefix = name[: -len(self.fused) - 1]
        first = tensors.get(self._expert_name(prefix, 0, self.parts[0]))
        if first is None:
            return None, []
        # Experts 0, 1, ... until one is absent (a gap leaves the rest
        # unread: the loader names them, and the count then differs from
        # the model's).
        count = 0
        while self._expert_name(prefix, count, self.parts[0]) in tensors:
            count += 1
        problems = []
        infos = []
        for expert in range(count):
            for part in self.parts:
                key = self._expert_name(prefix, expert, part)
                info = tensors.get(key)
                if info is None:
                    problems.append(
                        f"{key}: missing (expert {expert} of {name}, "
                        f"stored {self.name})"
                    )
                elif info.dtype == FLOAT8:
                    problems.append(
                        f"{info.describe()} is stored as {FLOAT8}: experts "
                        f"stored {self.name} load only unquantized"
                    )
                elif len(info.shape) != 2 or info.shape[1] != first.shape[1]:
                    problems.append(
                        f"{info.describe()} has shape {info.shape}; the "
                        f"experts of {name} are (rows, {first.shape[1]}) "
                        f"like {first.describe()}"
                    )
                else:
                    infos.append(info)
        if problems:
            return None, problems
        rows = [info.shape[0] for info in infos[: len(self.parts)]]
        for index, info in enumerate(infos):
            if info.shape[0] != rows[index % len(self.parts)]:
                problems.append(
                    f"{info.describe()} has shape {info.shape}; expert 0's "
                    f"{self.parts[index % len(self.parts)]} has "
                    f"{rows[index % len(self.parts)]} rows"
                )
        if problems:
            return None, problems
        shape = (count, sum(rows), first.shape[1])
        return StoredTensor(name, shape, first.dtype, infos, self), []

    def read(self, tensor, read, box, dtype):
        (first, last), (start, stop), columns = box
        per_expert = len(self.parts)
        experts = []
        for expert in range(first, last):
            pieces, offset = [], 0
            for info in tensor.parts[
                expert * per_expert : (expert + 1) * per_expert
            ]:
                rows = info.shape[0]
                low, high = max(start, offset), min(stop, offset + rows)
                if low < high:
                    pieces.append(
                        read(
                            info.name, ((low - offset, high - offset), columns)
                        )
                    )
                offset += rows
            experts.append(np.concatenate(pieces, axis=0).astype(dtype))
        return np.stack(experts)


PER_EXPERT_GATE_UP = PerExpert("gate_up_proj", ("gate_proj", "up_proj"))
"""transformers' fused `gate_up_proj`, stored as each expert's `gate_proj`
and `up_proj`; see `PerExpert`."""

PER_EXPERT_DOWN = PerExpert("down_proj", ("down_proj",))
"""transformers' fused `down_proj`, stored as each expert's `down_proj`;
see `PerExpert`."""
