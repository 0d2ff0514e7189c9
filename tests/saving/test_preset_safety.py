"""Presets read nothing outside their directory and saves are atomic.

One test per attack: a crafted preset directory (HDF5 external storage, a
virtual dataset, an external link, a symbolic link for each file or the
whole directory) is refused with a message naming the dataset or file,
and the outside file it points at is left unread and unchanged; a save
that is killed, runs out of space, meets a read-only directory or a second
concurrent save leaves the previous preset whole; NaN weights and lossy
dtype conversions are reported.
"""

import errno
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import warnings

import h5py
import keras
import ml_dtypes
import numpy as np
import pytest

from keras_nlp.models import Backbone
from keras_nlp.models import LlamaBackbone
from keras_nlp.saving import LossyConversionWarning
from keras_nlp.saving import PresetBusyError
from keras_nlp.saving import PresetError
from keras_nlp.saving import WeightsFile
from keras_nlp.saving import check_weights
from keras_nlp.saving import h5_writer
from keras_nlp.saving import load_weights
from tests.models.tiny_configs import tiny

QUERY_PATH = "transformer_layer_0/self_attention/query/kernel"
SECRET = np.arange(1, 9, dtype="float32")


def random_backbone(seed=0, **overrides):
    backbone_cls, config = tiny("LlamaBackbone")
    backbone = backbone_cls(**dict(config, **overrides))
    rng = np.random.default_rng(seed)
    for variable in backbone.weights:
        variable.assign(
            rng.normal(0.0, 0.2, variable.shape).astype(variable.dtype)
        )
    return backbone


def weights_of(backbone):
    return {
        v.path: keras.ops.convert_to_numpy(v.value) for v in backbone.weights
    }


def assert_weights(backbone, expected):
    actual = weights_of(backbone)
    assert sorted(actual) == sorted(expected)
    for path, value in expected.items():
        np.testing.assert_array_equal(actual[path], value, err_msg=path)


@pytest.fixture(scope="module")
def source():
    """A saved-once backbone and its weights, shared by the tests."""
    backbone = random_backbone(seed=0)
    return backbone, weights_of(backbone)


@pytest.fixture
def preset(tmp_path, source):
    path = tmp_path / "preset"
    source[0].save_to_preset(str(path))
    return path


@pytest.fixture
def query(preset, source):
    """The h5 key of the first query kernel (Keras keys it by class name)."""
    with WeightsFile(str(preset)) as weights:
        pairs = check_weights(source[0], weights)
    return next(e.key for v, e in pairs if v.path == QUERY_PATH)


@pytest.fixture
def outside(tmp_path):
    """A file outside the preset; its content and mtime must not change."""
    path = tmp_path / "outside.bin"
    path.write_bytes(SECRET.tobytes())
    os.utime(path, (1_000_000_000, 1_000_000_000))
    return path


def assert_untouched(path, content=None):
    expected = SECRET.tobytes() if content is None else content
    assert path.read_bytes() == expected
    assert os.stat(path).st_mtime == 1_000_000_000


def replace_dataset(preset, key, make):
    with h5py.File(preset / "model.weights.h5", "a") as h5:
        shape, dtype = h5[key].shape, h5[key].dtype
        del h5[key]
        make(h5, key, shape, dtype)


# === Reading: nothing outside the directory ===


def test_external_storage_is_refused(preset, outside, query):
    def make(h5, key, shape, dtype):
        h5.create_dataset(
            key,
            shape=shape,
            dtype=dtype,
            external=[(str(outside), 0, h5py.h5f.UNLIMITED)],
        )

    replace_dataset(preset, query, make)
    with pytest.raises(PresetError) as info:
        Backbone.from_preset(str(preset))
    message = str(info.value)
    assert f"model.weights.h5:{query} keeps its values in external files" in (
        message
    )
    assert str(outside) in message
    assert "must be stored in the file itself" in message
    assert_untouched(outside)


