"""Every preset's and pinned config's layout plan, against its golden.

For each class enrolled in `tests/models/tiny_configs.py`, every built-in
preset, tiny config and extra config (`EXTRA_CONFIGS` of the golden
script) is planned once per mesh of `MESHES`, without allocating. The plan
equals its golden in `tests/models/golden/plans/<Class>.json`; a preset's
plan also passes the shared efficiency checks, keeps what its class
promises (`PROMISES`) and counts the parameters keras-hub publishes
(`PUBLISHED_COUNTS`). A change to the planner, the rules, a preset, Keras
or JAX that moves a plan fails here with the weights it moved; when the
move is intended, regenerate the goldens with `make_plan_goldens.py`.

`WIDE_MESHES` holds rows for model axes wider than `MESHES`, where the
presets' heads or experts stop dividing."""

import functools
import json

import pytest

from tests.models.backbone_checks import MESHES
from tests.models.backbone_checks import RATIO_BOUND
from tests.models.backbone_checks import check_encoder_goals
from tests.models.backbone_checks import check_plan_is_efficient
from tests.models.backbone_checks import mesh_dict
from tests.models.golden.make_plan_goldens import COMMAND
from tests.models.golden.make_plan_goldens import PLANS
from tests.models.golden.make_plan_goldens import class_configs
from tests.models.golden.make_plan_goldens import expand
from tests.models.golden.make_plan_goldens import mesh_name
from tests.models.golden.make_plan_goldens import plan_axes
from tests.models.golden.make_plan_goldens import plan_entries
from tests.models.golden.make_plan_goldens import plan_totals
from tests.models.tiny_configs import TINY_CONFIGS
from tests.models.tiny_configs import backbone_class

pytestmark = pytest.mark.multi_device

