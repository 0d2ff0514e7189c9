"""One process of the multi-host tests (also importable as a module).

Run by `keras_nlp.multihost.launch` as every process of a local cluster:

    python gemma_worker.py checks OUT_DIR   forward, gradients, a training
        step and layout checks on (2, 4) and (1, 8), then a preset saved on
        (2, 4) and loaded on (1, 8), which generates; every process writes
        OUT_DIR/process_<id>.npz with the gathered values.
    python gemma_worker.py die EXIT_CODE barrier|sleep   process 1 exits
        right after joining; the others wait in a barrier (a collective) or
        in a sleep (no collective) until JAX notices.
    python gemma_worker.py join             joins the cluster and exits.

The test process imports `run_mesh` to compute the single-process
reference with the same code.
"""

import json
import os
import sys
import time
import zlib

import keras
import numpy as np

from keras_nlp import multihost
from keras_nlp.models import Backbone
from keras_nlp.models import GemmaBackbone
from keras_nlp.models import GemmaCausalLM

# Gemma 2B's head layout (8 query heads, 1 key/value head), tiny.
CONFIG = dict(
    vocabulary_size=128,
    num_layers=2,
    num_query_heads=8,
    num_key_value_heads=1,
    hidden_dim=64,
    intermediate_dim=128,
    head_dim=16,
)
MESHES = [(2, 4), (1, 8)]
BATCH, LENGTH = 8, 12
LEARNING_RATE = 0.1


def global_inputs():
    """The global batch; every process derives the same one."""
    rng = np.random.default_rng(0)
    token_ids = rng.integers(1, CONFIG["vocabulary_size"], (BATCH, LENGTH))
    padding_mask = np.ones((BATCH, LENGTH), "int32")
    padding_mask[0, :3] = 0
    token_ids[0, :3] = 0
    return {
        "token_ids": token_ids.astype("int32"),
        "padding_mask": padding_mask,
    }


def set_weights(backbone):
    """Deterministic weights, the same in every process and every run."""
    for variable in backbone.weights:
        rng = np.random.default_rng(zlib.crc32(variable.path.encode()))
        value = rng.normal(0.0, 0.1, variable.shape)
        variable.assign(value.astype(variable.dtype))


def distribution_for(mesh_shape):
    mesh = multihost.global_device_mesh(mesh_shape)
    return keras.distribution.ModelParallel(
        layout_map=Backbone.get_layout_map(mesh), batch_dim_name="batch"
    )


def sharding_problems(backbone):
    """Every variable whose actual sharding or local shard differs."""
    plan = backbone.layout_plan
    problems = []
    for variable in backbone.weights:
        weight = plan.weight(variable.path)
        spec = tuple(variable.value.sharding.spec)
        spec += (None,) * (len(variable.shape) - len(spec))
        if spec != tuple(weight.spec):
            problems.append(f"{variable.path}: {spec} != {weight.spec}")
        for shard in variable.value.addressable_shards:
            if tuple(shard.data.shape) != tuple(weight.shard_shape):
                problems.append(
                    f"{variable.path}: shard {shard.data.shape} != "
                    f"{weight.shard_shape}"
                )
    return problems


def local_bytes(backbone):
    """Bytes of weights this process holds, over all its devices."""
    return sum(
        shard.data.nbytes
        for variable in backbone.weights
        for shard in variable.value.addressable_shards
    )


def train_step(backbone, inputs):
    """Loss, gradients and outputs of one step (one compiled program: an
    eager forward pass compiles each op in every process), then an SGD
    update in place."""
    import jax

    trainable = [v.value for v in backbone.trainable_variables]
    non_trainable = [v.value for v in backbone.non_trainable_variables]

    # Global arrays are arguments: a jitted function may not close over
    # arrays that span other processes' devices.
    @jax.jit
    def loss_and_grads(trainable, non_trainable, inputs):
        mask = keras.ops.cast(inputs["padding_mask"], "float32")[..., None]

        def loss_fn(trainable):
            outputs, _ = backbone.stateless_call(
                trainable, non_trainable, inputs
            )
            loss = keras.ops.sum(keras.ops.square(outputs) * mask) / (
                keras.ops.sum(mask) * outputs.shape[-1]
            )
            return loss, outputs

        return jax.value_and_grad(loss_fn, has_aux=True)(trainable)

    (loss, outputs), grads = loss_and_grads(trainable, non_trainable, inputs)
    optimizer = keras.optimizers.SGD(LEARNING_RATE)
    optimizer.apply(grads, backbone.trainable_variables)
    paths = [v.path for v in backbone.trainable_variables]
    return loss, dict(zip(paths, grads, strict=True)), outputs


