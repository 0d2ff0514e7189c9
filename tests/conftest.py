"""Test session setup: JAX on 8 fake CPU devices, set before JAX is imported."""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")
_flag = "--xla_force_host_platform_device_count=8"
if _flag not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _flag).strip()