def test_virtual_dataset_is_refused(preset, tmp_path, query):
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as h5:
        h5["data"] = np.full((32, 4, 8), 7.0, "float32")
    os.utime(other, (1_000_000_000, 1_000_000_000))
    before = other.read_bytes()

    def make(h5, key, shape, dtype):
        layout = h5py.VirtualLayout(shape=shape, dtype=dtype)
        layout[...] = h5py.VirtualSource(str(other), "data", shape=shape)
        h5.create_virtual_dataset(key, layout)

    replace_dataset(preset, query, make)
    with pytest.raises(
        PresetError,
        match=rf"model\.weights\.h5:{query} is a virtual dataset \(its "
        r"values come from other files\)",
    ):
        Backbone.from_preset(str(preset))
    assert_untouched(other, before)


@pytest.mark.parametrize("kind", ["external", "soft"])
def test_links_inside_the_file_are_refused(preset, tmp_path, kind, query):
    other = tmp_path / "other.h5"
    with h5py.File(preset / "model.weights.h5") as h5:
        shape = h5[query].shape
    with h5py.File(other, "w") as h5:
        h5["kernel"] = np.full(shape, 7.0, "float32")
    os.utime(other, (1_000_000_000, 1_000_000_000))
    before = other.read_bytes()

    def make(h5, key, shape, dtype):
        if kind == "external":
            h5[key] = h5py.ExternalLink(str(other), "/kernel")
        else:
            h5[key] = h5py.SoftLink("/" + key.replace("/0", "/1") + "_x")

    replace_dataset(preset, query, make)
    described = "an external link" if kind == "external" else "a soft link"
    with pytest.raises(
        PresetError,
        match=rf"model\.weights\.h5:{query} is {described}.*only be "
        r"reached by plain links",
    ):
        Backbone.from_preset(str(preset))
    assert_untouched(other, before)


def test_string_dataset_is_refused(preset, query):
    def make(h5, key, shape, dtype):
        h5[key] = np.array([b"not", b"numbers"])

    replace_dataset(preset, query, make)
    with pytest.raises(
        PresetError,
        match=rf"model\.weights\.h5:{query} holds non-numeric values "
        r"\(\|S7\); weights must be booleans, integers or floats",
    ):
        Backbone.from_preset(str(preset))


def test_bfloat16_mark_on_wider_data_is_refused(preset, query):
    def make(h5, key, shape, dtype):
        h5[key] = np.zeros(shape, "float32")
        h5[key].attrs["dtype"] = "bfloat16"

    replace_dataset(preset, query, make)
    with pytest.raises(
        PresetError, match=rf"{query} is marked bfloat16 but stores float32"
    ):
        Backbone.from_preset(str(preset))


def test_huge_shape_is_refused_before_any_read(preset, query):
    # 40 TB if it were read: the shape check against the config comes first.
    def make(h5, key, shape, dtype):
        h5.create_dataset(key, shape=(10**7, 10**6), dtype=dtype, chunks=True)

    replace_dataset(preset, query, make)
    with pytest.raises(
        PresetError,
        match=rf"{QUERY_PATH}: model\.weights\.h5:{query} has shape "
        r"\(10000000, 1000000\), expected \(32, 4, 8\)",
    ):
        Backbone.from_preset(str(preset))


def other_weights_file(tmp_path, name="elsewhere.weights.h5"):
    """A valid weights file outside the preset, with different values."""
    other = random_backbone(seed=5)
    directory = tmp_path / "other_preset"
    other.save_to_preset(str(directory))
    path = tmp_path / name
    path.write_bytes((directory / "model.weights.h5").read_bytes())
    os.utime(path, (1_000_000_000, 1_000_000_000))
    return path, path.read_bytes()


def test_weights_file_symlink_is_refused(preset, tmp_path):
    elsewhere, content = other_weights_file(tmp_path)
    os.remove(preset / "model.weights.h5")
    os.symlink(elsewhere, preset / "model.weights.h5")
    with pytest.raises(
        PresetError,
        match=r"model\.weights\.h5 is a symbolic link \(to .*elsewhere"
        r"\.weights\.h5'\), which is absolute\. Links below a preset "
        r"directory are followed only to a file or folder inside it",
    ):
        Backbone.from_preset(str(preset))
    assert_untouched(elsewhere, content)


