"""Collectives of Qwen 3.5's fused `in_proj_qkv`: split by columns or not.

keras-hub and Hugging Face store the linear attention's fused projection
as all query heads, then all key heads, then all value heads. Our rules
split its columns over the model axis as they lie (whole heads on each
device, the convolution's channels with them); the alternative, measured
beside it in the same run, keeps its columns whole and splits its hidden
dimension over both axes (an all-reduce of its output per linear block).
For a scaled-down config with 3 linear blocks and 1 full-attention block
(head sizes 64), on 8 fake CPU devices, this compiles the forward pass
under each and reads the collectives from the compiled HLO.

Run: python benchmarks/fused_qkv_split.py [--mesh 1x8 2x4]
"""

import argparse

if __name__ == "__main__":
    from _sharded_configs import setup_devices

    setup_devices()

CONFIG = dict(
    vocabulary_size=1024,
    num_layers=4,
    num_query_heads=8,
    num_key_value_heads=8,
    head_dim=64,
    hidden_dim=512,
    intermediate_dim=1024,
    layer_types=["linear_attention"] * 3 + ["full_attention"],
    sliding_window_size=None,
    linear_num_key_heads=8,
    linear_num_value_heads=16,
    linear_key_head_dim=64,
    linear_value_head_dim=64,
)
BATCH, SEQUENCE = 8, 64


def columns_whole_rules(config):
    """Our rules, but the fused kernel's columns (and the convolution)
    whole: its hidden dimension over both axes."""
    from keras_nlp.distribution.rules import DATA
    from keras_nlp.distribution.rules import MODEL
    from keras_nlp.layers.gated_delta_net import CONV_DIMS
    from keras_nlp.layers.gated_delta_net import QKV_DIMS
    from keras_nlp.layers.layout_rules import named_rule
    from keras_nlp.models.qwen3_5 import qwen3_5_backbone as module

    linear = module.BLOCK + module.MIXER_NAMES["linear_attention"] + "/"
    replaced = (linear + "in_proj_qkv/kernel", linear + "conv1d_kernel")
    rules = [
        rule
        for rule in module.Qwen3_5Backbone._layout_rules(config)
        if rule[0] not in replaced
    ]
    return [
        named_rule(replaced[0], QKV_DIMS, {"hidden": (DATA, MODEL)}),
        named_rule(replaced[1], CONV_DIMS, {}),
        *rules,
    ]


def measure(mesh_shape, rules=None):
    import jax
    import numpy as np
    from _sharded_configs import build
    from _sharded_configs import device_mesh
    from collectives import collective_stats

    from keras_nlp.models import Qwen3_5Backbone

    mesh = device_mesh(mesh_shape)
    cls = Qwen3_5Backbone
    if rules is not None:
        cls = type("ColumnsWhole", (Qwen3_5Backbone,), {})
        cls._layout_rules = staticmethod(rules)
    layout_map = cls.get_layout_map(mesh, config=CONFIG)
    backbone, distribution = build(cls, CONFIG, layout_map)
    token_ids = np.random.default_rng(0).integers(0, 1024, (BATCH, SEQUENCE))
    inputs = {
        "token_ids": token_ids.astype("int32"),
        "padding_mask": np.ones((BATCH, SEQUENCE), "int32"),
    }
    trainable = [v.value for v in backbone.trainable_variables]
    fixed = [v.value for v in backbone.non_trainable_variables]

    def forward(trainable, fixed, inputs):
        return backbone.stateless_call(trainable, fixed, inputs)[0]

    with distribution.scope():
        text = jax.jit(forward).lower(trainable, fixed, inputs).compile()
    stats = collective_stats(text.as_text())
    total = sum(s.bytes for s in stats.values())
    return stats, total, layout_map.plan.memory_ratio


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mesh", nargs="+", default=["1x8", "2x4"])
    args = parser.parse_args()
    print(
        "| mesh | fused projection | collectives (count, MiB) "
        "| total MiB | memory / ideal |"
    )
    print("|---|---|---|---:|---:|")
    for name in args.mesh:
        shape = tuple(int(size) for size in name.split("x"))
        results = {}
        for label, rules in (
            ("columns over model (ours)", None),
            ("columns whole, hidden over both", columns_whole_rules),
        ):
            stats, total, ratio = measure(shape, rules)
            results[label] = total
            cells = ", ".join(
                f"{kind} {s.count} / {s.bytes / 2**20:.1f}"
                for kind, s in stats.items()
                if s.count
            )
            print(
                f"| {name} | {label} | {cells} | {total / 2**20:.1f} "
                f"| {ratio:.4f} |"
            )
        ours, other = results.values()
        print(f"| {name} | ratio ours / alternative | | {ours / other:.2f} | |")


if __name__ == "__main__":
    main()
