"""A backbone on a global mesh over 2 processes x 4 devices, on localhost.

One launched cluster run (`workers/gemma_worker.py checks`)
builds a Gemma 2B-shaped tiny backbone on (2, 4) and (1, 8), runs a
forward pass and a training step, checks the layouts and saves and reloads
a preset; each process writes what it gathered, and the tests compare that
with the same code run here in one process on 8 devices. Failure tests
check that a dead process or an unreachable coordinator ends the run with
a clear error instead of a hang. Everything listens on 127.0.0.1 only.
"""

import fcntl
import json
import os
import sys

import keras
import numpy as np
import pytest

from keras_nlp import multihost
from keras_nlp.models import Backbone
from keras_nlp.multihost import launch
from tests.multihost.workers import gemma_worker

pytestmark = pytest.mark.multi_device

WORKER = os.path.join(os.path.dirname(__file__), "workers", "gemma_worker.py")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
PROCESSES, DEVICES_PER_PROCESS = 2, 4
MESH_NAMES = ["2x4", "1x8"]
ATOL = 1e-5
# Bounds for the failure tests: JAX is told to give up after a few
# seconds, so anything near these bounds is a hang.
HEARTBEAT_TIMEOUT = 3
INITIALIZATION_TIMEOUT = 3
FAILURE_BOUND = 45
# What the survivor's output says, by where it waited.
DEAD_PEER_ERRORS = {
    "barrier": ("Connection reset by peer", "heartbeat", "another task died"),
    "sleep": ("heartbeat", "another task died"),
}


def run_worker(*args, **kwargs):
    kwargs.setdefault("timeout", 240)
    return launch.launch(
        [sys.executable, WORKER, *args],
        processes=PROCESSES,
        devices_per_process=DEVICES_PER_PROCESS,
        cwd=REPO,
        **kwargs,
    )


