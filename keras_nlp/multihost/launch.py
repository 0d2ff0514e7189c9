"""Starts a JAX cluster of N processes on this machine, for tests and demos.

```bash
python -m keras_nlp.multihost.launch --processes 2 \\
    --devices-per-process 4 examples/multihost_gemma.py
```

Each process runs the script with its own fake CPU devices, joined over
the loopback interface (`127.0.0.1`, a free port) through the variables
`keras_nlp.multihost.initialize` reads. When one process
fails the others get a grace period to exit on their own, then are
killed; the whole run has a timeout. Exit codes and the tail of each
process's output are printed (as a Python function, returned).
"""

import argparse
import dataclasses
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

from keras_nlp import multihost

LOOPBACK = "127.0.0.1"
_DEVICE_FLAG = "--xla_force_host_platform_device_count"


@dataclasses.dataclass
class ProcessResult:
    """How one process of a launched cluster ended.

    Attributes:
        process_id: int, its rank.
        returncode: int, its exit code (negative: killed by that signal).
        output: str, its stdout and stderr, interleaved.
        killed: bool, whether the launcher killed it (after another
            process failed, or at the timeout).
    """

    process_id: int
    returncode: int
    output: str
    killed: bool = False

    def tail(self, lines=20):
        """The last `lines` lines of the output."""
        return "\n".join(self.output.rstrip().splitlines()[-lines:])

    def describe(self):
        """One line: the rank and how it ended."""
        code = self.returncode
        if code < 0:
            try:
                how = f"killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"killed by signal {-code}"
        else:
            how = f"exit code {code}"
        if self.killed:
            how += " (stopped by the launcher)"
        return f"process {self.process_id}: {how}"


@dataclasses.dataclass
class LaunchResult:
    """The outcome of `launch`.

    Attributes:
        processes: list of `ProcessResult`, by rank.
        timed_out: bool, whether the run hit its timeout.
        elapsed: float, seconds from start to the last exit.
        address: str, the coordinator's `host:port`.
    """

    processes: list
    timed_out: bool
    elapsed: float
    address: str

    @property
    def ok(self):
        """Whether every process exited with code 0."""
        return not self.timed_out and all(
            p.returncode == 0 for p in self.processes
        )

    def report(self, tail_lines=20):
        """A readable summary: each process's end and its output's tail."""
        lines = [
            f"{len(self.processes)} process(es) at {self.address}, "
            f"{self.elapsed:.1f} s" + (", timed out" if self.timed_out else "")
        ]
        for process in self.processes:
            lines.append(f"--- {process.describe()}")
            if tail_lines:
                lines.append(process.tail(tail_lines))
        return "\n".join(lines)


def free_port(host=LOOPBACK):
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def process_env(
    process_id,
    processes,
    address,
    devices_per_process,
    base=None,
    extra=None,
):
    """The environment of one process of a local cluster.

    Returns:
        A dict: `base` (default `os.environ`) with the cluster variables,
        JAX on CPU with `devices_per_process` fake devices, Keras on JAX.
    """
    env = dict(os.environ if base is None else base)
    flags = re.sub(rf"{_DEVICE_FLAG}=\S+", "", env.get("XLA_FLAGS", ""))
    env["XLA_FLAGS"] = f"{flags.strip()} {_DEVICE_FLAG}={devices_per_process}"
    env["JAX_PLATFORMS"] = "cpu"
    env["KERAS_BACKEND"] = "jax"
    env["PYTHONUNBUFFERED"] = "1"
    env[multihost.ENV_ADDRESS] = address
    env[multihost.ENV_NUM_PROCESSES] = str(processes)
    env[multihost.ENV_PROCESS_ID] = str(process_id)
    env.update(extra or {})
    return env


