"""Oracle outputs kept as data: written once by a script, read by tests.

keras-hub (and any other oracle) is expensive to build and run on every
test run, and its numbers do not change unless its version does. So the
reference outputs it gives are stored under `tests/oracle_data/` as small
`.npz` files, with the oracle's version in `tests/oracle_data/VERSIONS.json`,
and tests compare our models against them without building the oracle.

Each test module that keeps oracle data defines a function
`generate_oracle_data()` that builds the oracle and returns
`{name: {array name: NumPy array}}`, and is listed in `GENERATORS` below.
Regenerate after changing a case, or when the oracle's version changes:

    python -m tests.oracles              # every generator
    python -m tests.oracles causal_lm    # the modules whose key contains it

A few tests per family still build the oracle live and compare it with the
stored data (`assert_oracle_unchanged`), so a new oracle version that
changes the numbers fails a test instead of going unnoticed.
"""

import importlib
import json
import pathlib
import sys

import numpy as np

DATA_DIR = pathlib.Path(__file__).parent / "oracle_data"
VERSIONS = DATA_DIR / "VERSIONS.json"
COMMAND = "python -m tests.oracles"

# key -> "module:function" returning {name: {array name: array}}; one line
# per module that keeps oracle data.
GENERATORS = {
    "deepseek_v3": (
        "tests.models.deepseek_v3.test_deepseek_v3_backbone:generate_oracle_data"
    ),
    "backbones": "tests.models.test_backbone_oracles:generate_oracle_data",
    "causal_lm": "tests.models.test_causal_lm_keras_hub:generate_oracle_data",
    "decoder_layers": (
        "tests.models.test_decoder_layer_oracles:generate_oracle_data"
    ),
    "pali_gemma_generate": (
        "tests.models.pali_gemma.test_pali_gemma_causal_lm:generate_oracle_data"
    ),
    "jax_outputs": "tests.test_tensorflow_backend:generate_oracle_data",
    "llama4": "tests.models.llama4.test_llama4_oracle:generate_oracle_data",
    "relative_buckets": (
        "tests.models.test_relative_buckets:generate_oracle_data"
    ),
    "gated_feedforward": (
        "tests.layers.test_gated_feedforward:generate_oracle_data"
    ),
    "shared_expert_moe": (
        "tests.layers.test_shared_expert_moe:generate_oracle_data"
    ),
    "sparse_moe": "tests.layers.test_sparse_moe:generate_oracle_data",
    "seq2seq_lm": "tests.models.test_seq2seq_lm:generate_oracle_data",
    "text_classifier": "tests.models.test_text_classifier:generate_oracle_data",
    "masked_lm": (
        "tests.models.test_text_classifier:generate_masked_lm_oracle_data"
    ),
}


def oracle_versions():
    """The oracle's library versions the data is written with."""
    import jax
    import keras
    import keras_hub

    return {
        "keras_hub": keras_hub.__version__,
        "keras": keras.__version__,
        "jax": jax.__version__,
        "numpy": np.__version__,
    }


def load(name):
    """The stored arrays of `name` as `{array name: array}`.

    Raises:
        FileNotFoundError: naming the command that writes it.
    """
    path = DATA_DIR / f"{name}.npz"
    if not path.exists():
        raise FileNotFoundError(
            f"No stored oracle data '{name}' ({path}). Write it with "
            f"`{COMMAND}` from the repository root."
        )
    with np.load(path) as data:
        return {key: data[key] for key in data.files}


def stored_version(name):
    """The versions `name` was written with."""
    return json.loads(VERSIONS.read_text())[name]


def save(name, arrays, versions):
    path = DATA_DIR / f"{name}.npz"
    np.savez_compressed(path, **{k: np.asarray(v) for k, v in arrays.items()})
    recorded = json.loads(VERSIONS.read_text()) if VERSIONS.exists() else {}
    recorded[name] = versions
    VERSIONS.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")


def assert_oracle_unchanged(name, arrays, atol=1e-5):
    """Live oracle outputs equal the stored ones (same oracle numbers).

    Within float32 rounding: XLA compiles for the CPU it runs on, and the
    same oracle gave differences up to 5.5e-6 on a CPU with AVX-512 and
    AMX. A changed oracle differs by far more.

    Fails with the stored and installed versions when they differ, and
    the command that rewrites the data.
    """
    stored = load(name)
    assert sorted(arrays) == sorted(stored), (name, sorted(arrays))
    for key, value in stored.items():
        try:
            np.testing.assert_allclose(
                np.asarray(arrays[key]), value, atol=atol, rtol=atol
            )
        except AssertionError as error:
            raise AssertionError(
                f"The oracle's '{name}/{key}' differs from the stored data "
                f"(written with {stored_version(name)}, installed: "
                f"{oracle_versions()}). If the new oracle is right, "
                f"rewrite the data with `{COMMAND}`.\n{error}"
            ) from None


def main(argv):
    import os

    os.environ.setdefault("KERAS_BACKEND", "jax")
    DATA_DIR.mkdir(exist_ok=True)
    versions = oracle_versions()
    selected = [k for k in GENERATORS if not argv or any(a in k for a in argv)]
    if not selected:
        raise SystemExit(
            f"No generator matches {argv}; known: {sorted(GENERATORS)}"
        )
    for key in selected:
        module_name, function = GENERATORS[key].split(":")
        generate = getattr(importlib.import_module(module_name), function)
        written = generate()
        for name, arrays in sorted(written.items()):
            save(name, arrays, versions)
        print(f"{key}: wrote {len(written)} file(s)", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
