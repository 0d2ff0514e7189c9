"""With fewer than 8 devices the suite fails; it never skips."""

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_too_few_devices_fail_the_run():
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_NUM_CPU_DEVICES="2")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        + ["tests/distribution/test_rules.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 4  # pytest's usage error: nothing ran
    assert "The test suite needs 8 JAX devices and found 2" in (
        result.stdout + result.stderr
    )
