"""Writes plans/<Class>.json: the layout plans `test_preset_plans.py` diffs.

For each class enrolled in `tests/models/tiny_configs.py`, the plans of
every built-in preset, every tiny config and the configs of
`EXTRA_CONFIGS` below, on each mesh of `backbone_checks.MESHES`: per
weight its shape and, per mesh, its spec, decision and reason; per mesh
the plan's totals; its key/value cache layouts. A config's entry holds the
config, so editing `tiny_configs.py` moves no golden until this runs
again. Run it from the repository root when a change to the planner, the
rules, the presets, Keras or JAX moves a plan, and review the diff:

    python tests/models/golden/make_plan_goldens.py [ClassName ...]

The format, kept small: blocks alike are written once,
`decoder_block_{0-5,7}/ffw_linear/kernel` standing for blocks 0 to 5 and
7, with `{i}` in a reason for the block's own index; meshes alike too,
`"1x2 2x4": [spec, decision, reason]`, or `"*"` for every mesh. A path
held by two weights (T5's relative attention biases) is written `path#2`
the second time."""

import json
import os
import pathlib
import re
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
HERE = pathlib.Path(__file__).resolve().parent
PLANS = HERE / "plans"
COMMAND = "python tests/models/golden/make_plan_goldens.py"
sys.path.insert(0, str(HERE.parents[2]))

from tests.models.backbone_checks import MESHES  # noqa: E402
from tests.models.backbone_checks import mesh_dict  # noqa: E402
from tests.models.tiny_configs import TINY_CONFIGS  # noqa: E402
from tests.models.tiny_configs import backbone_class  # noqa: E402

BLOCK = re.compile(r"_(\d+)/")
RANGES = re.compile(r"_\{([\d,-]+)\}/")
ALL_MESHES = "*"
# Configs pinned besides the presets and tiny configs: name -> (a preset
# or tiny config of the class, or None, and the options it changes).
_XLNET = dict(vocabulary_size=32000, num_heads=12, hidden_dim=768)
_FALCON_7B = dict(
    vocabulary_size=65024,
    num_layers=32,
    num_attention_heads=71,
    hidden_dim=4544,
    intermediate_dim=18176,
    num_key_value_heads=1,
    rotary_max_wavelength=10000.0,
    parallel_residual=True,
    shared_layer_norm=True,
    use_bias=False,
)
EXTRA_CONFIGS = {
    # tiiuae/falcon-7b's single key/value head and 71 query heads, and
    # falcon-40b's 128:8 heads with a norm per branch.
    "FalconBackbone": {
        "falcon_7b": (None, _FALCON_7B),
        "falcon_40b": (
            None,
            dict(
                _FALCON_7B,
                num_layers=60,
                num_attention_heads=128,
                hidden_dim=8192,
                intermediate_dim=32768,
                num_key_value_heads=8,
                shared_layer_norm=False,
            ),
        ),
    },
    "FNetBackbone": {"f_net_base_lora_8": ("f_net_base_en", {"lora_rank": 8})},
    # The embedding head's projections: 24 wide, which 16 does not divide.
    "Gemma3Backbone": {
        "tiny_embedding_head": (
            "tiny",
            dict(
                is_embedding_model=True,
                pooling_intermediate_dim=24,
                embedding_dim=16,
            ),
        )
    },
    # Adapters on the fused query/key/value kernel; Pythia's own untied
    # output projection (`embed_out`).
    "GPTNeoXBackbone": {
        "pythia_1.4b_lora_8": ("pythia_1.4b_en", {"lora_rank": 8}),
        "pythia_410m_untied": (
            "pythia_410m_en",
            {"tie_word_embeddings": False},
        ),
    },
    # Only the kinds of blocks a config has get rules (a rule that matches
    # nothing raises).
    "QwenMoeBackbone": {
        "all_dense": (
            "e60_top4_mha_16_16_dense_first",
            {"mlp_only_layers": [0, 1]},
        ),
        "all_sparse": (
            "e60_top4_mha_16_16_dense_first",
            {"mlp_only_layers": []},
        ),
    },
    "Qwen3MoeBackbone": {
        "all_dense": (
            "e16_top8_gqa_32_4_sparse_step_2",
            {"decoder_sparse_step": 3},
        ),
    },
    # keras-hub has no XLNet preset: the base and large architectures.
    "XLNetBackbone": {
        "xlnet_base_like": (
            None,
            dict(_XLNET, num_layers=12, intermediate_dim=3072),
        ),
        "xlnet_large_like": (
            None,
            dict(
                _XLNET,
                num_layers=24,
                num_heads=16,
                hidden_dim=1024,
                intermediate_dim=4096,
            ),
        ),
    },
}


