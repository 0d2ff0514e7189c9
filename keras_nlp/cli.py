"""Command line: `python -m keras_nlp plan PRESET --mesh 1x2`."""

import argparse
import importlib.util
import json
import os
import sys


class UsageError(Exception):
    """A command line argparse could not read; printed as one line."""


class _Parser(argparse.ArgumentParser):
    """Reports a bad command line as `error: ...`, like every other error.

    argparse's own report is a usage block and an exit; `main` prints
    this one line instead and returns 2, as for a bad value.
    """

    def error(self, message):
        raise UsageError(
            f"{message}. `{self.prog} --help` describes the arguments."
        )


def _parser():
    parser = _Parser(
        prog="python -m keras_nlp",
        description="keras_nlp tools. Nothing is downloaded or allocated.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    _add_plan_command(commands)
    _add_recommend_command(commands)
    return parser


def _add_plan_command(commands):
    plan = commands.add_parser(
        "plan",
        help="show where every weight of a preset goes on a device mesh",
        description=(
            "Resolve a preset's layout rules (a built-in preset, or a "
            "preset directory's config.json) against its real "
            "variable shapes on a mesh of the given shape (no devices are "
            "needed) and print the plan: per weight its shape, spec, shard "
            "shape and the reason for the decision, then the totals. When "
            "most of the model would be whole on every device, a warning "
            "on stderr gives the per-device ratio and mesh shapes that "
            "divide it."
        ),
    )
    _add_preset_arguments(plan)
    _add_mesh_arguments(plan)
    _add_decision_arguments(plan)
    _add_workload_arguments(plan)
    _add_output_arguments(plan)


def _add_recommend_command(commands):
    recommend = commands.add_parser(
        "recommend",
        help="rank meshes, policies and remat modes that fit a workload",
        description=(
            "Plan a preset on every mesh the devices can form (data x fsdp "
            "x model, x expert for mixtures of experts), under each "
            "fallback policy and remat mode; predict each one's memory per "
            "device, drop what does not fit the device, and print the "
            "fastest by estimated step time, with why. Nothing is "
            "allocated."
        ),
    )
    recommend.add_argument("preset", help="a built-in preset or directory")
    recommend.add_argument(
        "--devices", type=int, required=True, help="how many devices"
    )
    recommend.add_argument(
        "--device",
        required=True,
        help="the accelerator (its memory, FLOP/s and bandwidths): "
        "h100-80gb, a100-40gb, a100-80gb, l4-24gb, tpu-v5e, tpu-v5p, tpu-v6e",
    )
    recommend.add_argument(
        "--device-memory",
        default=None,
        help="overrides the device's memory, e.g. 20GiB",
    )
    recommend.add_argument(
        "--dtype",
        default=None,
        help="float32, bfloat16, float16, mixed_bfloat16 or mixed_float16",
    )
    recommend.add_argument(
        "--lora-rank",
        type=int,
        default=None,
        help="train LoRA adapters of this rank only",
    )
    recommend.add_argument(
        "--top", type=int, default=5, help="how many to show (default 5)"
    )
    recommend.add_argument(
        "--json", action="store_true", help="print one JSON object"
    )
    _add_workload_arguments(recommend)


def _recommend(args):
    from keras_nlp.distribution.devices import device_profile
    from keras_nlp.distribution.devices import parse_memory
    from keras_nlp.distribution.recommend import DEFAULT_HEADROOM
    from keras_nlp.distribution.recommend import recommend
    from keras_nlp.distribution.recommend import smallest_candidate
    from keras_nlp.models import Backbone

    _check_preset(args.preset)
    if not args.generate:
        args.train = True
    workload = _workload(args)
    profile = device_profile(args.device)
    memory = profile.memory_bytes
    if args.device_memory is not None:
        memory = parse_memory(args.device_memory)
    best, candidates = recommend(
        Backbone,
        workload,
        devices=args.devices,
        device=profile,
        preset=args.preset,
        memory_bytes=memory,
        top=args.top,
    )
    usable = memory * DEFAULT_HEADROOM
    if args.json:
        print(
            json.dumps(
                {
                    "workload": workload.to_dict(),
                    "device": {**profile.to_dict(), "memory_bytes": memory},
                    "considered": len(candidates),
                    "fitting": sum(c.fits for c in candidates),
                    "best": [c.to_dict() for c in best],
                }
            )
        )
        return
    fitting = sum(c.fits for c in candidates)
    print(
        f"{args.preset} on {args.devices} x {profile.description}, "
        f"{workload.describe(remat=False)}: {fitting} of {len(candidates)} "
        "setups fit "
        f"(up to {DEFAULT_HEADROOM:.0%} of each device's memory)"
    )
    for rank, candidate in enumerate(best, 1):
        print(
            f"{rank}. {candidate.mesh_text}, policy {candidate.policy}, "
            f"remat {candidate.remat}: {candidate.why(usable)}"
        )
    if not best:
        closest = smallest_candidate(candidates)
        raise ValueError(
            f"Nothing fits: the smallest setup ({closest.mesh_text}, remat "
            f"{closest.remat}) needs {closest.memory.total / 2**30:.2f} GiB "
            f"per device, its largest item "
            f"{closest.memory.largest[0].replace('_', ' ')}. Use more "
            "devices, a smaller --batch, --seq or --prompt, --lora-rank, or "
            "--dtype bfloat16."
        )


def _add_preset_arguments(plan):
    """What to plan: a preset, or `--list` of the built-in ones."""
    plan.add_argument(
        "preset",
        nargs="?",
        help=(
            "a built-in preset, e.g. gemma_2b_en (--list shows them all), "
            "or a preset directory"
        ),
    )
    plan.add_argument(
        "--list",
        action="store_true",
        help="list the built-in presets by class, with parameter counts",
    )


def _add_mesh_arguments(plan):
    """The mesh's shape and the role of each of its axes."""
    plan.add_argument(
        "--mesh",
        help=(
            "mesh shape, one size per axis joined by 'x', e.g. 1x2 "
            "(batch, model) or 1x4x2 (batch, expert, model)"
        ),
    )
    plan.add_argument(
        "--axis-names",
        default=None,
        help=(
            "comma-separated mesh axis names (default: batch,model, or "
            "batch,expert,model for three sizes)"
        ),
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
        "--fsdp-axis",
        default=None,
        help=(
            "axis that shards weights FSDP-style instead of the data axis, "
            "e.g. with --mesh 2x2x2 --axis-names data,fsdp,model "
            "--data-axis data"
        ),
    )
    plan.add_argument(
        "--expert-axis",
        default=None,
        help=(
            "axis that splits mixture-of-experts weights by expert "
            "(default: the mesh's 'expert' axis if any, else the model axis)"
        ),
    )
    plan.add_argument(
        "--context-axis",
        default=None,
        help=(
            "axis that splits the sequence (context parallelism; default: "
            "the mesh's 'context' axis if any)"
        ),
    )
    plan.add_argument(
        "--sequence-parallel",
        default="auto",
        choices=("auto", "on", "off"),
        help=(
            "split the residual stream over the sequence on the model axis "
            "(default: auto, on under --policy memory)"
        ),
    )


def _add_decision_arguments(plan):
    """How a weight whose rule cannot apply is placed, and what is counted."""
    plan.add_argument(
        "--policy",
        default="auto",
        choices=("auto", "memory", "communication"),
        help=(
            "an axis that does not divide its dimension: replicate the "
            "weight along it or move it to another dimension it divides, "
            "whichever has the lowest estimated step time (auto, the "
            "default), the fewest bytes per device (memory) or the fewest "
            "collective bytes (communication); each choice is printed with "
            "every candidate's estimated costs"
        ),
    )
    plan.add_argument(
        "--tokens-per-step",
        type=int,
        default=8 * 2048,
        help=(
            "tokens of one training step over all devices, for the "
            "estimated collective bytes (default 16384: 8 x 2048)"
        ),
    )
    plan.add_argument(
        "--dtype",
        default=None,
        help=(
            "dtype to count bytes in, e.g. bfloat16; or a mixed policy "
            "(mixed_bfloat16: float32 weights, bfloat16 activations); or "
            "int8, int4 (int4/64: groups of 64 rows, int4/-1: per channel) "
            "or float8: the preset quantized, scales included (Keras's "
            "int8_from_bfloat16 names the float dtype of the rest)"
        ),
    )
    plan.add_argument(
        "--strict",
        action="store_true",
        help="fail instead of replicating a weight whose rule cannot apply",
    )
    plan.add_argument(
        "--device",
        default=None,
        help=(
            "the accelerator: h100-80gb, a100-40gb, a100-80gb, l4-24gb, "
            "tpu-v5e, tpu-v5p or tpu-v6e. The cost model uses its "
            "bandwidths, and the weights per device are compared with its "
            "memory"
        ),
    )
    plan.add_argument(
        "--device-memory",
        default=None,
        help=(
            "the memory of one device, e.g. 24GiB or 80GB (overrides "
            "--device's); the weights per device are compared with it"
        ),
    )
    plan.add_argument(
        "--lora-rank",
        type=int,
        default=None,
        help="also plan LoRA adapters of this rank on the default targets",
    )


def _add_workload_arguments(plan):
    """What the memory per device is predicted for (see "Will it fit?")."""
    group = plan.add_argument_group(
        "will it fit",
        "per-device memory of a training step or of generation, predicted "
        "from the plan (keras_nlp.distribution.memory); with --device or "
        "--device-memory it says whether it fits",
    )
    mode = group.add_mutually_exclusive_group()
    mode.add_argument(
        "--train", action="store_true", help="a training step's memory"
    )
    mode.add_argument(
        "--generate", action="store_true", help="generation's memory"
    )
    group.add_argument(
        "--batch", type=int, default=8, help="sequences per step (default 8)"
    )
    group.add_argument(
        "--seq",
        type=int,
        default=2048,
        help="tokens per sequence when training (default 2048)",
    )
    group.add_argument(
        "--context",
        type=int,
        default=None,
        help="generation: the cache's length (default --seq)",
    )
    group.add_argument(
        "--prompt",
        type=int,
        default=None,
        help="generation: prompt tokens prefilled at once (default: context)",
    )
    group.add_argument(
        "--optimizer",
        default="adamw",
        help="sgd, momentum, adam, adamw (default), lion or adafactor",
    )
    group.add_argument(
        "--remat",
        default="none",
        help="none (default) or full: each block keeps only its input",
    )


def _plan_dtype(dtype):
    """`(dtype to count weights in, quantization mode)` of `--dtype`: a
    mixed policy's variable dtype; int8, int4 and float8 (alone, or
    Keras's `int8_from_bfloat16`) quantize the preset's layers."""
    from keras_nlp.distribution.memory import variable_dtype
    from keras_nlp.distribution.quantizable import parse_quantized_dtype

    mode, block_size, source = parse_quantized_dtype(dtype)
    if mode is None:
        return variable_dtype(dtype), None
    if block_size is not None and block_size != 128:
        mode = f"{mode}/{block_size}"
    elif mode == "int4" and block_size is None:
        mode = "int4/-1"
    return variable_dtype(source), mode


def _workload(args):
    """The `Workload` the flags ask for; `None` without --train/--generate."""
    from keras_nlp.distribution.memory import POLICIES
    from keras_nlp.distribution.memory import Workload

    if not (args.train or args.generate):
        return None
    policy = args.dtype if args.dtype in POLICIES else None
    if args.generate:
        return Workload(
            "generate",
            args.batch,
            args.context or args.seq,
            prompt_length=args.prompt,
            dtype=policy,
        )
    return Workload(
        "train",
        args.batch,
        args.seq,
        optimizer=args.optimizer,
        remat=args.remat,
        lora_rank=args.lora_rank,
        dtype=policy,
    )


def _add_output_arguments(plan):
    """How the plan is shown."""
    plan.add_argument(
        "--json", action="store_true", help="print the plan as one JSON object"
    )
    plan.add_argument(
        "--svg",
        metavar="FILE",
        help=(
            "also write the plan as an SVG picture (open it in a browser): "
            "per weight kind, its split over the mesh and bytes per device"
        ),
    )
    plan.add_argument(
        "--all",
        action="store_true",
        help="list every weight instead of folding repeated blocks",
    )


# The largest accelerator clusters have tens of thousands of chips; a mesh
# beyond this is a typo (an extra zero), not a plan.
MAX_DEVICES = 2**20
# Warn when more than this share of the model's bytes is whole everywhere.
REPLICATED_WARNING = 0.5
_MAX_SUGGESTIONS = 4
_MAX_CANDIDATES = 32


def _check_mesh_size(mesh):
    if mesh.num_devices > MAX_DEVICES:
        raise ValueError(
            f"The mesh {mesh} has {mesh.num_devices:,} devices; plans are "
            f"made for at most {MAX_DEVICES:,}. Check the --mesh sizes "
            "(one size per axis joined by 'x', e.g. 2x4)."
        )


def _axis_candidates(size):
    """Sizes near `size` that tend to divide model dimensions."""
    powers = {2**k for k in range(size.bit_length() + 1) if 2**k <= 2 * size}
    divisors = {d for d in range(1, size + 1) if size % d == 0}
    return sorted(powers | divisors)


def _dividing_meshes(plan_for, mesh):
    """Meshes with the same axes whose plan shards most of the model.

    Shapes of at most twice the devices are tried, nearest in device
    count first; returns `(MeshShape, plan)` pairs.
    """
    import itertools
    import math

    from keras_nlp.distribution import MeshShape

    if mesh.num_devices > 4096:
        return []  # too many divisors to try; the ratio says enough
    sizes = [_axis_candidates(size) for size in mesh.shape]
    shapes = [
        shape
        for shape in itertools.product(*sizes)
        if 1 < math.prod(shape) <= 2 * mesh.num_devices and shape != mesh.shape
    ]
    shapes.sort(
        key=lambda shape: (
            abs(math.log(math.prod(shape) / mesh.num_devices)),
            -math.prod(shape),
            shape,
        )
    )
    found = []
    for shape in shapes[:_MAX_CANDIDATES]:
        candidate = MeshShape(shape, mesh.axis_names)
        plan = plan_for(candidate)
        if plan.replicated_bytes_fraction <= REPLICATED_WARNING:
            found.append((candidate, plan))
            if len(found) == _MAX_SUGGESTIONS:
                break
    return found


def _replication_warning(plan, plan_for):
    """A warning when most of the model is whole on every device, or None."""
    fraction = plan.replicated_bytes_fraction
    if plan.num_devices == 1 or fraction <= REPLICATED_WARNING:
        return None
    shape = "x".join(str(size) for size in plan.mesh.shape)
    text = (
        f"warning: on mesh {plan.mesh}, {fraction:.0%} of the model's bytes "
        "are held whole on every device: each device holds "
        f"{plan.memory_ratio:.2f}x the ideal (total / {plan.num_devices} "
        f"devices), because the model's dimensions do not divide the "
        f"{shape} axis sizes."
    )
    found = _dividing_meshes(plan_for, plan.mesh)
    if found:
        listed = ", ".join(
            f"{'x'.join(str(s) for s in mesh.shape)} (ratio "
            f"{candidate.memory_ratio:.2f})"
            for mesh, candidate in found
        )
        return f"{text} Mesh shapes that divide it: {listed}."
    return (
        f"{text} No mesh with these axes and up to twice the devices "
        "shards most of it."
    )


def _list_presets():
    """Prints the built-in presets by class, with their parameter counts.

    From the stored table alone: importing Keras would take longer than
    the listing should (`tests/test_cli.py` checks the table against
    every preset's config and golden plan).
    """
    from keras_nlp.preset_parameter_counts import COUNTS

    for name, presets in COUNTS.items():
        print(name)
        for preset, (count, _) in presets.items():
            print(f"  {preset:<44} {count:>16,} parameters")


def _check_preset(preset):
    """A CLI error for an unknown preset: close names, not all of them."""
    import difflib

    from keras_nlp.models import Backbone
    from keras_nlp.saving.backbone_presets import check_preset_path
    from keras_nlp.saving.backbone_presets import is_preset_directory

    check_preset_path(preset)
    if is_preset_directory(preset) or preset in Backbone._available_presets():
        return
    close = difflib.get_close_matches(
        preset, Backbone._available_presets(), n=3
    )
    suggestion = (
        f" Did you mean {' or '.join(repr(n) for n in close)}?" if close else ""
    )
    raise ValueError(
        f"Unknown preset {preset!r}, and no preset directory there."
        f"{suggestion} `python -m keras_nlp plan --list` lists the built-in "
        "presets."
    )


def _check_output_file(path, flag):
    """Raises before planning if `path` cannot be a file written later."""
    if os.path.isdir(path):
        raise ValueError(
            f"{flag} {path} is a directory; name a file in it, e.g. "
            f"{flag} {os.path.join(path, 'plan.svg')}."
        )
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise ValueError(
            f"{flag} {path}: the directory {directory} does not exist. "
            "Create it first, or name a file in an existing directory."
        )


def _write_output_file(path, flag, text):
    try:
        with open(path, "w", encoding="utf-8") as file:
            file.write(text)
    except OSError as error:
        raise ValueError(
            f"could not write {flag} {path}: {error.strerror or error}."
        ) from None


def _plan(args):
    if args.list:
        _list_presets()
        return
    if args.preset is None or args.mesh is None:
        raise ValueError(
            "plan needs a preset and --mesh, e.g. `python -m keras_nlp plan "
            "gemma_2b_en --mesh 1x2`; `--list` lists the presets."
        )
    if args.svg:
        _check_output_file(args.svg, "--svg")
    # Keras is imported from here on.
    from keras_nlp.distribution import MeshShape
    from keras_nlp.distribution.devices import device_profile
    from keras_nlp.distribution.devices import parse_memory
    from keras_nlp.distribution.devices import weights_on_device
    from keras_nlp.distribution.memory import estimate_memory
    from keras_nlp.models import Backbone

    axis_names = None
    if args.axis_names is not None:
        axis_names = tuple(name.strip() for name in args.axis_names.split(","))
    mesh = MeshShape.parse(args.mesh, axis_names)
    _check_mesh_size(mesh)
    _check_preset(args.preset)
    profile = None if args.device is None else device_profile(args.device)
    memory = None
    if args.device_memory is not None:
        memory = parse_memory(args.device_memory)
    elif profile is not None:
        memory = profile.memory_bytes
    data_axis = None if args.data_axis.lower() == "none" else args.data_axis

    count_dtype, quantize = _plan_dtype(args.dtype)

    def plan_for(mesh, strict=False):
        return Backbone.plan_layout(
            mesh,
            preset=args.preset,
            model_parallel_dim_name=args.model_axis,
            data_parallel_dim_name=data_axis,
            expert_parallel_dim_name=args.expert_axis,
            fsdp_dim_name=args.fsdp_axis,
            context_parallel_dim_name=args.context_axis,
            sequence_parallel={"on": True, "off": False}.get(
                args.sequence_parallel, "auto"
            ),
            strict=strict,
            policy=args.policy,
            tokens_per_step=args.tokens_per_step,
            dtype=count_dtype,
            lora_rank=args.lora_rank,
            device=profile,
            quantize=quantize,
        )

    workload = _workload(args)
    plan = plan_for(mesh, strict=args.strict)
    estimate = None if workload is None else estimate_memory(plan, workload)
    device_line = fits = None
    if memory is not None:
        device_line, fits = weights_on_device(
            plan, memory, profile and profile.description
        )
    if args.json:
        data = plan.to_dict()
        if estimate is not None:
            data["memory"] = estimate.to_dict()
        if memory is not None:
            data["device"] = {
                **(profile.to_dict() if profile else {}),
                "memory_bytes": memory,
                "weights_bytes_per_device": plan.bytes_per_device,
                "weights_fit": fits,
            }
            if estimate is not None:
                data["device"]["fits"] = estimate.fits(memory)
        print(json.dumps(data))
    else:
        # The terminal's width, else COLUMNS, else 100 (plan_console).
        plan.print(all_weights=args.all)
        if estimate is not None:
            print("\n".join(estimate.lines()))
            if memory is not None:
                print(estimate.verdict(memory, profile and profile.description))
        elif device_line:
            print(device_line)
    if args.svg:
        _write_output_file(args.svg, "--svg", plan.to_svg(all_weights=args.all))
        print(f"wrote {args.svg}", file=sys.stderr)
    warning = _replication_warning(plan, plan_for)
    if warning:
        print(warning, file=sys.stderr)


def _join_negative_mesh(argv):
    """`--mesh -1x2` as `--mesh=-1x2`, so the bad size gets its own error.

    argparse takes "-1x2" for an option (it reads only plain numbers such
    as "-1" as values) and would answer "expected one argument".
    """
    joined = []
    for arg in argv:
        if (
            joined
            and joined[-1] == "--mesh"
            and arg[:1] == "-"
            and arg[1:2].isdigit()
        ):
            joined[-1] = f"--mesh={arg}"
        else:
            joined.append(arg)
    return joined


def _error_text(error):
    """The text after `error: ` for an exception a user's input caused."""
    if isinstance(error, OSError) and error.filename is not None:
        reason = error.strerror or type(error).__name__
        return f"{error.filename}: {reason}."
    # The library's errors name Python arguments; here they are flags.
    return str(error).replace(
        "pass strict=False to accept", "drop --strict to accept"
    )


def main(argv=None):
    """Runs the command line; returns the exit status (2: a bad input).

    Every bad input (an unreadable argument, an unknown preset, a bad
    preset directory, a mesh or output path that cannot work) is printed
    as `error: ...` on stderr, naming the fix, without a traceback.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = _parser().parse_args(_join_negative_mesh(argv))
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    # Planning needs no accelerator. JAX (when installed) builds abstractly
    # and quietly; this only applies if Keras is not imported yet.
    if importlib.util.find_spec("jax") is not None:
        os.environ.setdefault("KERAS_BACKEND", "jax")
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        if args.command == "plan":
            _plan(args)
        elif args.command == "recommend":
            _recommend(args)
    except (ValueError, OSError) as error:
        # ValueError covers keras_nlp.saving.PresetError (a bad preset
        # directory); OSError, a file that cannot be read or written.
        print(f"error: {_error_text(error)}", file=sys.stderr)
        return 2
    return 0