def run_mesh(mesh_shape):
    """Builds, checks and trains the tiny Gemma on one global mesh.

    Returns:
        `(arrays, info)`: gathered NumPy arrays keyed `output`, `loss`,
        `grad:<path>`, `updated:<path>`; and a JSON-able dict of checks.
    """
    distribution = distribution_for(mesh_shape)
    with distribution.scope():
        # Building verifies every variable against the plan (raises if not).
        backbone = GemmaBackbone(**CONFIG)
        set_weights(backbone)
        plan = backbone.layout_plan
        rows = multihost.process_batch_slice(BATCH, distribution)
        local = {k: v[rows] for k, v in global_inputs().items()}
        inputs = multihost.make_global_batch(local, distribution)
        loss, grads, output = train_step(backbone, inputs)
    arrays = {"output": multihost.gather(output)}
    arrays["loss"] = multihost.gather(loss)
    for path, grad in grads.items():
        arrays[f"grad:{path}"] = multihost.gather(grad)
    for variable in backbone.weights:
        arrays[f"updated:{variable.path}"] = multihost.gather(variable)
    offline = GemmaBackbone.plan_layout(
        {"batch": mesh_shape[0], "model": mesh_shape[1]}, config=CONFIG
    )
    info = {
        "rows": [rows.start, rows.stop],
        "problems": sharding_problems(backbone),
        "local_bytes": local_bytes(backbone),
        "planned_local_bytes": sum(w.shard_bytes for w in plan.weights)
        * len(keras.distribution.list_devices())
        // multihost.process_count(),
        "plan_matches_offline": [(w.path, w.spec) for w in plan.weights]
        == [(w.path, w.spec) for w in offline.weights],
        "fully_addressable": sorted(
            v.path for v in backbone.weights if v.value.is_fully_addressable
        ),
    }
    return arrays, info, backbone


def fit_step(mesh_shape):
    """One `Model.fit` step with the global batch given to every process.

    Keras's `fit` shards the data it is given across processes itself, so
    each process passes the whole batch (per-process rows would silently
    train on a subset).

    Returns:
        gathered `loss` and updated weights (`fit:<path>`).
    """
    distribution = distribution_for(mesh_shape)
    with distribution.scope():
        backbone = GemmaBackbone(**CONFIG)
        set_weights(backbone)
        model = keras.Model(backbone.input, backbone.output)
        model.compile(optimizer=keras.optimizers.SGD(LEARNING_RATE), loss="mse")
    inputs = global_inputs()
    rng = np.random.default_rng(1)
    target = rng.normal(size=(BATCH, LENGTH, CONFIG["hidden_dim"]))
    history = model.fit(
        inputs,
        target.astype("float32"),
        batch_size=BATCH,
        epochs=1,
        shuffle=False,
        verbose=0,
    )
    arrays = {"fit_loss": np.asarray(history.history["loss"][0])}
    for variable in backbone.weights:
        arrays[f"fit:{variable.path}"] = multihost.gather(variable)
    return arrays


def save_and_reload(backbone, preset_dir):
    """Saves `backbone` (built on one mesh), loads it on (1, 8).

    Returns:
        gathered weights of the loaded backbone, by path.
    """
    backbone.save_to_preset(preset_dir)
    with distribution_for((1, 8)).scope():
        loaded = Backbone.from_preset(preset_dir)
    return {v.path: multihost.gather(v) for v in loaded.weights}, loaded


def generate_tokens(backbone):
    """Greedy continuations of left-padded prompts of mixed lengths."""
    prompts = [[5, 6, 7], [8, 9], [10, 11, 12, 13], [3]] * 2
    causal_lm = GemmaCausalLM(backbone)
    return causal_lm.generate(prompts, max_new_tokens=3)["token_ids"]


def checks(out_dir):
    info = {"process_count": multihost.process_count()}
    arrays = {}
    built = {}
    for mesh_shape in MESHES:
        name = "x".join(map(str, mesh_shape))
        mesh_arrays, info[name], built[name] = run_mesh(mesh_shape)
        arrays.update({f"{name}/{k}": v for k, v in mesh_arrays.items()})
    arrays.update({f"2x4/{k}": v for k, v in fit_step((2, 4)).items()})
    preset_dir = os.path.join(out_dir, "preset")
    saved = {v.path: multihost.gather(v) for v in built["2x4"].weights}
    loaded, backbone = save_and_reload(built["2x4"], preset_dir)
    info["reload_problems"] = sharding_problems(backbone)
    with distribution_for((1, 8)).scope():
        arrays["generated"] = generate_tokens(backbone)
    info["reload_local_bytes"] = local_bytes(backbone)
    arrays.update({f"saved:{k}": v for k, v in saved.items()})
    arrays.update({f"loaded:{k}": v for k, v in loaded.items()})
    index = multihost.process_index()
    np.savez(os.path.join(out_dir, f"process_{index}.npz"), **arrays)
    with open(os.path.join(out_dir, f"process_{index}.json"), "w") as file:
        json.dump(info, file, indent=1)
    print(f"process {index}: checks written", flush=True)


def die(exit_code, wait_in):
    multihost.barrier("joined")
    if multihost.process_index() == 1:
        print("process 1: exiting early", flush=True)
        os._exit(exit_code)
    start = time.monotonic()
    if wait_in == "barrier":
        # A collective with a dead peer fails, or JAX terminates us.
        multihost.barrier("never reached")
    else:
        # No collective: only the missing heartbeats can stop this.
        while time.monotonic() - start < 600:
            time.sleep(0.1)
    print(f"{wait_in} returned after {time.monotonic() - start:.1f} s")
    sys.exit(0)


if __name__ == "__main__":
    multihost.initialize()
    mode = sys.argv[1]
    if mode == "checks":
        checks(sys.argv[2])
    elif mode == "die":
        die(int(sys.argv[2]), sys.argv[3])
    elif mode == "join":
        print(f"process {multihost.process_index()} joined", flush=True)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
