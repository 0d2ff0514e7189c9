"""`python -m keras_nlp plan`: the main job, offline, on built-in presets."""

import io
import json
import os
import subprocess
import sys

import pytest
from rich.console import Console

from keras_nlp.cli import main
from keras_nlp.cli import preset_parameter_count
from keras_nlp.distribution import MeshShape
from keras_nlp.models import Backbone

KV = "decoder_block_0/attention/key/kernel"


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


def test_table_output_folds_blocks_and_prints_totals(capsys):
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
    # A wide console gets the full table with shapes and counts.
    wide = Console(width=160, record=True, file=io.StringIO())
    plan.print(console=wide)
    wide_text = wide.export_text()
    assert "┃ shard " in wide_text and "┃ x " in wide_text


def test_preset_parameter_count_equals_the_full_plan():
    for preset in ("gemma_2b_en", "albert_base_en_uncased", "t5_small_multi"):
        owner, config = Backbone._preset_config(preset)
        full = owner.plan_layout({"batch": 1, "model": 1}, preset=preset)
        assert preset_parameter_count(owner, config) == full.total_params


def test_strict_fails_with_the_reason(capsys):
    assert main(["plan", "gemma_2b_en", "--mesh", "1x2", "--strict"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: strict=True: 36 GemmaBackbone weight(s)")
    assert "axis sizes that divide 1: 1" in err
    # The fix in CLI words.
    assert "drop --strict to accept" in err
    assert "strict=False" not in err


def test_bad_mesh_and_preset_are_clear_errors(capsys):
    assert main(["plan", "gemma_2b_en", "--mesh", "two"]) == 2
    assert "Could not read the mesh shape 'two'" in capsys.readouterr().err
    assert main(["plan", "gema_2b_en", "--mesh", "1x2"]) == 2
    err = capsys.readouterr().err
    assert "Unknown preset 'gema_2b_en'" in err
    assert "Did you mean 'gemma_2b_en'" in err
    assert "--list" in err
    # Close names, not every preset.
    assert "xlm_roberta" not in err
    assert main(["plan", "--mesh", "1x2"]) == 2
    assert "plan needs a preset and --mesh" in capsys.readouterr().err


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