def test_shard_symlink_is_refused(tmp_path, source):
    preset = tmp_path / "preset"
    source[0].save_to_preset(str(preset), max_shard_size=0.00001)
    shard = preset / "model_00001.weights.h5"
    elsewhere = tmp_path / "elsewhere.h5"
    elsewhere.write_bytes(shard.read_bytes())
    os.utime(elsewhere, (1_000_000_000, 1_000_000_000))
    content = elsewhere.read_bytes()
    os.remove(shard)
    os.symlink(elsewhere, shard)
    with pytest.raises(
        PresetError, match=r"model_00001\.weights\.h5 is a symbolic link"
    ):
        Backbone.from_preset(str(preset))
    assert_untouched(elsewhere, content)


@pytest.mark.parametrize("name", ["config.json", "model.weights.json"])
def test_json_symlink_is_refused(tmp_path, source, name):
    preset = tmp_path / "preset"
    source[0].save_to_preset(str(preset), max_shard_size=0.00001)
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_bytes((preset / name).read_bytes())
    os.utime(elsewhere, (1_000_000_000, 1_000_000_000))
    content = elsewhere.read_bytes()
    os.remove(preset / name)
    os.symlink(elsewhere, preset / name)
    with pytest.raises(PresetError, match=rf"{name} is a symbolic link"):
        Backbone.from_preset(str(preset))
    assert_untouched(elsewhere, content)


@pytest.mark.parametrize("trailing_slash", [False, True])
def test_directory_symlink_is_refused(preset, tmp_path, trailing_slash):
    link = tmp_path / "link"
    os.symlink(preset, link)
    path = str(link) + ("/" if trailing_slash else "")
    with pytest.raises(
        PresetError,
        match=r"The preset directory .*link is a symbolic link \(to .*"
        r"preset'\)\. Links are refused, not followed.*pass the resolved "
        r"path",
    ):
        Backbone.from_preset(path)
    # The plan command reads config.json through the same check.
    with pytest.raises(PresetError, match=r"is a symbolic link"):
        Backbone.plan_layout("1x2", preset=path)
    # Resolving the link is the caller's explicit choice, and it works.
    Backbone.from_preset(os.path.realpath(link))


# A link below a keras-hub-style preset (its tokenizer in
# assets/tokenizer/vocabulary.spm): (link, its target, the refusal, or the
# bytes read when the link stays inside). Outside, elsewhere/tokenizer/
# vocabulary.spm is a FIFO: opening it would fail otherwise ("not a regular
# file") and reading it would block, so a refusal shows nothing behind the
# link was opened. hop -> ../elsewhere is a link inside the preset.
LINKS_BELOW_A_PRESET = [
    ("assets", "../elsewhere", "leads outside the preset directory"),
    ("assets", "{elsewhere}", "is absolute"),
    ("assets/tokenizer", "../../elsewhere/tokenizer", "leads outside"),
    ("assets/tokenizer", "../hop/tokenizer", "leads to another symbolic"),
    ("assets", "kept", b"kept inside"),
    ("assets/tokenizer", "../kept/tokenizer", b"kept inside"),
]


@pytest.mark.parametrize("link, target, expected", LINKS_BELOW_A_PRESET)
def test_links_below_a_preset(tmp_path, link, target, expected):
    from keras_nlp.tokenizers import Tokenizer
    from keras_nlp.tokenizers.tokenizer_files import read_tokenizer_files

    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "tokenizer").mkdir(parents=True)
    os.mkfifo(elsewhere / "tokenizer" / "vocabulary.spm")
    preset = tmp_path / "preset"
    (preset / "kept" / "tokenizer").mkdir(parents=True)
    (preset / "kept" / "tokenizer" / "vocabulary.spm").write_bytes(
        b"kept inside"
    )
    keras_hub_config = {"class_name": "GemmaTokenizer", "config": {}}
    (preset / "tokenizer.json").write_text(json.dumps(keras_hub_config))
    os.symlink("../elsewhere", preset / "hop")
    (preset / link).parent.mkdir(parents=True, exist_ok=True)
    target = target.format(elsewhere=elsewhere)
    os.symlink(target, preset / link)
    if isinstance(expected, bytes):
        files, _ = read_tokenizer_files(str(preset))
        assert files["tokenizer.model"] == expected
        return
    with pytest.raises(PresetError) as info:
        Tokenizer.from_preset(preset)
    message = str(info.value)
    assert message.startswith(
        f"{preset / link} is a symbolic link (to {target!r}), which {expected}"
    )
    assert "nothing behind it was read" in message
    assert stat.S_ISFIFO(
        os.lstat(elsewhere / "tokenizer/vocabulary.spm").st_mode
    )


