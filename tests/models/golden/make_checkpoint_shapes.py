"""Writes checkpoint_shapes.json: keras-hub checkpoint paths and shapes.

The source is the shared reference `checkpoint_shapes.json` (keras-hub
0.32.0 backbones built with each preset's config and `num_layers=1`, keras
3.15.1, jax 0.10.2, CPU; see its `_about`). Only the presets of classes
enrolled in `tests/models/tiny_configs.py` are kept, as `{preset: {"class",
"config", "shapes": {path: shape}}}`, plus `"repeated_paths": {path:
count}` where keras-hub gives one path to several variables; `config` is
keras-hub's, without `num_layers`. Run from the repository root when a
class is enrolled:

    python tests/models/golden/make_checkpoint_shapes.py \
        ../shared/reference/checkpoint_shapes.json
"""

import json
import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent
# Paths keras-hub gives to more than one variable, and how many: the
# reference lists each path once. T5 makes its encoder's and decoder's
# relative attention biases outside their layers' name scopes.
REPEATED_PATHS = {"T5Backbone": {"self_attention/embeddings": 2}}
sys.path.insert(0, str(HERE.parents[2]))

from tests.models.tiny_configs import TINY_CONFIGS  # noqa: E402


def main(source):
    reference = json.loads(pathlib.Path(source).read_text())
    presets = {}
    for preset, entry in sorted(reference["models"].items()):
        if entry["class"] not in TINY_CONFIGS:
            continue
        config = dict(entry["config"])
        config.pop("num_layers")
        presets[preset] = {
            "class": entry["class"],
            "config": config,
            "shapes": {
                path: shape for path, shape in entry["variables_num_layers_1"]
            },
        }
        if entry["class"] in REPEATED_PATHS:
            presets[preset]["repeated_paths"] = REPEATED_PATHS[entry["class"]]
    golden = {
        "_about": (
            "Variable path -> shape of keras-hub 0.32.0 backbones built "
            "with each preset's config and num_layers=1 (keras 3.15.1, jax "
            "0.10.2, CPU), copied from the shared reference "
            "checkpoint_shapes.json by tests/models/golden/"
            "make_checkpoint_shapes.py for the enrolled classes only."
        ),
        "presets": presets,
    }
    text = json.dumps(golden, indent=1)
    # One line per shape: `[2048, 8, 64]`.
    text = re.sub(
        r"\[\s+([\d,\s]+?)\s+\]",
        lambda match: (
            "[" + ", ".join(match.group(1).split()).replace(",,", ",") + "]"
        ),
        text,
    )
    path = HERE / "checkpoint_shapes.json"
    path.write_text(text + "\n")
    print(f"wrote {len(presets)} presets to {path}")


if __name__ == "__main__":
    main(sys.argv[1])
