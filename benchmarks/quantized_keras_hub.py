"""keras-hub's int8 quantization under its own layout maps, beside ours.

For each backbone class keras-hub gives a `get_layout_map` (and that we
also have), on a (2, 4) mesh of fake CPU devices: the tiny test config is
built under `keras.distribution.ModelParallel` with keras-hub's map, then
`quantize("int8")` is called in the scope; the same with ours. Reported
per side: whether it ran, the per-device bytes of all variables over the
ideal (total / devices), how many variables Keras added (scales) and how
many of them ended up whole on every device, and whether the sharded int8
outputs equal the same library's unsharded int8 model's (within 3% of the
largest output: the layers quantize their inputs too, so one rounding
step may move). Both sides start from the same float weights. Classes
without a keras-hub map cannot be sharded by keras-hub at all (every
variable whole on every device: 8.00).

Run: python benchmarks/quantized_keras_hub.py
    [--output benchmarks/quantized_keras_hub.md]
"""

import argparse
import math
import os
import sys
import time

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)) or ".")
    from _sharded_configs import setup_devices

    setup_devices()

MESH = (2, 4)
AXES = ("batch", "model")
TOLERANCE = 0.03


def per_device_ratio(model):
    """Per-device bytes of all variables over the ideal, and the count
    of variables replicated on every device."""
    import numpy as np

    total = shard = 0
    whole = []
    for variable in model.weights:
        value = variable.value
        nbytes = value.size * np.dtype(value.dtype).itemsize
        total += nbytes
        piece = value.addressable_shards[0].data
        shard += piece.size * np.dtype(piece.dtype).itemsize
        if piece.shape == value.shape and value.size > 1:
            whole.append(variable.path)
    return shard / (total / math.prod(MESH)), whole


def unsharded_int8_outputs(build, inputs):
    """The library's own int8 outputs, built and quantized unsharded."""
    import numpy as np

    model = build()
    model.quantize("int8")
    outputs = model(inputs)
    if not isinstance(outputs, dict):
        outputs = {"out": outputs}
    return {k: np.asarray(v) for k, v in outputs.items()}


def run_side(build, layout_map, inputs):
    """`(row dict)` for one library: build in the scope, quantize, compare
    with the same library's unsharded int8 model."""
    import jax
    import keras
    import numpy as np

    expected = unsharded_int8_outputs(build, inputs)

    distribution = keras.distribution.ModelParallel(
        layout_map=layout_map, batch_dim_name="batch"
    )
    try:
        with distribution.scope():
            model = build()
            before = {v.path for v in model.weights}
            model.quantize("int8")
            outputs = jax.jit(lambda x: model(x))(inputs)
    except Exception as error:  # report what the library raises
        return {"ran": f"error: {type(error).__name__}: {str(error)[:90]}"}
    ratio, whole = per_device_ratio(model)
    added = [v.path for v in model.weights if v.path not in before]
    outputs = outputs if isinstance(outputs, dict) else {"out": outputs}
    close = all(
        np.abs(np.asarray(outputs[k]) - expected[k]).max()
        <= TOLERANCE * np.abs(expected[k]).max()
        for k in expected
    )
    return {
        "ran": "yes",
        "ratio": ratio,
        "added": len(added),
        "added_whole": len([p for p in added if p in whole]),
        "equal": close,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output")
    args = parser.parse_args()
    import warnings

    warnings.filterwarnings("ignore")
    import keras
    import keras_hub
    import numpy as np

    import keras_nlp
    from tests.models.backbone_checks import inputs_for
    from tests.models.tiny_configs import tiny

    start = time.perf_counter()
    devices = keras.distribution.list_devices()[: math.prod(MESH)]
    mesh = keras.distribution.DeviceMesh(MESH, AXES, devices)
    names = sorted(
        name
        for name in dir(keras_hub.models)
        if name.endswith("Backbone")
        and "get_layout_map" in getattr(keras_hub.models, name).__dict__
        and hasattr(keras_nlp.models, name)
    )
    lines = [
        "| class | library | ran | bytes per device / ideal | scales "
        "added | of them whole on every device | int8 outputs equal |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for name in names:
        try:
            ours_cls, config = tiny(name)
        except KeyError:
            continue
        hub_cls = getattr(keras_hub.models, name)
        keras.utils.set_random_seed(0)
        plain = ours_cls(**config)
        inputs = inputs_for(plain, config)
        weights = {v.path: np.asarray(v.numpy()) for v in plain.weights}

        def build(cls, config=config, weights=weights):
            def make():
                model = cls(**config)
                # Same paths on both sides (their order may differ), but
                # keras-hub's auto-named MoE blocks (`..._moe_block_1`):
                # those by order among the values of their shape.
                paths = {v.path for v in model.weights}
                spare = [w for p, w in weights.items() if p not in paths]
                for variable in model.weights:
                    value = weights.get(variable.path)
                    if value is None:
                        value = next(
                            w for w in spare if w.shape == variable.shape
                        )
                        spare = [w for w in spare if w is not value]
                    variable.assign(value)
                return model

            return make

        sides = {
            "keras-hub": run_side(
                build(hub_cls), hub_cls.get_layout_map(mesh), inputs
            ),
            "keras_nlp": run_side(
                build(ours_cls),
                ours_cls.get_layout_map(mesh, config=config),
                inputs,
            ),
        }
        for library, row in sides.items():
            if row["ran"] != "yes":
                lines.append(f"| {name} | {library} | {row['ran']} | | | | |")
            else:
                lines.append(
                    f"| {name} | {library} | yes | {row['ratio']:.2f} | "
                    f"{row['added']} | {row['added_whole']} | "
                    f"{'yes' if row['equal'] else 'NO'} |"
                )
            print(lines[-1], flush=True)
    lines += [
        "",
        f"Mesh {MESH} {AXES}, tiny test configs, measured in "
        f"{time.perf_counter() - start:.0f} s. keras-hub "
        f"{keras_hub.__version__}, Keras {keras.__version__}.",
    ]
    table = "\n".join(lines)
    print(table)
    if args.output:
        with open(args.output, "w") as file:
            file.write(table + "\n")


if __name__ == "__main__":
    main()