def shared_cluster_run(tmp_path_factory):
    """Runs the checks cluster once per test session, even under xdist.

    Workers of one `pytest -n` run share the parent of their temporary
    directories; the first to get the lock runs the cluster, the others
    read its results (or its failure report).
    """
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    out_dir = root / "multihost_cluster"
    with open(root / "multihost_cluster.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out_dir / "report.txt").exists():
            out_dir.mkdir(exist_ok=True)
            result = run_worker("checks", str(out_dir))
            report = ("ok\n" if result.ok else "failed\n") + result.report()
            (out_dir / "report.txt").write_text(report)
    report = (out_dir / "report.txt").read_text()
    assert report.startswith("ok"), report
    return out_dir


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The gathered results of every process of one cluster run."""
    out_dir = shared_cluster_run(tmp_path_factory)
    processes = []
    for index in range(PROCESSES):
        with open(out_dir / f"process_{index}.json") as file:
            info = json.load(file)
        arrays = dict(np.load(out_dir / f"process_{index}.npz"))
        processes.append((info, arrays))
    return out_dir, processes


@pytest.fixture(scope="module")
def reference():
    """The same runs in this single process (8 devices)."""
    results = {}
    for name in MESH_NAMES:
        mesh_shape = tuple(int(size) for size in name.split("x"))
        arrays, info, backbone = gemma_worker.run_mesh(mesh_shape)
        if name == "2x4":
            arrays.update(gemma_worker.fit_step(mesh_shape))
            # The cluster generates with these weights, saved and reloaded.
            arrays["generated"] = gemma_worker.generate_tokens(backbone)
        results[name] = (arrays, info)
    return results


def assert_close(actual, expected, what):
    np.testing.assert_allclose(
        actual, expected, atol=ATOL, rtol=ATOL, err_msg=what
    )


@pytest.mark.parametrize("mesh", MESH_NAMES)
def test_gathered_output_and_loss_equal_single_process(
    cluster, reference, mesh
):
    expected, _ = reference[mesh]
    for index, (info, arrays) in enumerate(cluster[1]):
        assert info["process_count"] == PROCESSES
        for key in ("output", "loss"):
            assert_close(
                arrays[f"{mesh}/{key}"], expected[key], f"process {index}"
            )


@pytest.mark.parametrize("mesh", MESH_NAMES)
def test_gradients_and_updated_weights_equal_single_process(
    cluster, reference, mesh
):
    expected, _ = reference[mesh]
    keys = [k for k in expected if k.startswith(("grad:", "updated:"))]
    grads = [k for k in keys if k.startswith("grad:")]
    # Every trainable variable has a gradient, and it is not all zeros.
    assert len(grads) == len(planned_paths()), "missing gradients"
    assert all(np.any(expected[k] != 0) for k in grads)
    for index, (_, arrays) in enumerate(cluster[1]):
        for key in keys:
            assert_close(
                arrays[f"{mesh}/{key}"], expected[key], f"{key} process {index}"
            )


def test_fit_step_on_global_data_equals_single_process(cluster, reference):
    expected, _ = reference["2x4"]
    keys = [k for k in expected if k.startswith(("fit:", "fit_loss"))]
    assert len(keys) == len(planned_paths()) + 1
    for index, (_, arrays) in enumerate(cluster[1]):
        for key in keys:
            assert_close(
                arrays[f"2x4/{key}"], expected[key], f"{key} process {index}"
            )


def planned_paths():
    plan = gemma_worker.GemmaBackbone.plan_layout(
        {"batch": 1, "model": 8}, config=gemma_worker.CONFIG
    )
    return [w.path for w in plan.weights]


@pytest.mark.parametrize("mesh", MESH_NAMES)
def test_every_variable_is_sharded_as_planned_in_every_process(
    cluster, reference, mesh
):
    _, expected = reference[mesh]
    batch = gemma_worker.BATCH
    rows = set()
    for info, _ in cluster[1]:
        checks = info[mesh]
        assert checks["problems"] == []
        assert checks["plan_matches_offline"]
        # Each process holds exactly its devices' share of the plan, and no
        # variable lives on one process only.
        assert checks["local_bytes"] == checks["planned_local_bytes"]
        assert checks["local_bytes"] * PROCESSES == expected["local_bytes"]
        assert checks["fully_addressable"] == []
        rows.add(tuple(checks["rows"]))
    if mesh == "2x4":
        # The batch axis spans the processes: each feeds half the batch.
        assert rows == {(0, batch // 2), (batch // 2, batch)}
    else:
        assert rows == {(0, batch)}


def test_preset_saved_on_2x4_loads_on_1x8_in_every_process(cluster):
    out_dir, processes = cluster
    preset_dir = out_dir / "preset"
    # Only process 0 wrote, and only the preset's files.
    assert sorted(os.listdir(preset_dir)) == [
        "config.json",
        "metadata.json",
        "model.weights.h5",
    ]
    for index, (info, arrays) in enumerate(processes):
        assert info["reload_problems"] == []
        assert info["reload_local_bytes"] == info["1x8"]["local_bytes"]
        saved = {k[6:]: v for k, v in arrays.items() if k.startswith("saved:")}
        loaded = {
            k[7:]: v for k, v in arrays.items() if k.startswith("loaded:")
        }
        assert sorted(saved) == sorted(loaded)
        for path, value in saved.items():
            np.testing.assert_array_equal(
                loaded[path], value, err_msg=f"{path} process {index}"
            )
            # The saved model is the (2, 4) one after its training step.
            np.testing.assert_array_equal(value, arrays[f"2x4/updated:{path}"])
    # A single process reads the cluster's preset, unsharded and sharded.
    saved = {k[6:]: v for k, v in processes[0][1].items() if "saved:" in k}
    unsharded = Backbone.from_preset(str(preset_dir))
    with gemma_worker.distribution_for((2, 4)).scope():
        sharded = Backbone.from_preset(str(preset_dir))
    for backbone in (unsharded, sharded):
        for variable in backbone.weights:
            np.testing.assert_array_equal(
                keras.ops.convert_to_numpy(variable.value),
                saved[variable.path],
            )


@pytest.mark.parametrize("wait_in", ["barrier", "sleep"])
def test_dead_process_stops_the_others_with_an_error(wait_in):
    result = run_worker(
        "die",
        "3",
        wait_in,
        heartbeat_timeout=HEARTBEAT_TIMEOUT,
        # Let JAX, not the launcher, stop the survivor.
        grace=FAILURE_BOUND,
        timeout=FAILURE_BOUND + 30,
    )
    survivor, dead = result.processes
    assert dead.returncode == 3, result.report()
    assert survivor.returncode != 0, result.report()
    assert not survivor.killed, result.report()
    assert f"{wait_in} returned" not in survivor.output
    # A collective fails at once (the peer's socket closes); otherwise
    # JAX terminates the survivor when the heartbeats stop.
    assert any(
        marker in survivor.output for marker in DEAD_PEER_ERRORS[wait_in]
    ), result.report()
    assert result.elapsed < FAILURE_BOUND, result.report()


def test_unreachable_coordinator_raises_a_clear_error():
    # Only process 1 starts: nothing listens on the coordinator's port.
    result = run_worker(
        "join",
        process_ids=[1],
        initialization_timeout=INITIALIZATION_TIMEOUT,
        timeout=FAILURE_BOUND + 30,
    )
    (worker,) = result.processes
    assert worker.returncode == 1, result.report()
    assert not worker.killed
    assert "ClusterError" in worker.output, result.report()
    assert (
        f"{result.address} (process 0) did not answer within "
        f"{INITIALIZATION_TIMEOUT} s" in worker.output
    ), result.report()
    assert result.elapsed < FAILURE_BOUND, result.report()


def test_launcher_stops_the_others_when_one_fails():
    # JAX would wait minutes for the heartbeat; the launcher does not.
    result = run_worker(
        "die", "4", "sleep", grace=0, timeout=FAILURE_BOUND + 30
    )
    survivor, dead = result.processes
    assert dead.returncode == 4
    assert survivor.killed and survivor.returncode != 0, result.report()
    assert not result.ok
    assert "stopped by the launcher" in result.report()
    assert result.elapsed < FAILURE_BOUND, result.report()


def test_process_env_sets_cluster_and_fake_devices_only_on_loopback():
    env = launch.process_env(
        1,
        2,
        "127.0.0.1:1234",
        4,
        base={"XLA_FLAGS": "--xla_force_host_platform_device_count=8 --foo"},
    )
    assert env["XLA_FLAGS"].split() == [
        "--foo",
        "--xla_force_host_platform_device_count=4",
    ]
    assert env["KERAS_DISTRIBUTION_JOB_ADDRESSES"] == "127.0.0.1:1234"
    assert env["KERAS_DISTRIBUTION_NUM_PROCESSES"] == "2"
    assert env["KERAS_DISTRIBUTION_PROCESS_ID"] == "1"
    assert env["JAX_PLATFORMS"] == "cpu"
    assert launch.free_port() > 0


# === The helpers in this single process (no cluster) ===


def test_helpers_are_no_ops_in_one_process(monkeypatch):
    for name in (
        multihost.ENV_ADDRESS,
        multihost.ENV_NUM_PROCESSES,
        multihost.ENV_PROCESS_ID,
    ):
        monkeypatch.delenv(name, raising=False)
    assert multihost.initialize() is False
    assert (multihost.process_index(), multihost.process_count()) == (0, 1)
    assert multihost.is_main_process()
    multihost.barrier("alone")
    distribution = gemma_worker.distribution_for((2, 4))
    assert multihost.process_batch_slice(8, distribution) == slice(0, 8)
    batch = {"token_ids": np.arange(16).reshape(8, 2)}
    assert multihost.make_global_batch(batch, distribution) is batch


def test_random_seed_is_keras_seed_without_tensorflow(monkeypatch):
    from keras.src.utils import rng_utils

    def draws():
        initializer = keras.initializers.GlorotUniform()
        return [
            keras.ops.convert_to_numpy(initializer((3, 4))),
            np.random.rand(2),
            keras.ops.convert_to_numpy(keras.random.normal((2,))),
        ]

    keras.utils.set_random_seed(7)
    expected = draws()

    class TensorFlowConsulted:
        @property
        def available(self):
            raise AssertionError("the seed looked for TensorFlow")

    monkeypatch.setattr(rng_utils, "tf", TensorFlowConsulted())
    multihost.set_random_seed(7)
    for actual, wanted in zip(draws(), expected, strict=True):
        np.testing.assert_array_equal(actual, wanted)
    with pytest.raises(ValueError, match=r"integer\. Received: seed=1\.5"):
        multihost.set_random_seed(1.5)


def test_gather_reads_a_sharded_value_whole():
    mesh = multihost.global_device_mesh((2, 4))
    layout = keras.distribution.TensorLayout(("batch", "model"), mesh)
    value = np.arange(32, dtype="float32").reshape(4, 8)
    sharded = keras.distribution.distribute_tensor(value, layout)
    assert len(sharded.sharding.device_set) == 8
    gathered = multihost.gather({"x": sharded, "v": keras.Variable(value)})
    np.testing.assert_array_equal(gathered["x"], value)
    np.testing.assert_array_equal(gathered["v"], value)


def test_global_device_mesh_needs_every_device():
    with pytest.raises(ValueError, match="needs 4 devices; the cluster has 8"):
        multihost.global_device_mesh((2, 2))


@pytest.mark.parametrize(
    "env, message",
    [
        ({multihost.ENV_NUM_PROCESSES: "2"}, "needs the coordinator address"),
        (
            {
                multihost.ENV_ADDRESS: "127.0.0.1:1",
                multihost.ENV_NUM_PROCESSES: "2",
                multihost.ENV_PROCESS_ID: "2",
            },
            r"process_id must be in \[0, 2\)",
        ),
        ({multihost.ENV_NUM_PROCESSES: "two"}, "must be an integer"),
    ],
)
def test_initialize_rejects_incomplete_settings(monkeypatch, env, message):
    for name in (
        multihost.ENV_ADDRESS,
        multihost.ENV_NUM_PROCESSES,
        multihost.ENV_PROCESS_ID,
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(multihost.ClusterError, match=message):
        multihost.initialize()


def test_every_process_generates_what_one_process_does(cluster, reference):
    """Generation on the (1, 8) cluster mesh, prompts split over processes'
    devices and the KV cache in shards, reads the same tokens everywhere."""
    _, processes = cluster
    expected = reference["2x4"][0]["generated"]
    # Four prompts of 1 to 4 tokens, twice, each continued by 3 tokens.
    assert expected.shape == (8, 7)
    for index, (_, arrays) in enumerate(processes):
        np.testing.assert_array_equal(
            arrays["generated"], expected, err_msg=f"process {index}"
        )
