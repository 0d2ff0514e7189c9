"""`python -m keras_nlp plan`: the main job, offline, on built-in presets."""

import io
import json
import os
import pathlib
import subprocess
import sys

import pytest
from rich.console import Console

from keras_nlp.cli import main
from keras_nlp.distribution import MeshShape
from keras_nlp.distribution.devices import parse_memory
from keras_nlp.distribution.memory import Workload
from keras_nlp.distribution.memory import estimate_memory
from keras_nlp.models import Backbone
from keras_nlp.models import GemmaBackbone
from keras_nlp.preset_counting import built_in_presets
from keras_nlp.preset_counting import config_digest
from keras_nlp.preset_counting import count_preset_parameters
from keras_nlp.preset_counting import preset_parameter_count
from keras_nlp.preset_parameter_counts import COUNTS

KV = "decoder_block_0/attention/key/kernel"
# Every preset's golden plans (tests/models/golden/make_plan_goldens.py).
PLANS = pathlib.Path(__file__).parent / "models" / "golden" / "plans"


def run_json(capsys, *args):
    assert main(["plan", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_plan_for_gemma_2b_on_two_devices(capsys):
    plan = run_json(capsys, "gemma_2b_en", "--mesh", "1x2")
    assert plan["total_params"] == 2_506_172_416
    assert plan["ideal_params_per_device"] == 2_506_172_416 / 2
    # About half: only the single-head key/value kernels are whole.
    assert plan["max_params_per_device"] == 1_262_561_280
    weights = {w["path"]: w for w in plan["weights"]}
    assert weights[KV]["shape"] == [1, 2048, 256]
    assert weights[KV]["spec"] == [None, "batch", None]
    assert weights[KV]["shard_shape"] == [1, 2048, 256]
    assert weights[KV]["decision"] == "fallback"
    assert "not divisible by 'model' (size 2)" in weights[KV]["reason"]
    query = weights["decoder_block_0/attention/query/kernel"]
    assert query["spec"] == ["model", "batch", None]
    assert query["shard_shape"] == [4, 2048, 256]
    assert {"path", "shape", "spec", "shard_shape", "reason"} <= set(query)
    # One cache per block, whole on 'model' like the single-head key kernel.
    caches = plan["kv_caches"]
    assert len(caches) == 18
    assert caches[0]["path"] == "decoder_block_0/attention/cache"
    assert (caches[0]["kv_heads"], caches[0]["head_dim"]) == (1, 256)
    assert caches[0]["spec"] == ["*", None, None, None, None]
    assert "kv heads whole on every device" in caches[0]["reason"]


def test_dtype_changes_bytes_not_params(capsys):
    fp32 = run_json(capsys, "gemma_2b_en", "--mesh", "1x2")
    bf16 = run_json(
        capsys, "gemma_2b_en", "--mesh", "1x2", "--dtype", "bfloat16"
    )
    assert bf16["max_params_per_device"] == fp32["max_params_per_device"]
    assert bf16["max_bytes_per_device"] * 2 == fp32["max_bytes_per_device"]
    assert bf16["dtypes"] == ["bfloat16"]
    # Quantized (the float weights in bfloat16): int8 kernels, bfloat16
    # scales; int4 kernels packed two a byte (the single-head key kernel
    # (1, 2048, 256) stored as 2048 rows of 256 / 2 bytes).
    int8 = run_json(
        capsys, "gemma_2b_en", "--mesh", "1x2", "--dtype", "int8_from_bfloat16"
    )
    int4 = run_json(capsys, "gemma_2b_en", "--mesh", "1x2", "--dtype", "int4")
    assert sorted(int8["dtypes"]) == ["bfloat16", "int8"]
    ratio = int8["max_bytes_per_device"] / bf16["max_bytes_per_device"]
    assert 0.5 < ratio < 0.505
    key = {w["path"]: w for w in int4["weights"]}[KV]
    assert (key["shape"], key["dtype"]) == ([2048, 128], "int8")
    assert "two values a byte" in key["reason"]
    scales = [w for w in int4["weights"] if w["path"].endswith("_scale")]
    assert scales and all(w["dtype"] == "float32" for w in scales)


def test_custom_axis_names_and_no_data_axis(capsys):
    plan = run_json(
        capsys,
        "gemma_7b_en",
        "--mesh",
        "2x4",
        "--axis-names",
        "fsdp,tensor",
        "--model-axis",
        "tensor",
        "--data-axis",
        "none",
    )
    weights = {w["path"]: w for w in plan["weights"]}
    assert weights[KV]["spec"] == ["tensor", None, None]
    assert plan["mesh"] == {"fsdp": 2, "tensor": 4}


def test_context_axis_and_sequence_parallel(capsys):
    plan = run_json(
        capsys,
        "gemma_2b_en",
        "--mesh",
        "1x2x4",
        "--axis-names",
        "batch,seq,model",
        "--context-axis",
        "seq",
        "--sequence-parallel",
        "on",
    )
    assert plan["context_axis"] == "seq"
    assert plan["sequence_parallel"]["enabled"] is True
    residual = plan["activations"][0]
    assert residual["path"] == "token_embedding/output"
    assert residual["sequence_axes"] == ["seq", "model"]
    assert plan["kv_caches"][0]["length_axes"] == ["seq", "model"]


def test_table_output_folds_blocks_and_prints_totals(capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert main(["plan", "gemma_2b_en", "--mesh", "1x2"]) == 0
    out = capsys.readouterr().out
    # Piped output is 100 columns: one entry per weight kind.
    assert "attention/key/kernel  decoder_block 0-17" in out
    assert max(len(line) for line in out.splitlines()) <= 100
    assert "total parameters:      2,506,172,416" in out
    assert "fallbacks:             36 weight(s)" in out


@pytest.mark.parametrize(
    "preset, mesh", [("gemma_2b_en", "1x2"), ("bert_base_en_uncased", "1x8")]
)
def test_plan_reads_at_80_columns(preset, mesh):
    plan = Backbone.plan_layout(MeshShape.parse(mesh), preset=preset)
    console = Console(width=80, record=True, file=io.StringIO())
    plan.print(console=console)
    text = console.export_text()
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[0] == f"{preset} on mesh {plan.mesh}"
    # Every weight kind's name (blocks folded) and decision are shown.
    flat = " ".join(text.split())
    for template, _, weight in plan.grouped_rows():
        kind = template.split("_{i}/")[-1]
        assert kind in text, kind
        assert weight.decision in flat
        if weight.decision != "sharded":
            assert " ".join(weight.reason.split()) in flat, weight.reason
    assert "decoder_block 0-17" in text or "transformer_layer 0-11" in text
    # A console with room for every name whole and the reasons gets the
    # table with shapes and counts.
    wide = Console(width=240, record=True, file=io.StringIO())
    plan.print(console=wide)
    wide_text = wide.export_text()
    assert "┃ shard " in wide_text and "┃ x " in wide_text


def test_preset_parameter_count_equals_the_full_plan():
    for preset in ("gemma_2b_en", "albert_base_en_uncased", "t5_small_multi"):
        owner, config = Backbone._preset_config(preset)
        full = owner.plan_layout({"batch": 1, "model": 1}, preset=preset)
        assert count_preset_parameters(owner, config) == full.total_params


def test_stored_parameter_counts_are_the_golden_plans_totals():
    """`plan --list` reads stored counts: each is the current config's and
    equals the total of its golden plan (`tests/models/test_preset_plans.py`
    checks those against real plans)."""
    listed = 0
    for backbone_cls, presets in built_in_presets():
        name = backbone_cls.__name__
        golden = json.loads((PLANS / f"{name}.json").read_text())["presets"]
        for preset, config in presets.items():
            stored = COUNTS.get(name, {}).get(preset)
            assert stored is not None and stored[1] == config_digest(config), (
                f"{name} preset {preset!r} has no stored count for its "
                "config; run python -m keras_nlp.preset_counting"
            )
            totals = golden[preset]["totals"].values()
            assert {t["total_params"] for t in totals} == {stored[0]}, preset
            listed += 1
    assert listed == sum(len(classes) for classes in COUNTS.values())


def test_list_prints_every_preset_with_its_count(capsys):
    assert main(["plan", "--list"]) == 0
    out = capsys.readouterr().out
    assert "GemmaBackbone\n  gemma_2b_en " in out
    assert "2,506,172,416 parameters" in out
    presets = [line for line in out.splitlines() if line.startswith("  ")]
    assert len(presets) == sum(len(p) for _, p in built_in_presets())


def test_changed_preset_is_counted_again():
    owner, config = Backbone._preset_config("gemma_2b_en")
    one_block = {**config, "num_layers": 1}
    # The stored count is for 18 blocks; it must not be read for one.
    assert preset_parameter_count(owner, "gemma_2b_en", one_block) == (
        count_preset_parameters(owner, one_block)
    )


def test_strict_fails_with_the_reason(capsys):
    assert main(["plan", "gemma_2b_en", "--mesh", "1x2", "--strict"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: strict=True: 36 GemmaBackbone weight(s)")
    assert "axis sizes that divide 1: 1" in err
    # The fix in CLI words.
    assert "drop --strict to accept" in err
    assert "strict=False" not in err


TINY_GEMMA = dict(
    vocabulary_size=128,
    num_layers=2,
    num_query_heads=4,
    num_key_value_heads=1,
    hidden_dim=32,
    intermediate_dim=64,
    head_dim=8,
)


def gemma_config_json(**changes):
    """A tiny Gemma preset's config.json text, with `changes`."""
    return json.dumps(
        {
            "module": "keras_nlp.models",
            "class_name": "GemmaBackbone",
            "config": {**TINY_GEMMA, **changes},
            "registered_name": "keras_nlp>GemmaBackbone",
        }
    )


# Arguments after `plan` ({dir}: a preset directory whose config.json is
# the second entry, or an empty directory for None), then what the one
# error line says. Each is refused before any model is built.
BAD_INPUTS = {
    "mesh not sizes": (
        ["gemma_2b_en", "--mesh", "two"],
        None,
        ["Could not read the mesh shape 'two'", "e.g. '1x2'"],
    ),
    "negative axis size": (
        ["gemma_2b_en", "--mesh", "-1x2"],
        None,
        [
            "The mesh shape '-1x2' gives axis 'batch' size -1; every axis "
            "needs at least 1 device, e.g. '1x2'"
        ],
    ),
    "zero axis size": (
        ["gemma_2b_en", "--mesh=1x0"],
        None,
        ["The mesh shape '1x0' gives axis 'model' size 0"],
    ),
    "one axis": (
        ["gemma_2b_en", "--mesh", "4"],
        None,
        ["The mesh shape '4' has 1 axis; pass one axis name per size"],
    ),
    "mesh without value": (
        ["gemma_2b_en", "--mesh"],
        None,
        [
            "argument --mesh: expected one argument. `python -m keras_nlp "
            "plan --help` describes the arguments."
        ],
    ),
    "group size on int8": (
        ["gemma_2b_en", "--mesh", "1x2", "--dtype", "int8/64"],
        None,
        ["'int8/64': only int4 takes a group size ('int4/128'"],
    ),
    "train batch zero": (
        ["gemma_2b_en", "--mesh", "1x2", "--train", "--batch", "0"],
        None,
        ["batch_size must be a positive int. Received: 0."],
    ),
    "unknown optimizer": (
        ["gemma_2b_en", "--mesh", "1x2", "--train", "--optimizer", "rmsprop"],
        None,
        [
            "Unknown optimizer 'rmsprop'. Known: sgd, momentum, adam, "
            "adamw, lion, adafactor."
        ],
    ),
    "prompt longer than the context": (
        ["gemma_2b_en", "--mesh", "1x2", "--generate", "--context", "128"]
        + ["--prompt", "256"],
        None,
        [
            "prompt_length must be an int from 1 to sequence_length (128). "
            "Received: 256."
        ],
    ),
    "train and generate": (
        ["gemma_2b_en", "--mesh", "1x2", "--train", "--generate"],
        None,
        ["argument --generate: not allowed with argument --train"],
    ),
    "unknown policy": (
        ["gemma_2b_en", "--mesh", "1x2", "--policy", "fast"],
        None,
        ["argument --policy: invalid choice: 'fast'"],
    ),
    "no preset": (
        ["--mesh", "1x2"],
        None,
        ["plan needs a preset and --mesh", "`--list` lists the presets"],
    ),
    "misspelt preset": (
        ["gema_2b_en", "--mesh", "1x2"],
        None,
        [
            "Unknown preset 'gema_2b_en'",
            "Did you mean 'gemma_2b_en'",
            "`python -m keras_nlp plan --list`",
        ],
    ),
    "svg in a missing directory": (
        ["gemma_2b_en", "--mesh", "1x2", "--svg", "/nonexistent/x.svg"],
        None,
        [
            "--svg /nonexistent/x.svg: the directory /nonexistent does not "
            "exist. Create it first"
        ],
    ),
    "svg is a directory": (
        ["gemma_2b_en", "--mesh", "1x2", "--svg", "{dir}"],
        None,
        ["--svg {dir} is a directory; name a file in it"],
    ),
    "missing preset directory": (
        ["{dir}/typo", "--mesh", "1x2"],
        None,
        [
            "The preset directory '{dir}/typo' does not exist. The nearest "
            "directory that exists is '{dir}'."
        ],
    ),
    "directory without config.json": (
        ["{dir}", "--mesh", "1x2"],
        None,
        ["has no config.json"],
    ),
    "config.json not JSON": (
        ["{dir}", "--mesh", "1x2"],
        "{not json",
        ["config.json is not valid JSON"],
    ),
    "config.json nested too deep": (
        ["{dir}", "--mesh", "1x2"],
        "[" * 5000 + "]" * 5000,
        ["nests JSON arrays and objects 5000 levels deep; at most 64"],
    ),
    "size of the wrong type": (
        ["{dir}", "--mesh", "1x2"],
        gemma_config_json(num_layers="2"),
        [
            "GemmaBackbone: `num_layers` must be a positive integer. "
            "Received: num_layers='2'."
        ],
    ),
    "more layers than any checkpoint": (
        ["{dir}", "--mesh", "1x2"],
        gemma_config_json(num_layers=10**7),
        [
            "GemmaBackbone: `num_layers` is at most 256",
            "Received: num_layers=10000000.",
        ],
    ),
    "no heads": (
        ["{dir}", "--mesh", "1x2"],
        gemma_config_json(num_query_heads=0),
        ["`num_query_heads` must be a positive integer"],
    ),
    "unknown device": (
        ["gemma_2b_en", "--mesh", "1x2", "--device", "v100"],
        None,
        [
            "Unknown device 'v100'. Known devices: h100-80gb, a100-40gb, "
            "a100-80gb, l4-24gb, tpu-v5e, tpu-v5p, tpu-v6e; or give the "
            "memory with --device-memory (e.g. 24GiB)."
        ],
    ),
    "memory without a number": (
        ["gemma_2b_en", "--mesh", "1x2", "--device-memory", "24 GiBs"],
        None,
        [
            "A memory size must be a positive number with an optional unit",
            "Received: '24 GiBs'.",
        ],
    ),
}


def test_device_compares_the_weights_with_its_memory(capsys):
    # Gemma 7B's 8.5e9 fp32 weights whole: twice a TPU v5e's 16 GB.
    assert (
        main(["plan", "gemma_7b_en", "--mesh", "1x1", "--device", "TPU-v5e"])
        == 0
    )
    line = capsys.readouterr().out.splitlines()[-1]
    assert line.startswith(
        "device memory:         Google TPU v5e (16 GB), 14.90 GiB: the "
        "weights take 31.81 GiB per device (213.4%) and do NOT fit;"
    )
    plan = run_json(
        capsys, "gemma_2b_en", "--mesh", "1x8", "--device-memory", "2GiB"
    )
    assert plan["device"] == {
        "memory_bytes": 2**31,
        "weights_bytes_per_device": plan["max_bytes_per_device"],
        "weights_fit": plan["max_bytes_per_device"] <= 2**31,
    }
    assert plan["device"]["weights_fit"]
    # Decimal and binary units, as written.
    assert [parse_memory(t) for t in ("80GB", "1.5 GiB", "1e9", "512")] == [
        80 * 10**9,
        3 * 2**29,
        10**9,
        512,
    ]
    # The device's bandwidths score the choices: an L4's PCIe link is 14x
    # slower than an H100's NVLink, so fallbacks cost more link time.
    h100 = GemmaBackbone.plan_layout(
        {"batch": 2, "model": 4}, preset="gemma_2b_en", device="h100-80gb"
    )
    l4 = GemmaBackbone.plan_layout(
        {"batch": 2, "model": 4}, preset="gemma_2b_en", device="l4-24gb"
    )
    key = "decoder_block_0/attention/key/kernel"
    times = [
        [c.time_us for c in plan.weight(key).candidates] for plan in (h100, l4)
    ]
    assert times[0] and all(b > a for a, b in zip(*times, strict=True))


def test_train_and_generate_print_the_memory_per_device(capsys):
    plan = run_json(
        capsys,
        "gemma_2b_en",
        "--mesh",
        "2x4",
        "--train",
        "--batch",
        "8",
        "--seq",
        "4096",
        "--dtype",
        "bfloat16",
        "--device",
        "l4-24gb",
    )
    memory = plan["memory"]
    workload = Workload("train", 8, 4096, dtype="bfloat16")
    expected = estimate_memory(
        GemmaBackbone.plan_layout(
            {"batch": 2, "model": 4}, preset="gemma_2b_en", dtype="bfloat16"
        ),
        workload,
    )
    assert memory == expected.to_dict()
    assert memory["total"] == sum(memory["bytes_per_device"].values())
    assert memory["workload"]["sequence_length"] == 4096
    # 256k-token logits at 4096 tokens: about 90 GiB, not an L4's 24 GB.
    assert plan["device"]["fits"] is False
    assert memory["largest"] == "logits_and_loss"

    arguments = ["gemma_2b_en", "--mesh", "1x8", "--generate"]
    arguments += ["--batch", "16", "--context", "8192", "--prompt", "512"]
    assert main(["plan", *arguments, "--device", "tpu-v5e"]) == 0
    lines = capsys.readouterr().out.splitlines()
    start = lines.index(
        "memory per device, generation, batch 16, context 8192 (prompt 512):"
    )
    # 18 single-head caches: the head whole on the model axis, the length
    # split over it: 18 x 16 x 2 x 8192 / 8 x 256 float32 values (whole,
    # 4.50 GiB).
    assert lines[start + 3] == "  kv cache               576.00 MiB"
    assert lines[-1].startswith("fits in Google TPU v5e (16 GB), 14.90 GiB")
    assert lines[-1].endswith("the largest item is weights (1.23 GiB)")


def test_recommend_ranks_setups_and_says_when_nothing_fits(capsys):
    arguments = ["recommend", "gemma_2b_en", "--devices", "8"]
    arguments += ["--device", "l4-24gb", "--batch", "8", "--seq", "4096"]
    assert main([*arguments, "--dtype", "bfloat16"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(
        "gemma_2b_en on 8 x NVIDIA L4 24 GB, training, batch 8 x 4096 "
        "tokens, optimizer adamw, bfloat16: "
    )
    assert lines[1].startswith("1. data ") and "remat full" in lines[1]
    assert main([*arguments, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    steps = [c["step_seconds"] for c in result["best"]]
    assert steps == sorted(steps) and result["considered"] > len(steps)
    assert (
        main(
            [
                "recommend",
                "gemma_2b_en",
                "--devices",
                "1",
                "--device",
                "tpu-v5e",
            ]
            + ["--generate", "--batch", "16", "--context", "8192"]
        )
        == 2
    )
    error = capsys.readouterr().err
    assert error.startswith("error: Nothing fits: the smallest setup (data ")
    assert "--prompt" in error


def test_summary_names_the_class_once_without_a_preset():
    one_device = {"batch": 1, "model": 1}
    plan = GemmaBackbone.plan_layout(one_device, config=TINY_GEMMA)
    assert plan.summary().startswith("GemmaBackbone on mesh 1x1 (batch, ")
    plan = GemmaBackbone.plan_layout(one_device, preset="gemma_2b_en")
    assert plan.summary().startswith("gemma_2b_en (GemmaBackbone) on mesh")


@pytest.mark.parametrize("name", BAD_INPUTS)
def test_bad_input_is_one_error_line(capsys, tmp_path, name):
    arguments, config_json, messages = BAD_INPUTS[name]
    if config_json is not None:
        (tmp_path / "config.json").write_text(config_json)
    arguments = [a.replace("{dir}", str(tmp_path)) for a in arguments]
    assert main(["plan", *arguments]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    for message in messages:
        assert message.replace("{dir}", str(tmp_path)) in err, err
    # Close names only, never the list of every preset.
    assert "xlm_roberta" not in err


def test_module_entry_point_runs_offline():
    env = dict(os.environ, KERAS_BACKEND="jax")
    result = subprocess.run(
        [sys.executable, "-m", "keras_nlp", "plan", "gemma2_2b_en"]
        + ["--mesh", "1x8", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["total_params"] == 2_614_341_888
    assert plan["num_fallbacks"] == 52  # 4 key/value heads on 8 devices


def test_mostly_replicated_plan_warns_with_meshes_that_divide(capsys):
    assert main(["plan", "gemma_2b_en", "--mesh", "1x3", "--json"]) == 0
    captured = capsys.readouterr()
    # The JSON on stdout stays clean; the warning goes to stderr.
    assert json.loads(captured.out)["replicated_bytes_fraction"] == 1.0
    err = captured.err
    assert err.startswith("warning: on mesh 1x3 (batch, model), 100% of the")
    assert "each device holds 3.00x the ideal (total / 3 devices)" in err
    assert "do not divide the 1x3 axis sizes" in err
    assert "Mesh shapes that divide it: 1x4 (ratio 1.02), 2x2" in err
    assert "1x2 (ratio 1.01)" in err


def test_plan_that_shards_does_not_warn(capsys):
    assert main(["plan", "gemma_2b_en", "--mesh", "1x2", "--json"]) == 0
    assert capsys.readouterr().err == ""


def test_absurd_mesh_is_an_error(capsys):
    assert main(["plan", "gemma_2b_en", "--mesh", "1x100000000000"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "error: The mesh 1x100000000000 (batch, model) has 100,000,000,000 "
        "devices; plans are made for at most 1,048,576."
    )


def test_three_sizes_give_an_expert_axis(capsys):
    plan = run_json(capsys, "mixtral_8_7b_en", "--mesh", "1x4x2")
    assert plan["mesh"] == {"batch": 1, "expert": 4, "model": 2}
    assert plan["expert_axis"] == "expert"
    weights = {w["path"]: w for w in plan["weights"]}
    gate = "transformer_layer_0/mixtral_sparse_moe_block/experts/"
    assert weights[gate + "expert_feedforward_gate_dense"]["spec"] == [
        "expert",
        "batch",
        "model",
    ]
    assert plan["memory_ratio"] < 1.001
    # The experts can also stay on the model axis.
    on_model = run_json(
        capsys, "mixtral_8_7b_en", "--mesh", "1x4x2", "--expert-axis", "model"
    )
    assert on_model["expert_axis"] is None
