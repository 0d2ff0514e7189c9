"""Test session setup.

JAX runs on 8 fake CPU devices so every mesh of the suite exists; the flag
must be set before JAX is imported. With fewer than 8 devices the run fails
instead of skipping: skipped multi-device tests are how sharding bugs hide.
"""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
_FLAG = "--xla_force_host_platform_device_count=8"
if _FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FLAG}"
# Repeated runs reuse compiled programs.
os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR",
    os.path.join(os.path.dirname(os.path.dirname(__file__)), ".jax_cache"),
)

import keras  # noqa: E402
import pytest  # noqa: E402

REQUIRED_DEVICES = 8


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "multi_device: needs the 8-device JAX mesh (fails, never skips, "
        "without it)",
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    if keras.backend.backend() == "jax":
        import jax

        found = len(jax.devices())
        if found < REQUIRED_DEVICES:
            raise pytest.UsageError(
                f"The test suite needs {REQUIRED_DEVICES} JAX devices and "
                f"found {found}. Set XLA_FLAGS={_FLAG} before JAX is "
                "imported (tests/conftest.py does this unless JAX was "
                "imported earlier, e.g. by a plugin)."
            )
        return
    multi_device = [
        item.nodeid for item in items if "multi_device" in item.keywords
    ]
    if multi_device:
        raise pytest.UsageError(
            f"{len(multi_device)} multi-device tests were collected on the "
            f"{keras.backend.backend()} backend, where Keras does not shard "
            "variables. Run them with KERAS_BACKEND=jax, or select the "
            "backend-independent tests with -m 'not multi_device'. First: "
            f"{multi_device[0]}"
        )
