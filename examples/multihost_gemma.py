"""A tiny Gemma on a global mesh: the same script for one process or many.

Run:
    # One process, whatever devices it has:
    python examples/multihost_gemma.py
    # A 2-process cluster on this machine, 4 fake CPU devices each:
    python -m keras_nlp.multihost.launch --processes 2 \\
        --devices-per-process 4 examples/multihost_gemma.py
    # Real hosts: the same command on each, with its own --process-id
    # (or the KERAS_DISTRIBUTION_* variables) and a shared --preset-dir:
    python examples/multihost_gemma.py --coordinator 10.0.0.1:1234 \\
        --num-processes 2 --process-id 0 --preset-dir /shared/gemma

It joins the cluster, builds a Gemma 2B-shaped backbone (8 query heads,
one key/value head) on a `batch x model` mesh over every process's
devices, prints the layout plan on process 0, feeds each process its rows
of the batch for a forward pass, runs one `fit` step (which takes the
global batch), then saves a preset (process 0 writes it) and loads it
back on the same mesh. With the same seed every mesh prints the same
numbers.
"""

import os

# Multi-process runs are JAX's; set before Keras is imported.
os.environ.setdefault("KERAS_BACKEND", "jax")

import argparse  # noqa: E402
import tempfile  # noqa: E402

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_nlp import multihost  # noqa: E402
from keras_nlp.models import Backbone  # noqa: E402
from keras_nlp.models import GemmaBackbone  # noqa: E402

TINY_GEMMA_2B = dict(
    load_weights=False,
    num_layers=2,
    vocabulary_size=128,
    hidden_dim=64,
    intermediate_dim=128,
    head_dim=16,
)
BATCH, LENGTH = 8, 16


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--coordinator", help="host:port of process 0")
    parser.add_argument("--num-processes", type=int)
    parser.add_argument("--process-id", type=int)
    parser.add_argument(
        "--mesh",
        help="BATCHxMODEL; default: one batch row per process, the model "
        "axis over each process's devices",
    )
    parser.add_argument(
        "--preset-dir", help="where to save (shared by every process)"
    )
    return parser.parse_args()


def say(*args):
    if multihost.is_main_process():
        print(*args, flush=True)


def main():
    args = parse_args()
    # First, before anything touches a device. No-op in one process.
    multihost.initialize(args.coordinator, args.num_processes, args.process_id)
    # The same seed everywhere: every mesh starts from the same weights.
    multihost.set_random_seed(0)
    devices = len(keras.distribution.list_devices())
    processes = multihost.process_count()
    if args.mesh:
        mesh_shape = tuple(int(s) for s in args.mesh.lower().split("x"))
    else:
        mesh_shape = (processes, devices // processes)
    say(f"{processes} process(es), {devices} devices, mesh {mesh_shape}")

    mesh = multihost.global_device_mesh(mesh_shape)
    distribution = keras.distribution.ModelParallel(
        layout_map=GemmaBackbone.get_layout_map(mesh), batch_dim_name="batch"
    )
    with distribution.scope():
        # Every variable is created in its shards and checked against the
        # plan before the constructor returns.
        backbone = GemmaBackbone.from_preset("gemma_2b_en", **TINY_GEMMA_2B)
    say(backbone.layout_plan.summary())

    # Every process derives the same global batch here; a real input
    # pipeline would read only this process's rows.
    rng = np.random.default_rng(0)
    token_ids = rng.integers(1, 128, (BATCH, LENGTH)).astype("int32")
    rows = multihost.process_batch_slice(BATCH, distribution)
    local = {
        "token_ids": token_ids[rows],
        "padding_mask": np.ones_like(token_ids[rows]),
    }
    with distribution.scope():
        batch = multihost.make_global_batch(local, distribution)
        hidden = multihost.gather(backbone(batch))
    say(f"forward: output {hidden.shape}, mean |x| {np.abs(hidden).mean():.4f}")

    # Unlike a custom step, fit takes the *global* batch in every process
    # and shards it across processes itself. The optimizer goes on a
    # wrapper, so the backbone's preset stays a plain backbone.
    target = rng.normal(size=(BATCH, LENGTH, 64)).astype("float32")
    inputs = {"token_ids": token_ids, "padding_mask": np.ones_like(token_ids)}
    model = keras.Model(backbone.input, backbone.output)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    history = model.fit(
        inputs, target, batch_size=BATCH, epochs=1, shuffle=False, verbose=0
    )
    say(f"training step: loss {history.history['loss'][0]:.5f}")

    preset_dir = args.preset_dir
    if preset_dir is None:
        # Every process must name the same directory.
        preset_dir = os.path.join(tempfile.gettempdir(), "multihost_gemma")
    backbone.save_to_preset(preset_dir)
    with distribution.scope():
        reloaded = Backbone.from_preset(preset_dir)
        again = multihost.gather(reloaded(batch))
    expected = multihost.gather(backbone(batch))
    say(
        f"preset {preset_dir}: reloaded, max difference "
        f"{np.abs(again - expected).max():.2e}"
    )


if __name__ == "__main__":
    main()
