"""Joining a JAX cluster, and where this process stands in it.

The cluster is described by Keras's environment variables, which
`python -m keras_nlp.multihost.launch` sets for local runs; every helper
here is a no-op (or answers for one process) outside a cluster.
"""

import os
import random
import socket
import time

import keras
import numpy as np

ENV_ADDRESS = "KERAS_DISTRIBUTION_JOB_ADDRESSES"
ENV_NUM_PROCESSES = "KERAS_DISTRIBUTION_NUM_PROCESSES"
ENV_PROCESS_ID = "KERAS_DISTRIBUTION_PROCESS_ID"
# Seconds; unset means JAX's defaults (minutes), which suit real clusters.
ENV_INITIALIZATION_TIMEOUT = "KERAS_NLP_INITIALIZATION_TIMEOUT"
ENV_HEARTBEAT_TIMEOUT = "KERAS_NLP_HEARTBEAT_TIMEOUT"
ENV_SHUTDOWN_TIMEOUT = "KERAS_NLP_SHUTDOWN_TIMEOUT"

_DEFAULT_INITIALIZATION_TIMEOUT = 300


class ClusterError(RuntimeError):
    """The processes of a JAX cluster could not be joined."""


def jax_module():
    """The `jax` module when Keras runs on JAX, else None.

    Only JAX has a multi-process runtime; on other backends every helper
    answers for a single process.
    """
    if keras.backend.backend() != "jax":
        return None
    import jax

    return jax


def _env_int(name, value):
    if value is not None:
        return int(value)
    text = os.environ.get(name)
    if text in (None, ""):
        return None
    try:
        return int(text)
    except ValueError:
        raise ClusterError(
            f"The environment variable {name} must be an integer; it is "
            f"{text!r}."
        ) from None


def _wait_for_coordinator(address, timeout):
    """Waits until `address` accepts TCP connections, or raises.

    JAX aborts the whole process with a terse `DEADLINE_EXCEEDED` when the
    coordinator never answers; checking first turns that into an exception
    that names the address and the timeout.
    """
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ClusterError(
            f"The coordinator address must be HOST:PORT; received {address!r}."
        )
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=1.0):
                return
        except OSError as error:
            if time.monotonic() >= deadline:
                raise ClusterError(
                    f"The coordinator at {address} (process 0) did not "
                    f"answer within {timeout} s ({error}). Start process 0 "
                    f"first, check the address in {ENV_ADDRESS}, and check "
                    "that the port is open between the hosts."
                ) from None
            time.sleep(0.2)


def _check_settings(coordinator_address, num_processes, process_id):
    """Raises unless the settings describe one process of a cluster."""
    if not coordinator_address or num_processes is None or process_id is None:
        raise ClusterError(
            "A multi-process run needs the coordinator address, the number "
            f"of processes and this process's id ({ENV_ADDRESS}, "
            f"{ENV_NUM_PROCESSES}, {ENV_PROCESS_ID}); received "
            f"address={coordinator_address!r}, "
            f"num_processes={num_processes!r}, process_id={process_id!r}."
        )
    if not 0 <= process_id < num_processes:
        raise ClusterError(
            f"process_id must be in [0, {num_processes}); received "
            f"{process_id}."
        )


def _timeout_options(
    initialization_timeout, heartbeat_timeout, shutdown_timeout
):
    """`jax.distributed.initialize`'s timeout arguments, from the arguments
    or else their environment variables."""
    initialization_timeout = _env_int(
        ENV_INITIALIZATION_TIMEOUT, initialization_timeout
    )
    if initialization_timeout is None:
        initialization_timeout = _DEFAULT_INITIALIZATION_TIMEOUT
    options = {"initialization_timeout": initialization_timeout}
    heartbeat_timeout = _env_int(ENV_HEARTBEAT_TIMEOUT, heartbeat_timeout)
    if heartbeat_timeout is not None:
        options["heartbeat_timeout_seconds"] = heartbeat_timeout
    shutdown_timeout = _env_int(ENV_SHUTDOWN_TIMEOUT, shutdown_timeout)
    if shutdown_timeout is not None:
        options["shutdown_timeout_seconds"] = shutdown_timeout
    return options