def _stop(popen, sig):
    try:
        os.killpg(popen.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _timeout_env(env, initialization_timeout, heartbeat_timeout):
    """The caller's extra variables, with the timeouts `initialize` reads."""
    extra = dict(env or {})
    if initialization_timeout is not None:
        extra[multihost.ENV_INITIALIZATION_TIMEOUT] = str(
            initialization_timeout
        )
    if heartbeat_timeout is not None:
        extra[multihost.ENV_HEARTBEAT_TIMEOUT] = str(heartbeat_timeout)
        extra.setdefault(multihost.ENV_SHUTDOWN_TIMEOUT, str(heartbeat_timeout))
    return extra


def _start(argv, env, cwd, log):
    return subprocess.Popen(
        argv,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        # Own process group: stopping it stops its children too.
        start_new_session=True,
    )


def _stop_all(running, killed):
    """Stops every process still running, adding its rank to `killed`."""
    for rank, popen in running.items():
        if popen.poll() is None:
            killed.add(rank)
            _stop(popen, signal.SIGTERM)
    # JAX workers log SIGTERM as a preemption notice and keep running, so
    # SIGKILL follows soon.
    deadline = time.monotonic() + 3
    for popen in running.values():
        try:
            popen.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _stop(popen, signal.SIGKILL)
            popen.wait()


def _supervise(running, start, timeout, grace):
    """Waits until every process has exited, stopping the rest `grace`
    seconds after one fails or at the timeout.

    Returns:
        `(timed_out, killed)`: a bool, and the set of ranks stopped.
    """
    killed = set()
    failed_at = None
    while True:
        codes = [p.poll() for p in running.values()]
        if all(code is not None for code in codes):
            return False, killed
        now = time.monotonic()
        if failed_at is None and any(c not in (None, 0) for c in codes):
            failed_at = now
        timed_out = now - start > timeout
        if timed_out or (failed_at is not None and now - failed_at > grace):
            _stop_all(running, killed)
            return timed_out, killed
        time.sleep(0.05)


def _read_log(log):
    log.seek(0)
    output = log.read().decode("utf-8", "replace")
    log.close()
    return output


def launch(
    argv,
    processes=2,
    devices_per_process=4,
    *,
    timeout=300,
    grace=10,
    process_ids=None,
    port=None,
    env=None,
    cwd=None,
    initialization_timeout=None,
    heartbeat_timeout=None,
):
    """Runs `argv` as every process of a cluster on this machine.

    Args:
        argv: list of str, the command each process runs, e.g.
            `[sys.executable, "script.py", "--flag"]`; a str is a Python
            script run with this interpreter.
        processes: int, the number of processes of the cluster.
        devices_per_process: int, fake CPU devices in each.
        timeout: float seconds for the whole run; then all are killed.
        grace: float seconds the others get to exit on their own once one
            process has failed, before they are killed.
        process_ids: ranks to start (default all); leaving out 0 starts no
            coordinator, e.g. to test an unreachable one.
        port: int coordinator port on 127.0.0.1 (default: a free one).
        env: dict of extra environment variables for every process.
        cwd: str, the processes' working directory.
        initialization_timeout: int seconds, passed to
            `multihost.initialize` through its environment variable.
        heartbeat_timeout: int seconds, likewise.

    Returns:
        A `LaunchResult`.

    Example:

    ```python
    import sys
    from keras_nlp.multihost.launch import launch

    code = "from keras_nlp import multihost; "
    code += "multihost.initialize(); print(multihost.process_count())"
    result = launch([sys.executable, "-c", code], processes=2)
    assert result.ok, result.report()
    ```
    """
    if isinstance(argv, str):
        argv = [sys.executable, argv]
    argv = [os.fspath(a) for a in argv]
    address = f"{LOOPBACK}:{port or free_port()}"
    extra = _timeout_env(env, initialization_timeout, heartbeat_timeout)
    ranks = list(range(processes)) if process_ids is None else process_ids
    start = time.monotonic()
    logs, running = {}, {}
    try:
        for rank in ranks:
            logs[rank] = tempfile.TemporaryFile(mode="w+b")
            rank_env = process_env(
                rank, processes, address, devices_per_process, extra=extra
            )
            running[rank] = _start(argv, rank_env, cwd, logs[rank])
        timed_out, killed = _supervise(running, start, timeout, grace)
    finally:
        for popen in running.values():
            if popen.poll() is None:
                _stop(popen, signal.SIGKILL)
                popen.wait()
    elapsed = time.monotonic() - start
    results = [
        ProcessResult(
            rank,
            running[rank].returncode,
            _read_log(logs[rank]),
            rank in killed,
        )
        for rank in ranks
    ]
    return LaunchResult(results, timed_out, elapsed, address)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m keras_nlp.multihost.launch",
        description="Run a script as every process of a JAX cluster on "
        "this machine (loopback only, fake CPU devices).",
    )
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--devices-per-process", type=int, default=4)
    parser.add_argument(
        "--timeout", type=float, default=600, help="seconds for the run"
    )
    parser.add_argument(
        "--grace",
        type=float,
        default=10,
        help="seconds the others get to exit after one fails",
    )
    parser.add_argument(
        "--heartbeat-timeout",
        type=int,
        default=None,
        help="seconds before a silent process is declared dead",
    )
    parser.add_argument("--tail", type=int, default=20, help="lines shown")
    parser.add_argument("script", help="a Python script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    result = launch(
        [sys.executable, args.script, *args.args],
        processes=args.processes,
        devices_per_process=args.devices_per_process,
        timeout=args.timeout,
        grace=args.grace,
        heartbeat_timeout=args.heartbeat_timeout,
    )
    # Process 0 prints the results; show all of it, the others' tails.
    main_output = result.processes[0].output if result.processes else ""
    print(main_output, end="" if main_output.endswith("\n") else "\n")
    print(result.report(tail_lines=0 if result.ok else args.tail))
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