def mesh_name(mesh_shape):
    return "x".join(str(size) for size in mesh_shape)


def _spec(spec):
    return [list(e) if isinstance(e, tuple) else e for e in spec]


def plan_entries(plan):
    """`{path: (shape, record)}` of a plan's weights, and of its caches.

    A weight's record is `[spec, decision, reason]` (and its dtype when a
    plan has several); a cache's `[kv_heads, head_dim, spec, reason]`.
    """
    several = len(plan.dtypes) > 1
    weights, seen = {}, {}
    for w in plan.weights:
        seen[w.path] = seen.get(w.path, 0) + 1
        path = w.path if seen[w.path] == 1 else f"{w.path}#{seen[w.path]}"
        record = [_spec(w.spec), w.decision, w.reason]
        weights[path] = (list(w.shape), record + [w.dtype] * several)
    caches = {
        c.path: (None, [c.kv_heads, c.head_dim, _spec(c.spec), c.reason])
        for c in plan.kv_caches
    }
    return weights, caches


def plan_totals(plan):
    return {
        "dtypes": plan.dtypes,
        "memory_ratio": round(plan.memory_ratio, 6),
        "num_fallbacks": len(plan.fallbacks),
        "params_per_device": plan.params_per_device,
        "total_bytes": plan.total_bytes,
        "total_params": plan.total_params,
    }


def plan_axes(plan):
    return {
        "data": plan.data_axis,
        "expert": plan.expert_axis,
        "fsdp": plan.fsdp_axis,
        "model": plan.model_axis,
        "policy": plan.policy,
        "tokens_per_step": plan.tokens_per_step,
    }


def _ranges(indices):
    """`[0, 1, 2, 5]` -> `"0-2,5"`."""
    parts, start = [], indices[0]
    for i, index in enumerate(indices):
        if i + 1 == len(indices) or indices[i + 1] != index + 1:
            parts.append(f"{start}" if start == index else f"{start}-{index}")
            if i + 1 < len(indices):
                start = indices[i + 1]
    return ",".join(parts)


def _indices(ranges):
    indices = []
    for part in ranges.split(","):
        first, _, last = part.partition("-")
        indices += range(int(first), int(last or first) + 1)
    return indices


def _by_mesh(records):
    """`{mesh: record}` -> `{"mesh mesh": record}`, meshes alike joined."""
    joined = {}
    for mesh, record in records.items():
        joined.setdefault(json.dumps(record), []).append(mesh)
    if len(joined) == 1:
        return {ALL_MESHES: records[next(iter(records))]}
    return {
        " ".join(meshes): json.loads(text) for text, meshes in joined.items()
    }


def group(per_mesh):
    """`{mesh: {path: (shape, record)}}` -> `{key: {meshes: record}}`.

    Paths that differ only by their first block index and whose records
    are alike on every mesh (the block's own path in a reason written
    `{i}`) share one key.
    """
    paths = {
        path: entry[0]
        for entries in per_mesh.values()
        for path, entry in entries.items()
    }
    groups = {}
    for path, shape in paths.items():
        records = {
            mesh: entries[path][1] if path in entries else None
            for mesh, entries in per_mesh.items()
        }
        text = json.dumps([shape, _by_mesh(records)])
        match = BLOCK.search(path)
        if match is None:
            groups[(path, text)] = None
            continue
        stem, rest = path[: match.start() + 1], path[match.end() - 1 :]
        text = text.replace(f"{stem}{match.group(1)}/", f"{stem}{{i}}/")
        groups.setdefault((stem, rest, text), []).append(int(match.group(1)))
    grouped = {}
    for key, indices in groups.items():
        if indices is None:
            path, text = key
        else:
            stem, rest, text = key
            path = f"{stem}{{{_ranges(sorted(indices))}}}{rest}"
        shape, records = json.loads(text)
        grouped[path] = dict(
            records, **({"shape": shape} if shape is not None else {})
        )
    return grouped