# What a class's presets promise beyond `check_plan_is_efficient`, on every
# mesh: `encoder`, the encoder goals (`check_encoder_goals`); `whole`, no
# fallback at all; `ratio`, per-device parameters over the ideal at most
# this wherever nothing falls back.
_WHOLE = dict(whole=True, ratio=RATIO_BOUND)
PROMISES = {
    "AlbertBackbone": dict(encoder=True),
    "BartBackbone": dict(encoder=True),
    "BertBackbone": dict(encoder=True),
    "BloomBackbone": _WHOLE,
    "DebertaV3Backbone": dict(encoder=True),
    "DeepSeekV3Backbone": _WHOLE,
    "DistilBertBackbone": dict(encoder=True),
    "ElectraBackbone": dict(encoder=True),
    "FNetBackbone": dict(encoder=True, whole=True),
    "FalconBackbone": _WHOLE,
    # Heads that a model axis does not divide fall back (GPT-2's 25, OPT's
    # 12, Qwen's 14 and 28, Gemma 3's 4 on 8).
    "GPT2Backbone": dict(ratio=RATIO_BOUND),
    "GPTNeoXBackbone": _WHOLE,
    "Gemma3Backbone": dict(ratio=RATIO_BOUND),
    "Gemma4Backbone": _WHOLE,
    "GemmaBackbone": {},
    "GptOssBackbone": _WHOLE,
    "Llama3Backbone": _WHOLE,
    "Llama4Backbone": _WHOLE,
    "LlamaBackbone": _WHOLE,
    "MistralBackbone": _WHOLE,
    "MixtralBackbone": _WHOLE,
    "OPTBackbone": dict(ratio=RATIO_BOUND),
    "PaliGemmaBackbone": dict(whole=True, ratio=1.005),
    "Phi3Backbone": _WHOLE,
    "Qwen3Backbone": _WHOLE,
    "Qwen3MoeBackbone": _WHOLE,
    "Qwen3_5Backbone": _WHOLE,
    "Qwen3_5MoeBackbone": _WHOLE,
    "QwenBackbone": dict(ratio=RATIO_BOUND),
    "QwenMoeBackbone": _WHOLE,
    "RobertaBackbone": dict(encoder=True),
    "SmolLM3Backbone": _WHOLE,
    "T5Backbone": _WHOLE,
    # Heads that a model axis does not divide (the 2B's 4 key/value heads
    # on 8, T5Gemma 2's single one) put the kernels' hidden over both axes.
    "T5Gemma2Backbone": dict(ratio=RATIO_BOUND),
    "T5GemmaBackbone": dict(ratio=RATIO_BOUND),
    "WhisperBackbone": dict(encoder=True),
    "XLMRobertaBackbone": dict(encoder=True),
}
CASES = [
    (name, kind, case)
    for name in sorted(TINY_CONFIGS)
    for kind, cases in (
        ("presets", backbone_class(name).presets),
        ("configs", class_configs(name)),
    )
    for case in cases
]
# Parameter counts that keras-hub publishes for its presets (its
# metadata), as the plans count them; decoders' are in
# `test_backbone_table.PRESETS`.
PUBLISHED_COUNTS = {
    "bart_base_en": 139_417_344,
    "bart_large_en": 406_287_360,
    # keras-hub gives bart_large_en's count, for a vocabulary one smaller.
    "bart_large_en_cnn": 406_287_360 - 1024,
    # keras-hub leaves out the fixed encoder positions (1500 x 384).
    "whisper_tiny_en": 37_184_256 + 576_000,
    # keras-hub's 124,439,808 is no count of its config.
    "whisper_base_en": 72_593_408,
    "whisper_small_en": 241_734_144,
    "whisper_medium_en": 763_856_896,
    "whisper_tiny_multi": 37_760_640,
    "whisper_base_multi": 72_593_920,
    "whisper_small_multi": 241_734_912,
    "whisper_medium_multi": 763_857_920,
    "whisper_large_multi": 1_543_304_960,
    "whisper_large_multi_v2": 1_543_304_960,
    # T5 1.1's small and large count a tied embedding.
    "t5_small_multi": 60_506_624,
    "t5_base_multi": 222_903_552,
    "t5_large_multi": 737_668_096,
    "t5_1.1_small": 60_511_616,
    "t5_1.1_base": 247_577_856,
    "t5_1.1_large": 750_251_008,
    "t5_1.1_xl": 2_849_757_184,
    "t5_1.1_xxl": 11_135_332_352,
    "flan_small_multi": 76_961_152,
    "flan_base_multi": 247_577_856,
    "flan_large_multi": 783_150_080,
    # T5Gemma: two untied token tables, as keras-hub counts them.
    "t5gemma_s_s_ul2": 312_517_632,
    "t5gemma_b_b_ul2": 591_490_560,
    "t5gemma_l_l_ul2": 1_241_761_792,
    "t5gemma_xl_xl_ul2": 3_766_980_608,
    "t5gemma_2b_2b_ul2": 5_596_853_760,
    "t5gemma_9b_2b_ul2": 12_292_375_296,
    "t5gemma_9b_9b_ul2": 20_333_401_088,
    # T5Gemma 2: keras-hub's counts with its vision tower, which is not
    # built here: a 416,866,032-parameter SigLIP encoder, its projection
    # to the hidden width (1152 x hidden + 1152) and in the 4B two
    # end-of-image embeddings (2 x hidden).
    "t5gemma2_270m_270m": 953_800_816 - 416_866_032 - (1152 * 640 + 1152),
    "t5gemma2_1b_1b": 2_417_966_192 - 416_866_032 - (1152 * 1152 + 1152),
    "t5gemma2_4b_4b": (
        8_180_020_080 - 416_866_032 - (1152 * 2560 + 1152) - 2 * 2560
    ),
}
# Differences a failure lists, at most.
SHOWN = 12


@functools.cache
def golden(name):
    return json.loads((PLANS / f"{name}.json").read_text())


def _show(entry):
    if entry is None:
        return "(no such weight)"
    shape, record = entry
    if shape is None:  # a cache: [kv_heads, head_dim, spec, reason]
        return f"{record[:2]} {record[2]}: {record[3]}"
    return f"{shape} {record[0]} {record[1]}: {record[2]}"