def test_fifo_instead_of_a_file_is_refused_without_blocking(preset):
    os.remove(preset / "model.weights.h5")
    os.mkfifo(preset / "model.weights.h5")
    with pytest.raises(
        PresetError, match=r"model\.weights\.h5 is not a regular file"
    ):
        Backbone.from_preset(str(preset))


# === Values ===


def test_nan_weights_are_an_error_unless_allowed(preset, source, query):
    with h5py.File(preset / "model.weights.h5", "a") as h5:
        values = h5[query][()]
        values[0, 1, 2] = np.nan
        values[3, 0, 0] = np.inf
        h5[query][...] = values
    with pytest.raises(
        PresetError,
        match=rf"{QUERY_PATH}: model\.weights\.h5:{query} holds 2 NaN or "
        r"infinite value\(s\); nothing was loaded\. Pass "
        r"allow_nonfinite=True to from_preset",
    ):
        Backbone.from_preset(str(preset))
    loaded = Backbone.from_preset(str(preset), allow_nonfinite=True)
    kernel = weights_of(loaded)[QUERY_PATH]
    assert np.isnan(kernel[0, 1, 2]) and np.isinf(kernel[3, 0, 0])

    # Into a built backbone: checked before anything is assigned.
    target = random_backbone(seed=2)
    before = weights_of(target)
    with pytest.raises(PresetError, match=r"allow_nonfinite=True"):
        load_weights(target, str(preset))
    assert_weights(target, before)


def test_float64_that_overflows_float32_is_an_error(preset, query):
    def make(h5, key, shape, dtype):
        h5[key] = np.full(shape, 1e300, "float64")

    replace_dataset(preset, query, make)
    with (
        pytest.warns(LossyConversionWarning),
        pytest.raises(
            PresetError,
            match=r"holds 1,024 NaN or infinite value\(s\) once cast to "
            r"float32",
        ),
    ):
        Backbone.from_preset(str(preset))


def test_lossy_dtype_conversion_warns_with_the_weight(preset, source):
    with pytest.warns(LossyConversionWarning) as record:
        loaded = Backbone.from_preset(str(preset), dtype="bfloat16")
    message = str(record[0].message)
    assert "weight(s) of" in message
    assert "rounded to the backbone's narrower dtype (bfloat16)" in message
    assert "token_embedding/embeddings (float32 in the file)" in message
    expected = source[1]["token_embedding/embeddings"]
    np.testing.assert_array_equal(
        weights_of(loaded)["token_embedding/embeddings"].astype("float32"),
        expected.astype(ml_dtypes.bfloat16).astype("float32"),
    )
    # Widening back is exact: no warning.
    narrow = preset.parent / "narrow"
    loaded.save_to_preset(str(narrow))
    with warnings.catch_warnings():
        warnings.simplefilter("error", LossyConversionWarning)
        Backbone.from_preset(str(narrow), dtype="float32")


# === Writing: atomic, lean, never through a link ===


@pytest.mark.parametrize(
    "name", ["metadata.json", "config.json", "model.weights.h5"]
)
def test_save_never_writes_through_a_symlink(preset, outside, source, name):
    os.remove(preset / name)
    os.symlink(outside, preset / name)
    source[0].save_to_preset(str(preset))
    assert_untouched(outside)
    assert not os.path.islink(preset / name)
    assert_weights(Backbone.from_preset(str(preset)), source[1])


def test_save_refuses_a_symlinked_directory(tmp_path, source):
    real = tmp_path / "real"
    real.mkdir()
    (real / "notes.txt").write_text("mine")
    link = tmp_path / "link"
    os.symlink(real, link)
    with pytest.raises(
        ValueError,
        match=r"does not write through symbolic links, and .*link is one",
    ):
        source[0].save_to_preset(str(link))
    assert sorted(p.name for p in real.iterdir()) == ["notes.txt"]