def expand(grouped, mesh):
    """`{key: {meshes: record}}` -> `{path: (shape, record)}` on `mesh`."""
    entries = {}
    for key, value in grouped.items():
        record = next(
            (
                r
                for m, r in value.items()
                if m == ALL_MESHES or mesh in m.split()
            ),
            None,
        )
        if record is None:
            continue
        shape = value.get("shape")
        match = RANGES.search(key)
        if match is None:
            entries[key] = (shape, record)
            continue
        stem, rest = key[: match.start() + 1], key[match.end() - 1 :]
        text = json.dumps(record)
        for i in _indices(match.group(1)):
            named = text.replace(f"{stem}{{i}}/", f"{stem}{i}/")
            entries[f"{stem}{i}{rest}"] = (shape, json.loads(named))
    return entries


def case_golden(backbone_cls, source):
    """The golden of one preset or config: its plans on every mesh."""
    weights, caches, totals = {}, {}, {}
    for mesh_shape in MESHES:
        plan = backbone_cls.plan_layout(mesh_dict(mesh_shape), **source)
        mesh = mesh_name(mesh_shape)
        weights[mesh], caches[mesh] = plan_entries(plan)
        totals[mesh] = Inline(plan_totals(plan))
        axes = Inline(plan_axes(plan))
    golden = {"axes": axes, "totals": totals, "weights": group(weights)}
    if any(caches.values()):
        golden["kv_caches"] = group(caches)
    for mesh in weights:
        assert expand(golden["weights"], mesh) == weights[mesh], mesh
        assert expand(golden.get("kv_caches", {}), mesh) == caches[mesh]
    return golden


def class_configs(name):
    """Name -> config of every tiny config and extra config of a class."""
    backbone_cls = backbone_class(name)
    configs = dict(TINY_CONFIGS[name].configs)
    for config_name, (base, options) in EXTRA_CONFIGS.get(name, {}).items():
        assert config_name not in configs, config_name
        if base in backbone_cls.presets:
            base = backbone_cls.presets[base]
        elif base is not None:
            base = configs[base]
        configs[config_name] = dict(base or {}, **options)
    return json.loads(json.dumps(configs))


def class_golden(name):
    backbone_cls = backbone_class(name)
    configs = class_configs(name)
    return {
        "_about": (
            f"{name}'s layout plans on each mesh, written by `{COMMAND}`; "
            "its docstring says how to read them."
        ),
        "backbone": name,
        "presets": {
            preset: case_golden(backbone_cls, {"preset": preset})
            for preset in backbone_cls.presets
        },
        "configs": {
            config_name: dict(
                config=config,
                **case_golden(backbone_cls, {"config": config}),
            )
            for config_name, config in configs.items()
        },
    }


class Inline(dict):
    """A dict `_dump` writes on one line."""


def _dump(value, indent=0):
    """JSON with a line per dict key; lists and scalars on one line."""
    if not isinstance(value, dict) or not value or isinstance(value, Inline):
        return json.dumps(value, sort_keys=True)
    pad = " " * (indent + 1)
    items = [
        f"{pad}{json.dumps(key)}: {_dump(value[key], indent + 1)}"
        for key in sorted(value)
    ]
    return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"


def main(names):
    PLANS.mkdir(exist_ok=True)
    for name in names or sorted(TINY_CONFIGS):
        path = PLANS / f"{name}.json"
        path.write_text(_dump(class_golden(name)) + "\n")
        print(f"wrote {path} ({path.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main(sys.argv[1:])
