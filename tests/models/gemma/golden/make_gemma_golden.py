"""Writes gemma_outputs.npz: GemmaBackbone outputs on JAX, fp32, CPU.

Run from the repository root when the model's numerics change on purpose:

    KERAS_BACKEND=jax python tests/models/gemma/golden/make_gemma_golden.py
"""

import os
import pathlib
import sys

os.environ["KERAS_BACKEND"] = "jax"
HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import keras  # noqa: E402
import numpy as np  # noqa: E402
from cross_backend_cases import CASES  # noqa: E402
from cross_backend_cases import assign_path_seeded_weights  # noqa: E402
from cross_backend_cases import case_inputs  # noqa: E402

from keras_nlp.models import GemmaBackbone  # noqa: E402


def main():
    outputs = {}
    for name, config in CASES.items():
        model = GemmaBackbone(**config)
        assign_path_seeded_weights(model)
        outputs[name] = keras.ops.convert_to_numpy(model(case_inputs()))
    np.savez(HERE / "gemma_outputs.npz", **outputs)
    print(f"wrote {sorted(outputs)} with keras {keras.__version__} on JAX")


if __name__ == "__main__":
    main()