def assert_plan_equals_golden(plan, entry, mesh, where):
    """The plan's weights, caches, axes and totals on `mesh` equal the
    golden's; a failure lists what moved, weights first, in model order."""
    changes = []
    for section, actual in zip(
        ("weights", "kv_caches"), plan_entries(plan), strict=True
    ):
        expected = expand(entry.get(section, {}), mesh)
        for path in [*actual, *(p for p in expected if p not in actual)]:
            if expected.get(path) != actual.get(path):
                changes.append(
                    f"{path}\n    golden: {_show(expected.get(path))}"
                    f"\n    now:    {_show(actual.get(path))}"
                )
    for section, actual, expected in (
        ("axes", plan_axes(plan), entry["axes"]),
        ("totals", plan_totals(plan), entry["totals"][mesh]),
    ):
        if actual != expected:
            changes.append(
                f"{section}\n    golden: {expected}\n    now:    {actual}"
            )
    if changes:
        pytest.fail(
            f"{where} on {mesh}: {len(changes)} difference(s) from "
            f"{PLANS.relative_to(PLANS.parents[3])}/{plan.backbone}.json, "
            f"the first {min(len(changes), SHOWN)}:\n"
            + "\n".join(changes[:SHOWN])
            + "\nIf the plans are meant to change, regenerate the goldens "
            f"and review their diff: {COMMAND} {plan.backbone}",
            pytrace=False,
        )


@pytest.mark.parametrize("mesh_shape", MESHES, ids=mesh_name)
@pytest.mark.parametrize(
    "backbone, kind, case", CASES, ids=[f"{n}-{c}" for n, _, c in CASES]
)
def test_plan_equals_its_golden(backbone, kind, case, mesh_shape):
    entry = golden(backbone)[kind].get(case)
    assert entry is not None, (
        f"{backbone} {case} has no golden plan: run {COMMAND} {backbone}"
    )
    # A config's golden holds the config it was planned for.
    source = (
        {"preset": case} if kind == "presets" else {"config": entry["config"]}
    )
    plan = backbone_class(backbone).plan_layout(mesh_dict(mesh_shape), **source)
    assert_plan_equals_golden(plan, entry, mesh_name(mesh_shape), case)
    if kind != "presets":
        return
    check_plan_is_efficient(plan, mesh_shape)
    promises = PROMISES[backbone]
    if promises.get("encoder"):
        check_encoder_goals(plan, mesh_shape)
    if promises.get("whole"):
        assert plan.fallbacks == (), [w.path for w in plan.fallbacks][:5]
    if "ratio" in promises and not plan.fallbacks:
        assert plan.memory_ratio <= promises["ratio"], plan.memory_ratio
    if case in PUBLISHED_COUNTS:
        assert plan.total_params == PUBLISHED_COUNTS[case]


def test_goldens_hold_every_preset_and_config_on_every_mesh():
    stale = []
    for name in sorted(TINY_CONFIGS):
        plans = golden(name)
        for kind, cases in (
            ("presets", backbone_class(name).presets),
            ("configs", class_configs(name)),
        ):
            if set(plans[kind]) != set(cases):
                stale.append(f"{name} {kind}: {sorted(plans[kind])}")
            for case, entry in plans[kind].items():
                meshes = sorted(entry["totals"])
                if meshes != sorted(mesh_name(m) for m in MESHES):
                    stale.append(f"{name} {case}: {meshes}")
    assert not stale, f"Stale goldens, run {COMMAND}: {stale}"
    assert sorted(p.stem for p in PLANS.glob("*.json")) == sorted(TINY_CONFIGS)