def test_save_keeps_files_that_are_not_the_backbones(preset, source, outside):
    (preset / "tokenizer.json").write_text('{"vocabulary": 1}')
    (preset / "assets" / "tokenizer").mkdir(parents=True)
    (preset / "assets" / "tokenizer" / "vocabulary.spm").write_bytes(b"spm")
    # A link is carried over as a link: nothing is read through it.
    os.symlink(outside, preset / "assets" / "elsewhere")
    random_backbone(seed=4).save_to_preset(str(preset))
    assert (preset / "tokenizer.json").read_text() == '{"vocabulary": 1}'
    spm = preset / "assets" / "tokenizer" / "vocabulary.spm"
    assert spm.read_bytes() == b"spm"
    assert os.readlink(preset / "assets" / "elsewhere") == str(outside)
    assert_untouched(outside)
    assert_weights(
        Backbone.from_preset(str(preset)), weights_of(random_backbone(seed=4))
    )


def leftovers(preset):
    return sorted(
        p.name for p in preset.parent.iterdir() if p.name.startswith(".")
    )


KILL_DURING_SAVE = """
import json, os, signal, sys
from keras_nlp.models import LlamaBackbone
from keras_nlp.saving import h5_writer

path, config = sys.argv[1], json.loads(sys.argv[2])
backbone = LlamaBackbone(**config)
write = h5_writer._ShardedWriter.write
calls = []

def write_then_die(self, *args):
    write(self, *args)
    calls.append(1)
    if len(calls) == 3:
        os.kill(os.getpid(), signal.SIGKILL)

h5_writer._ShardedWriter.write = write_then_die
backbone.save_to_preset(path)
"""


def test_killed_overwrite_leaves_the_old_preset(preset, source):
    _, config = tiny("LlamaBackbone")
    result = subprocess.run(
        [sys.executable, "-c", KILL_DURING_SAVE, str(preset)]
        + [json.dumps(config)],
        capture_output=True,
        text=True,
        env=dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu"),
        timeout=300,
    )
    assert result.returncode == -signal.SIGKILL, result.stderr[-3000:]
    # The new preset was half-written beside the old one, which is whole.
    assert any(".saving-" in name for name in leftovers(preset))
    assert sorted(p.name for p in preset.iterdir()) == [
        "config.json",
        "metadata.json",
        "model.weights.h5",
    ]
    assert_weights(Backbone.from_preset(str(preset)), source[1])
    # The kernel released the dead save's lock; the next save cleans up.
    newer = random_backbone(seed=3)
    newer.save_to_preset(str(preset))
    assert leftovers(preset) == []
    assert_weights(Backbone.from_preset(str(preset)), weights_of(newer))


def test_a_concurrent_save_fails_and_the_first_wins_whole(
    preset, source, monkeypatch
):
    first, second = random_backbone(seed=1), random_backbone(seed=2)
    started, finish = threading.Event(), threading.Event()
    write = h5_writer._ShardedWriter.write

    def slow_write(self, *args):
        if threading.current_thread().name == "first-save":
            started.set()
            assert finish.wait(60)
        write(self, *args)

    monkeypatch.setattr(h5_writer._ShardedWriter, "write", slow_write)
    errors = []

    def save_first():
        try:
            first.save_to_preset(str(preset))
        except BaseException as error:  # reported below
            errors.append(error)

    thread = threading.Thread(target=save_first, name="first-save")
    thread.start()
    try:
        assert started.wait(60)
        with pytest.raises(
            PresetBusyError,
            match=r"Another save to .*preset is in progress \(it holds the "
            r"lock file .*\.preset\.lock\)",
        ):
            second.save_to_preset(str(preset))
        # Meanwhile the old preset is still there, whole.
        assert_weights(Backbone.from_preset(str(preset)), source[1])
    finally:
        finish.set()
        thread.join(60)
    assert errors == []
    assert_weights(Backbone.from_preset(str(preset)), weights_of(first))
    assert leftovers(preset) == []


