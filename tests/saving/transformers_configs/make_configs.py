"""Writes the `config.json` files `transformers` writes, for our tests.

Two sets, read by `tests/saving/test_transformers_configs.py` without
`transformers`:

- `<model_type>.json`: for every Hugging Face `model_type` we load, the
  configuration class's defaults (and `VARIANTS`) saved by
  `save_pretrained`, i.e. what `transformers` writes to a checkpoint's
  `config.json` (its own fields, and base fields that differ from their
  defaults);
- `resaved_presets.json`: every built-in preset's `config.json` as our
  export writes it, then loaded and saved again by `transformers` (which
  checks each field's type strictly).

Run from the repository root when a family or preset is added or
`transformers` changes. The first and third steps need `transformers`
(without PyTorch: configurations need none), the second this package:

    pip install --no-deps "transformers==5.23.0" huggingface_hub tokenizers
    python tests/saving/transformers_configs/make_configs.py defaults
    python tests/saving/transformers_configs/make_configs.py export /tmp/x
    python tests/saving/transformers_configs/make_configs.py resave /tmp/x
"""

import json
import pathlib
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
RESAVED = HERE / "resaved_presets.json"
MODEL_TYPES = (
    "albert bart bert bloom deepseek_v3 distilbert falcon gemma gemma2 gemma3 "
    "gemma3_text gemma4 gemma4_text gpt2 gpt_neox gpt_oss llama llama4 "
    "llama4_text mistral mixtral opt paligemma phi3 qwen2 qwen2_moe qwen3 "
    "qwen3_5 qwen3_5_moe qwen3_5_moe_text qwen3_5_text qwen3_moe roberta "
    "smollm3 t5gemma t5gemma2 xlm-roberta"
).split()
# Options the defaults leave out, as `<model_type>__<variant>`: Gemma 4's
# mixture of experts with global key/value heads of their own (26B-A4B's
# form; transformers folds them into `per_layer_config`).
VARIANTS = {
    "gemma4_text__moe": dict(
        enable_moe_block=True,
        num_experts=8,
        top_k_experts=2,
        moe_intermediate_size=64,
        attention_k_eq_v=True,
        num_global_key_value_heads=1,
        global_head_dim=512,
    ),
}


def write_defaults():
    import transformers

    for name in (*MODEL_TYPES, *VARIANTS):
        model_type = name.split("__")[0]
        config = transformers.AutoConfig.for_model(
            model_type, **VARIANTS.get(name, {})
        )
        with tempfile.TemporaryDirectory() as directory:
            config.save_pretrained(directory)
            data = json.loads(
                (pathlib.Path(directory) / "config.json").read_text()
            )
        path = HERE / f"{name}.json"
        path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(
            f"wrote {path.name} (transformers {data['transformers_version']})"
        )


def write_exports(directory):
    sys.path.insert(0, str(HERE.parents[2]))
    from tests.saving.test_transformers_configs import preset_exports

    directory = pathlib.Path(directory)
    for preset, (_, data) in preset_exports().items():
        (directory / preset).mkdir(parents=True, exist_ok=True)
        (directory / preset / "config.json").write_text(json.dumps(data))
    print(f"exported {len(list(directory.iterdir()))} presets to {directory}")


def resave(directory):
    import transformers

    found = {}
    for preset in sorted(pathlib.Path(directory).iterdir()):
        config = transformers.AutoConfig.from_pretrained(str(preset))
        with tempfile.TemporaryDirectory() as again:
            config.save_pretrained(again)
            found[preset.name] = json.loads(
                (pathlib.Path(again) / "config.json").read_text()
            )
    RESAVED.write_text(json.dumps(found, sort_keys=True, indent=0) + "\n")
    print(f"wrote {RESAVED.name}: {len(found)} presets")


if __name__ == "__main__":
    step, *rest = sys.argv[1:] or ["defaults"]
    {"defaults": write_defaults, "export": write_exports, "resave": resave}[
        step
    ](*rest)
