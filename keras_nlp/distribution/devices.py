"""Accelerators by name: their published memory, compute and bandwidths.

A `DeviceProfile` gives the cost model (`keras_nlp.distribution.cost`)
the device's own memory and link bandwidths, so a plan's choices are
scored for the hardware it is meant for, and gives a plan the memory its
weights are compared with (`plan PRESET --mesh 1x8 --device h100-80gb`).

Figures are the vendors' published per-chip peaks (dense bf16 compute,
not the doubled "with sparsity" figure); memory is counted in decimal
gigabytes as published, which is no more than a device holds. A link's
bandwidth is per direction: half the bidirectional figure published.

- NVIDIA H100 SXM5 80 GB: 989 TFLOPS bf16, 3.35 TB/s HBM3, NVLink 4
  900 GB/s bidirectional (NVIDIA H100 Tensor Core GPU datasheet).
- NVIDIA A100 SXM4 40 GB / 80 GB: 312 TFLOPS bf16, 1,555 / 2,039 GB/s,
  NVLink 3 600 GB/s bidirectional (NVIDIA A100 datasheet).
- NVIDIA L4 24 GB: 121 TFLOPS bf16 (242 with sparsity), 300 GB/s GDDR6,
  PCIe Gen4 x16, 64 GB/s bidirectional (NVIDIA L4 datasheet).
- Google Cloud TPU v5e: 197 TFLOPS bf16, 16 GB at 819 GB/s, ICI 400 GB/s
  bidirectional per chip (cloud.google.com/tpu/docs/v5e).
- TPU v5p: 459 TFLOPS bf16, 95 GB at 2,765 GB/s, ICI 1,200 GB/s
  bidirectional per chip (cloud.google.com/tpu/docs/v5p).
- TPU v6e (Trillium): 918 TFLOPS bf16, 32 GB at 1,638 GB/s, ICI 800 GB/s
  bidirectional per chip (cloud.google.com/tpu/docs/v6e).
"""

import dataclasses
import re

from keras_nlp.distribution.cost import CostModel
from keras_nlp.distribution.formatting import format_bytes


@dataclasses.dataclass(frozen=True)
class DeviceProfile:
    """One accelerator's published figures.

    Attributes:
        name: the name `device_profile` takes, e.g. `"h100-80gb"`.
        description: the product, e.g. `"NVIDIA H100 SXM 80 GB"`.
        memory_bytes: int, the device's memory.
        bf16_flops: float, peak dense bf16 FLOP/s.
        hbm_bandwidth: float, bytes/s of its memory.
        link_bandwidth: float, bytes/s it sends to the others per
            direction.
    """

    name: str
    description: str
    memory_bytes: int
    bf16_flops: float
    hbm_bandwidth: float
    link_bandwidth: float

    def cost_model(self, **settings):
        """A `CostModel` with this device's bandwidths (`settings` set the
        other fields, e.g. `training=False`)."""
        return CostModel(
            hbm_bandwidth=self.hbm_bandwidth,
            link_bandwidth=self.link_bandwidth,
            **settings,
        )

    def to_dict(self):
        return dataclasses.asdict(self)


_GB = 10**9
DEVICE_PROFILES = {
    profile.name: profile
    for profile in (
        DeviceProfile(
            "h100-80gb",
            "NVIDIA H100 SXM 80 GB",
            80 * _GB,
            989e12,
            3.35e12,
            450e9,
        ),
        DeviceProfile(
            "a100-40gb",
            "NVIDIA A100 SXM 40 GB",
            40 * _GB,
            312e12,
            1.555e12,
            300e9,
        ),
        DeviceProfile(
            "a100-80gb",
            "NVIDIA A100 SXM 80 GB",
            80 * _GB,
            312e12,
            2.039e12,
            300e9,
        ),
        DeviceProfile(
            "l4-24gb", "NVIDIA L4 24 GB", 24 * _GB, 121e12, 300e9, 32e9
        ),
        DeviceProfile(
            "tpu-v5e", "Google TPU v5e (16 GB)", 16 * _GB, 197e12, 819e9, 200e9
        ),
        DeviceProfile(
            "tpu-v5p",
            "Google TPU v5p (95 GB)",
            95 * _GB,
            459e12,
            2.765e12,
            600e9,
        ),
        DeviceProfile(
            "tpu-v6e",
            "Google TPU v6e (32 GB)",
            32 * _GB,
            918e12,
            1.638e12,
            400e9,
        ),
    )
}


def device_profile(device):
    """The `DeviceProfile` named `device` (any case), or `device` itself.

    Raises:
        ValueError: naming the known devices.

    Example:

    ```python
    from keras_nlp.distribution import device_profile
    from keras_nlp.models import GemmaBackbone

    l4 = device_profile("l4-24gb")
    plan = GemmaBackbone.plan_layout(
        {"batch": 1, "model": 8}, preset="gemma_2b_en", device=l4
    )
    print(f"{plan.bytes_per_device / l4.memory_bytes:.1%} of an L4")
    ```
    """
    if isinstance(device, DeviceProfile):
        return device
    key = device.lower() if isinstance(device, str) else None
    if key not in DEVICE_PROFILES:
        raise ValueError(
            f"Unknown device {device!r}. Known devices: "
            f"{', '.join(DEVICE_PROFILES)}; or give the memory with "
            "--device-memory (e.g. 24GiB)."
        )
    return DEVICE_PROFILES[key]


_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_MEMORY = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*")


def parse_memory(text):
    """Bytes of a memory size written as `"24GiB"`, `"80 GB"` or `"1e9"`.

    Raises:
        ValueError: naming the text and the units accepted.
    """
    match = _MEMORY.fullmatch(str(text))
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS or float(match.group(1)) <= 0:
        try:
            value = float(text)
        except (TypeError, ValueError):
            value = None
        if value is not None and value > 0 and value == int(value):
            return int(value)
        raise ValueError(
            f"A memory size must be a positive number with an optional unit "
            f"({', '.join(u for u in _UNITS if u)}), e.g. 24GiB or 80GB. "
            f"Received: {text!r}."
        )
    return int(float(match.group(1)) * _UNITS[unit])


def weights_on_device(plan, memory_bytes, description=None):
    """A line saying how much of a device's memory the plan's weights take.

    Args:
        plan: a `LayoutPlan`.
        memory_bytes: int, the device's memory.
        description: optional name of the device, e.g. `"NVIDIA L4 24 GB"`.

    Returns:
        `(line, fits)`: the text, and whether the weights alone fit. Only
        the weights are counted: gradients, optimizer state, activations
        and caches are not.
    """
    weights = plan.bytes_per_device
    fits = weights <= memory_bytes
    device = f"{description}, " if description else ""
    verdict = "fit" if fits else "do NOT fit"
    line = (
        f"device memory:         {device}{format_bytes(memory_bytes)}: the "
        f"weights take {format_bytes(weights)} per device "
        f"({weights / memory_bytes:.1%}) and {verdict}; gradients, "
        "optimizer state, activations and caches are not counted"
    )
    return line, fits
