"""Command line: `python -m keras_nlp plan PRESET --mesh 1x2`."""

import argparse
import importlib.util
import os
import sys


def _parser():
    parser = argparse.ArgumentParser(
        prog="python -m keras_nlp",
        description="keras_nlp tools. Nothing is downloaded or allocated.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    plan = commands.add_parser(
        "plan",
        help="show where every weight of a preset goes on a device mesh",
        description=(
            "Resolve a preset's layout rules (a built-in preset, or a "
            "preset directory's config.json) against its real "
            "variable shapes on a mesh of the given shape (no devices are "
            "needed) and print the plan: per weight its shape, spec, shard "
            "shape and the reason for the decision, then the totals."
        ),
    )
    plan.add_argument(
        "preset",
        help="a built-in preset, e.g. gemma_2b_en, or a preset directory",
    )
    plan.add_argument(
        "--mesh",
        required=True,
        help="mesh shape, one size per axis joined by 'x', e.g. 1x2",
    )
    plan.add_argument(
        "--axis-names",
        default="batch,model",
        help="comma-separated mesh axis names (default: batch,model)",
    )
    plan.add_argument(
        "--model-axis", default="model", help="axis for tensor parallelism"
    )
    plan.add_argument(
        "--data-axis",
        default="batch",
        help="axis that also shards weights FSDP-style; 'none' for none",
    )
    plan.add_argument(
        "--dtype", default=None, help="dtype to count bytes in, e.g. bfloat16"
    )
    plan.add_argument(
        "--strict",
        action="store_true",
        help="fail instead of replicating a weight whose rule cannot apply",
    )
    plan.add_argument(
        "--json", action="store_true", help="print the plan as one JSON object"
    )
    plan.add_argument(
        "--lora-rank",
        type=int,
        default=None,
        help="also plan LoRA adapters of this rank on the default targets",
    )
    plan.add_argument(
        "--all",
        action="store_true",
        help="list every weight instead of folding repeated blocks",
    )
    return parser


def _plan(args):
    from keras_nlp.distribution import MeshShape
    from keras_nlp.models import Backbone

    axis_names = tuple(name.strip() for name in args.axis_names.split(","))
    mesh = MeshShape.parse(args.mesh, axis_names)
    data_axis = None if args.data_axis.lower() == "none" else args.data_axis
    plan = Backbone.plan_layout(
        mesh,
        preset=args.preset,
        model_parallel_dim_name=args.model_axis,
        data_parallel_dim_name=data_axis,
        strict=args.strict,
        dtype=args.dtype,
        lora_rank=args.lora_rank,
    )
    if args.json:
        print(plan.to_json())
    else:
        from rich.console import Console

        # Pipes and files get wide lines instead of wrapped weight paths.
        width = None if sys.stdout.isatty() else 220
        plan.print(console=Console(width=width), all_weights=args.all)


def main(argv=None):
    args = _parser().parse_args(argv)
    # Planning needs no accelerator. JAX (when installed) builds abstractly
    # and quietly; this only applies if Keras is not imported yet.
    if importlib.util.find_spec("jax") is not None:
        os.environ.setdefault("KERAS_BACKEND", "jax")
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        if args.command == "plan":
            _plan(args)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0