def initialize(
    coordinator_address=None,
    num_processes=None,
    process_id=None,
    *,
    initialization_timeout=None,
    heartbeat_timeout=None,
    shutdown_timeout=None,
):
    """Joins this process to a JAX cluster, or does nothing in one process.

    Call it first, before anything touches a device, in every process with
    the same address and count. Arguments left `None` come from Keras's
    variables `KERAS_DISTRIBUTION_JOB_ADDRESSES` (the coordinator, process
    0's `host:port`; a comma-separated list is read as Keras reads it,
    first entry), `KERAS_DISTRIBUTION_NUM_PROCESSES` and
    `KERAS_DISTRIBUTION_PROCESS_ID`. Without a coordinator address and with
    at most one process, this is a no-op, so single-process runs need no
    change.

    Unlike `keras.distribution.initialize` this bounds the failure modes:
    a coordinator that never answers raises `ClusterError` after
    `initialization_timeout` seconds, and a process that dies later makes
    JAX terminate the others once its heartbeats have been missing for
    `heartbeat_timeout` seconds. Every process gets the same Keras random
    seed, drawn by process 0, so variables initialize identically
    everywhere (call `set_random_seed` afterwards to choose it). CPU
    devices use JAX's gloo collectives.

    Args:
        coordinator_address: str, `host:port` of process 0.
        num_processes: int, the number of processes of the cluster.
        process_id: int, this process's rank in `[0, num_processes)`.
        initialization_timeout: int seconds to wait for every process to
            join (`KERAS_NLP_INITIALIZATION_TIMEOUT`; default 300).
        heartbeat_timeout: int seconds of silence after which a process
            is declared dead (`KERAS_NLP_HEARTBEAT_TIMEOUT`; JAX's default
            otherwise).
        shutdown_timeout: int seconds to wait for the others at exit
            (`KERAS_NLP_SHUTDOWN_TIMEOUT`; JAX's default otherwise).

    Returns:
        bool, whether this process is part of a multi-process cluster.

    Raises:
        ClusterError: missing or inconsistent settings, or a coordinator
            that did not answer in time.

    Example:

    ```python
    from keras_nlp import multihost

    # Without cluster settings in the environment: a single process.
    multihost.initialize()
    print(multihost.process_index(), multihost.process_count())  # 0 1
    ```
    """
    if coordinator_address is None:
        coordinator_address = os.environ.get(ENV_ADDRESS) or None
    if coordinator_address:
        coordinator_address = coordinator_address.split(",")[0].strip()
    num_processes = _env_int(ENV_NUM_PROCESSES, num_processes)
    process_id = _env_int(ENV_PROCESS_ID, process_id)
    if not coordinator_address and (num_processes or 1) <= 1:
        return False
    jax = jax_module()
    if jax is None:
        raise ClusterError(
            "Multi-process runs need the JAX backend (KERAS_BACKEND=jax); "
            f"the backend is {keras.backend.backend()}."
        )
    _check_settings(coordinator_address, num_processes, process_id)
    if jax.distributed.is_initialized():
        return jax.process_count() > 1
    options = _timeout_options(
        initialization_timeout, heartbeat_timeout, shutdown_timeout
    )
    # Gloo gives CPU devices cross-process collectives (no-op elsewhere).
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if process_id != 0:
        _wait_for_coordinator(
            coordinator_address, options["initialization_timeout"]
        )
    jax.distributed.initialize(
        coordinator_address=coordinator_address,
        num_processes=num_processes,
        process_id=process_id,
        **options,
    )
    _agree_on_seed()
    return jax.process_count() > 1


def _agree_on_seed():
    # Keras draws a default seed per process; initializers must agree, so
    # every process takes process 0's draw (as keras.distribution.initialize
    # does).
    from jax.experimental import multihost_utils

    seed = np.asarray(np.random.SeedSequence().entropy % (2**31), np.int64)
    seed = multihost_utils.broadcast_one_to_all(seed)
    set_random_seed(int(seed))


def set_random_seed(seed):
    """Seeds Keras, Python and NumPy, as `keras.utils.set_random_seed` does.

    Keras's function also seeds TensorFlow, which imports TensorFlow when it
    is installed: its start-up messages would appear in a JAX program, in
    every process of a cluster. On JAX this sets the same global seed
    without it; on other backends it is Keras's function.

    Args:
        seed: int, the seed of every process (equal seeds give equal
            initial weights).

    Example:

    ```python
    import keras

    from keras_nlp import multihost

    multihost.set_random_seed(0)
    first = keras.random.uniform((2,))
    multihost.set_random_seed(0)
    assert keras.ops.all(keras.random.uniform((2,)) == first)
    ```
    """
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValueError(
            f"The seed must be an integer. Received: seed={seed!r}."
        )
    if keras.backend.backend() != "jax":
        keras.utils.set_random_seed(seed)
        return
    # Keras keeps its global seed, and the generator drawn from it, in
    # its global state; it has no public setter apart from the function
    # this replaces.
    from keras.src.backend.common import global_state
    from keras.src.random import seed_generator
    from keras.src.utils import rng_utils

    global_state.set_global_attribute(rng_utils.GLOBAL_RANDOM_SEED, seed)
    global_state.set_global_attribute(
        seed_generator.GLOBAL_SEED_GENERATOR, None
    )
    random.seed(seed)
    np.random.seed(seed)


def process_index():
    """This process's rank in the cluster (0 in a single process)."""
    jax = jax_module()
    return 0 if jax is None else jax.process_index()


def process_count():
    """The number of processes of the cluster (1 in a single process)."""
    jax = jax_module()
    return 1 if jax is None else jax.process_count()


def is_main_process():
    """Whether this is process 0, the one that prints and writes files."""
    return process_index() == 0


def barrier(name):
    """Waits until every process has reached `barrier(name)`.

    A no-op in a single process.

    Args:
        name: str, the same in every process, distinct per barrier.
    """
    if process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)