def test_disk_full_names_the_file_and_keeps_the_old_preset(
    preset, source, monkeypatch
):
    # h5py reports a full disk as an OSError from the dataset write.
    write = h5py.Dataset.__setitem__
    calls = []

    def fill_disk(self, *args):
        calls.append(1)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        write(self, *args)

    monkeypatch.setattr(h5py.Dataset, "__setitem__", fill_disk)
    with pytest.raises(OSError) as info:
        random_backbone(seed=1).save_to_preset(str(preset))
    assert info.value.errno == errno.ENOSPC
    message = str(info.value)
    assert "save_to_preset could not write" in message
    assert "model.weights.h5 (for " in message
    assert "No space left on device" in message
    assert "needs room for a second copy of the preset" in message
    assert f"The preset at {preset} was left as it was" in message
    assert leftovers(preset) == []
    assert_weights(Backbone.from_preset(str(preset)), source[1])


def test_read_only_directory_names_the_path(preset, source, monkeypatch):
    parent = preset.parent
    before = {p.name: p.read_bytes() for p in preset.iterdir()}
    os.chmod(preset, 0o555)
    os.chmod(parent, 0o555)
    if os.geteuid() == 0:
        # Root ignores permission bits; refuse writes as the kernel would.
        real_open, real_mkdir = os.open, os.mkdir

        def refuse(path, dir_fd=None):
            if dir_fd is None and str(path).startswith(str(parent)):
                raise PermissionError(errno.EACCES, "Permission denied", path)

        def guarded_open(path, flags, *args, dir_fd=None, **kwargs):
            if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
                refuse(path, dir_fd)
            return real_open(path, flags, *args, dir_fd=dir_fd, **kwargs)

        def guarded_mkdir(path, *args, dir_fd=None, **kwargs):
            refuse(path, dir_fd)
            return real_mkdir(path, *args, dir_fd=dir_fd, **kwargs)

        monkeypatch.setattr(os, "open", guarded_open)
        monkeypatch.setattr(os, "mkdir", guarded_mkdir)
    try:
        with pytest.raises(PermissionError) as info:
            random_backbone(seed=1).save_to_preset(str(preset))
    finally:
        monkeypatch.undo()
        os.chmod(parent, 0o755)
        os.chmod(preset, 0o755)
    message = str(info.value)
    assert f"save_to_preset could not write {parent}" in message
    assert f"needs write access to {parent}" in message
    assert f"The preset at {preset} was left as it was" in message
    assert {p.name: p.read_bytes() for p in preset.iterdir()} == before
    assert_weights(Backbone.from_preset(str(preset)), source[1])


@pytest.mark.parametrize("size", [float("nan"), float("inf")])
def test_max_shard_size_must_be_finite(tmp_path, source, size):
    with pytest.raises(
        ValueError, match=r"max_shard_size must be a positive number of GB"
    ):
        source[0].save_to_preset(str(tmp_path / "p"), max_shard_size=size)
    assert not (tmp_path / "p").exists()


@pytest.mark.multi_device
def test_sharded_save_keeps_no_host_copy(tmp_path, source):
    # numpy.asarray on a sharded jax.Array caches a whole host copy on the
    # array; a save must not leave one on every variable.
    devices = keras.distribution.list_devices()
    mesh = keras.distribution.DeviceMesh((1, 8), ("batch", "model"), devices)
    distribution = keras.distribution.ModelParallel(
        layout_map=LlamaBackbone.get_layout_map(mesh), batch_dim_name="batch"
    )
    _, config = tiny("LlamaBackbone")
    with distribution.scope():
        backbone = LlamaBackbone(**config)
    backbone.set_weights([source[1][v.path] for v in backbone.weights])
    assert any(
        not v.value.sharding.is_fully_replicated for v in backbone.weights
    )
    backbone.save_to_preset(str(tmp_path / "preset"))
    for variable in backbone.weights:
        assert getattr(variable.value, "_npy_value", None) is None, (
            variable.path
        )
    assert_weights(Backbone.from_preset(str(tmp_path / "preset")), source[1])


def test_permissions_of_the_new_preset_follow_the_old(preset, source):
    os.chmod(preset, 0o750)
    source[0].save_to_preset(str(preset))
    assert stat.S_IMODE(os.stat(preset).st_mode) == 0o750
