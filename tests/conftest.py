"""Test session setup.

JAX runs on 8 fake CPU devices so every mesh of the suite exists; the flag
must be set before JAX is imported. With fewer than 8 devices the run fails
instead of skipping: skipped multi-device tests are how sharding bugs hide.
"""

import os
import warnings

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
_FLAG = "--xla_force_host_platform_device_count=8"
# The suite's models are tiny: compiling their programs, not running them,
# is most of its time. Without LLVM's optimizations XLA compiles them about
# a quarter faster (the same HLO, so the same numbers to float rounding);
# a flag already in XLA_FLAGS wins.
_FAST_COMPILE_FLAGS = {
    "--xla_backend_optimization_level": "0",
    "--xla_llvm_disable_expensive_passes": "true",
}
_flags = os.environ.get("XLA_FLAGS", "")
for _name, _value in _FAST_COMPILE_FLAGS.items():
    if _name not in _flags:
        _flags = f"{_flags} {_name}={_value}"
if _FLAG not in _flags:
    _flags = f"{_flags} {_FLAG}"
os.environ["XLA_FLAGS"] = _flags.strip()
# Repeated runs reuse compiled programs, and so does one run: many tests
# compile a program another has compiled (a model rebuilt from its config
# or preset runs the reference's forward pass; eager ops after JAX's
# caches are cleared). Every program is kept, not only those that took a
# second or more (JAX's default): from an empty cache a run takes about a
# sixth less time.
os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR",
    os.path.join(os.path.dirname(os.path.dirname(__file__)), ".jax_cache"),
)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")

import keras  # noqa: E402
import pytest  # noqa: E402

REQUIRED_DEVICES = 8


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "multi_device: needs the 8-device JAX mesh (fails, never skips, "
        "without it)",
    )
    config.addinivalue_line(
        "markers",
        "tensorflow_pass: CI runs it again with KERAS_BACKEND=tensorflow: "
        "the backends' numbers agree, or the code takes TensorFlow's own "
        "path (see .ci/run)",
    )


def _zoo_class(item):
    """The enrolled backbone class a test is parametrized with, if any."""
    from tests.models.tiny_configs import TINY_CONFIGS

    callspec = getattr(item, "callspec", None)
    for value in callspec.params.values() if callspec else ():
        if isinstance(value, tuple) and value:
            value = value[0]
        if isinstance(value, str) and value in TINY_CONFIGS:
            return value
    return None


def pytest_itemcollected(item):
    """Groups tests that share built models onto one worker.

    With `--dist loadgroup` (pyproject's addopts), xdist sends each group
    to one worker whole. Tests parametrized with an enrolled class share
    that class's models (tests/models/zoo.py) across modules: their group
    is the class. Any other test is grouped with its module, whose
    module-level caches and fixtures then build once instead of once per
    worker.

    The marker is added as each test is collected: xdist reads the groups
    into the node ids in its `pytest_collection_modifyitems`, so a marker
    added there (or later) groups nothing and every test is sent alone.
    """
    zoo_class = _zoo_class(item)
    group = f"zoo-{zoo_class}" if zoo_class else item.nodeid.split("::")[0]
    item.add_marker(pytest.mark.xdist_group(group))
    item.stash[_GROUP] = group


_GROUP = pytest.StashKey[str]()


# Optional: a run without xdist (`-p no:xdist`) has no such hook.
@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    """Stops a run whose tests xdist did not tag with their group.

    The tag (`@group` after the node id) is how `--dist=loadgroup` keeps a
    group on one worker; without it every test is sent alone, each worker
    builds the shared models again, and nothing fails, only the suite
    slows (pytest 9.2 with xdist 3.8 did this: pyproject pins pytest).
    Checked here, on the controller: an error raised in a worker's
    collection reaches the terminal as an unrelated INTERNALERROR.
    """
    if node.config.getvalue("dist") != "loadgroup" or not ids:
        return
    untagged = [nodeid for nodeid in ids if "@" not in nodeid]
    if untagged:
        pytest.exit(
            f"{len(untagged)} of {len(ids)} tests carry no xdist group in "
            f"their node id (first: {untagged[0]}), so --dist=loadgroup "
            "would send each alone. This pytest-xdist cannot tag this "
            "pytest's node ids: install the versions pyproject.toml's "
            "`test` extra names (pip install -e '.[test]').",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """Frees a group's models when the worker moves to the next group.

    Each group runs whole on one worker, so nothing later needs its cached
    models or compiled programs. Kept, they are not only memory: every XLA
    executable holds ~5 memory mappings, and a worker that kept all of a
    run's (~13,000, most of them eager ops) reached Linux's limit of
    65,530 mappings (`vm.max_map_count`) and crashed inside XLA's compiler
    at ~90% of the run.
    """
    result = yield
    if nextitem is not None and item.stash.get(_GROUP, None) != (
        nextitem.stash.get(_GROUP, None)
    ):
        _release_cached_models()
    return result


def _release_cached_models():
    import gc
    import sys

    for name, module in list(sys.modules.items()):
        if not name.startswith("tests.") or module is None:
            continue
        for value in list(vars(module).values()):
            if hasattr(value, "cache_info") and hasattr(value, "cache_clear"):
                value.cache_clear()
    # Reference counting frees most of what the caches held. A full
    # collection of a worker's heap takes seconds: at every group it was a
    # third of the run, so it runs only before JAX's caches are cleared.
    if keras.backend.backend() != "jax" or _memory_mappings() < _MAPPINGS_HIGH:
        return
    import jax

    gc.collect()

    # Eager ops' programs are cached by JAX, not by tests, and shared by
    # every group: clearing them at each group made the run slower by their
    # recompilation, so they go only when the mappings near the limit.
    jax.clear_caches()
    mapped = _memory_mappings()
    if mapped > _MAPPINGS_HIGH:
        warnings.warn(
            f"{mapped} memory mappings held after freeing a group's models "
            "and JAX's caches (Linux's default limit: 65,530): a module "
            "keeps compiled programs alive outside the caches "
            "tests/conftest.py clears.",
            stacklevel=1,
        )


def _memory_mappings():
    try:
        with open("/proc/self/maps") as maps:
            return sum(1 for _ in maps)
    except OSError:  # not Linux: no such limit to watch
        return 0


_MAPPINGS_HIGH = 25_000


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