EXPERTS = "transformer_layer_0/mixtral_sparse_moe_block/experts/"
KEY = "transformer_layer_0/self_attention/key/kernel"
# (class, preset or extra config, model axis size, weight, spec, decision,
# words its reason must have).
WIDE_MESHES = [
    # 16 key/value heads divide 16; gemma_2b_en's one does not (golden).
    (
        "GemmaBackbone",
        "gemma_7b_en",
        16,
        "decoder_block_0/attention/key/kernel",
        ("model", "batch", None),
        "sharded",
        "rule",
    ),
    # 8 key/value heads on 16: replicated along 'model'; 32 query heads
    # still shard.
    *[
        (
            name,
            preset,
            16,
            KEY,
            ("batch", None, None),
            "fallback",
            "dim 1 (kv_heads, size 8) is not divisible by 'model' (size 16)",
        )
        for name, preset in [
            ("Llama3Backbone", "llama3_8b_en"),
            ("MistralBackbone", "mistral_7b_en"),
            ("Qwen3Backbone", "qwen3_8b_en"),
        ]
    ],
    (
        "Qwen3Backbone",
        "qwen3_8b_en",
        16,
        KEY.replace("key", "query"),
        ("batch", "model", None),
        "sharded",
        "rule",
    ),
    # 8 experts on 16: the feed-forward width takes the model axis.
    *[
        (
            "MixtralBackbone",
            "mixtral_8_7b_en",
            16,
            EXPERTS + f"expert_feedforward_{name}",
            spec,
            "alternative",
            "dim 0 (experts, size 8) is not divisible by 'model' (size 16)",
        )
        for name, spec in [
            ("gate_dense", (None, "batch", "model")),
            ("intermediate_dense", (None, "batch", "model")),
            ("output_dense", (None, "model", "batch")),
        ]
    ],
    # 32 heads on 64 fall back; 32064 = 64 x 501 rows still shard.
    (
        "Phi3Backbone",
        "phi3_mini_4k_instruct_en",
        64,
        "transformer_layer_0/attention/key/kernel",
        ("batch", None, None),
        "fallback",
        "dim 1 (kv_heads, size 32) is not divisible by 'model' (size 64)",
    ),
    (
        "Phi3Backbone",
        "phi3_mini_4k_instruct_en",
        64,
        "token_embedding/embeddings",
        ("model", "batch"),
        "sharded",
        "rule",
    ),
    # The embedding head's 24-wide projection on 16.
    (
        "Gemma3Backbone",
        "tiny_embedding_head",
        16,
        "pooling_dense_1/kernel",
        ("batch", None),
        "fallback",
        "size 24) is not divisible by 'model' (size 16)",
    ),
]


@pytest.mark.parametrize(
    "backbone, case, model, path, spec, decision, reason", WIDE_MESHES
)
def test_wide_model_axes(backbone, case, model, path, spec, decision, reason):
    backbone_cls = backbone_class(backbone)
    mesh = {"batch": 1, "model": model}
    if case in backbone_cls.presets:
        plan = backbone_cls.plan_layout(mesh, preset=case)
    else:
        plan = backbone_cls.plan_layout(
            mesh, config=class_configs(backbone)[case]
        )
    weight = plan.weight(path)
    assert (weight.spec, weight.decision) == (spec, decision), weight.reason
    assert reason in weight.reason


# The largest presets, planned from their configs alone on 64 and 256
# devices, (batch, expert, model): bfloat16 bytes per device, and which
# axes split the caches' length (DeepSeek-V3's latent has no heads to
# split; Llama 4's 8 key/value heads take the model axis). Times and RSS:
# benchmarks/plan_cost.md.
LARGE_PLANS = [
    ("deepseek_v3_671b", "1x8x8", 671_026_419_200, 20_994_868_224, ("model",)),
    ("deepseek_v3_671b", "4x8x8", 671_026_419_200, 5_250_249_216, ("model",)),
    ("llama4_maverick_17b_128e", "1x8x8", 400_711_848_960, 12_554_188_800, ()),
    ("llama4_maverick_17b_128e", "4x8x8", 400_711_848_960, 3_162_885_120, ()),
]


@pytest.mark.parametrize(
    "preset, mesh, params, bytes_per_device, cache_length_axes",
    LARGE_PLANS,
    ids=[f"{row[0]}-{row[1]}" for row in LARGE_PLANS],
)
def test_the_largest_presets_plan_from_their_configs_without_allocating(
    preset, mesh, params, bytes_per_device, cache_length_axes
):
    import resource

    import jax

    from keras_nlp.distribution import MeshShape
    from keras_nlp.models import Backbone

    arrays = len(jax.live_arrays())
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    plan = Backbone.plan_layout(
        MeshShape.parse(mesh), preset=preset, dtype="bfloat16"
    )
    assert plan.total_params == params
    assert plan.bytes_per_device == bytes_per_device
    assert plan.fallbacks == ()
    assert plan.memory_ratio <= 1.02
    assert {c.length_axes for c in plan.kv_caches} == {cache_length_axes}
    # Nothing allocated: one expert weight alone is gigabytes.
    assert len(jax.live_arrays()) <= arrays
    grown_gib = (
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss
    ) / 2**20
    assert grown_gib < 2, grown_gib
