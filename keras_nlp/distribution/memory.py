"""Will it fit? Per-device memory of a training step or of generation.

`estimate_memory(plan, workload)` predicts, from a `LayoutPlan` and a
`Workload` alone (nothing is allocated or compiled), the bytes each device
holds at the peak of one training step or of `generate`, by category:

Training (`Workload("train", batch_size, sequence_length, ...)`):
- `weights`: every weight's shard, in its variable dtype (the plan's, or
  the policy's variable dtype: float32 under `mixed_bfloat16`);
- `gradients`: one per trainable shard, in the variable dtype; with LoRA
  (`lora_rank`) only the adapters are trainable;
- `optimizer_state`: the variables Keras's optimizer creates per trainable
  weight, laid out like it: Adam/AdamW two moments, SGD none (one with
  momentum), Lion one, Adafactor one full-size velocity and, for weights
  of rank 2 and more, a row and a column statistic (Keras 3's variables);
- `activations`: what the backward pass keeps of each block (see below);
  under `remat="full"` only each block's input, plus `recomputed_block`,
  the one block recomputed at a time in the backward pass;
- `logits_and_loss`: the next-token logits, the loss's float32 softmax
  and their gradients. XLA gathers the vocabulary for the cross-entropy,
  so most of it spans the whole vocabulary on every device.

Generation (`Workload("generate", batch_size, sequence_length=context)`):
- `weights`; `gathered_weights`: weights split over the batch axes (FSDP)
  are all-gathered for the whole loop (XLA hoists the loop-invariant
  gathers), about `GATHERED_COPIES` times; `kv_cache`: every attention's
  cache at the context length, laid out by the plan
  (`LayoutPlan.kv_caches`); `prefill_activations`: one block's forward
  over the prompt, scoring it against the whole context (nothing is kept
  for a backward pass); `logits`: the last position's, and the sampler's
  float32 copy.

Activations are counted per token on each device (`t` = the batch split
over the batch axes, times the sequence, split over the context axis when
the plan has one) from the widths the plan gives each block's
projections: `h` the residual stream (whole on every model device, or
`h / model` per token under sequence parallelism), `a` the summed local
outputs of its attention projections (query, key, value: their heads over
the model axis when it divides them), `f` of its feed-forward ones (gate
and up, or one; experts as `Workload.expert_compute` runs them), and `s`
the local attention scores
(`batch x local query heads x local sequence x keys`: the score matrix is
materialized, as XLA does without a fused attention kernel; a
flash-attention kernel keeps none of it; where a head is split inside,
every device scores every head). Sequences that attention takes in
chunks of queries (`activations.query_chunk`) keep no scores: one
chunk's, recomputed in the backward pass, is counted once
(`attention_chunk`). A block keeps

    c_res * t * h + c_attn * t * a + c_ffw * t * f + c_score * s

elements of the compute dtype: its input, norms' outputs and residual
sums, the projections with their rotary or activation results, the
attention context, the softmax's logits and probabilities. The
coefficients (`ACTIVATION_FACTORS`, `FORWARD_FACTORS`, `LOGITS_WHOLE`,
`LOGITS_LOCAL`, `GATHERED_COPIES`) were fitted once, by non-negative least
squares, to XLA's own per-device memory (`compiled.memory_analysis()`:
arguments + outputs - aliased + temporaries, on 8 fake CPU devices) of
99 training steps (16 decoder families at 4 blocks, and Llama, Gemma and
Mixtral at 1 and 3 blocks and 128 and 256 tokens, on 1x1 to three-axis
meshes) and 51 generation loops. `benchmarks/memory_fit.py` prints the
predicted and compiled figures side by side.

Not counted: dropout's masks (the estimate says so when the config has
dropout), the compiler's scratch beyond the above, the data pipeline and
fragmentation. `keras_nlp.distribution.recommend` keeps a candidate only
within 90% of a device's memory.

On XLA's CPU backend rematerialization saves nothing: the compiler merges
the recomputed forward pass with the first one (common subexpressions)
and schedules it early, so `remat="full"` is predicted for accelerators
and checked there.
"""

import dataclasses
import math

from keras_nlp.distribution.activations import query_chunk
from keras_nlp.distribution.formatting import format_bytes
from keras_nlp.distribution.kv_cache import cache_bytes_per_device
from keras_nlp.distribution.layout_plan import dtype_itemsize
from keras_nlp.distribution.rules import entry_axes

TRAIN = "train"
GENERATE = "generate"
MODES = (TRAIN, GENERATE)

# Optimizer name -> full-size state variables per trainable weight.
OPTIMIZERS = {
    "sgd": 0,
    "momentum": 1,
    "adam": 2,
    "adamw": 2,
    "lion": 1,
    "adafactor": None,  # factored: see `_optimizer_state_elements`
}
REMAT_MODES = ("none", "full")

# Dtype policies: name -> (variable dtype, compute dtype).
POLICIES = {
    "float32": ("float32", "float32"),
    "bfloat16": ("bfloat16", "bfloat16"),
    "float16": ("float16", "float16"),
    "mixed_bfloat16": ("float32", "bfloat16"),
    "mixed_float16": ("float32", "float16"),
}


def variable_dtype(dtype):
    """The dtype variables are stored in under `dtype`: a mixed policy's
    variable dtype, else `dtype` itself (`None` stays `None`)."""
    return POLICIES[dtype][0] if dtype in POLICIES else dtype


@dataclasses.dataclass(frozen=True)
class ActivationFactors:
    """Tensors a block keeps, in units of each width (see the module doc).

    Attributes:
        residual: per token, in multiples of the residual stream `h`.
        attention: per token, in multiples of the local attention
            projections' summed outputs `a`.
        feedforward: per token, in multiples of the local feed-forward
            projections' summed outputs `f`.
        scores: in multiples of the local score matrix `s`.
    """

    residual: float
    attention: float
    feedforward: float
    scores: float


# Fitted (non-negative least squares, see the module doc) to XLA's compiled
# memory of 99 training steps and 51 generation loops.
ACTIVATION_FACTORS = ActivationFactors(
    residual=5.75, attention=3.25, feedforward=3.5, scores=1.79
)
# What one block's forward pass holds at once while prefilling (nothing is
# kept for a backward pass): its feed-forward and the scores over the
# whole context dominate.
FORWARD_FACTORS = ActivationFactors(
    residual=0.5, attention=0.0, feedforward=0.76, scores=4.0
)
# float32 tensors of the logits' size the loss keeps (logits, softmax,
# their gradient): the loss's gather makes most of them span the whole
# vocabulary on every device; some stay split as the output embedding is.
LOGITS_WHOLE = 2.81
LOGITS_LOCAL = 0.88
# Copies of the weights XLA gathers over the batch axes for the whole
# generation loop (its all-gathers are loop-invariant and hoisted; the
# prefill and the loop each keep theirs).
GATHERED_COPIES = 3.28


@dataclasses.dataclass(frozen=True)
class Workload:
    """What the memory is for: a training step, or generation.

    Args:
        mode: `"train"` or `"generate"`.
        batch_size: int, sequences per step (the global batch).
        sequence_length: int, tokens per sequence when training; the
            context (the cache's length) when generating.
        prompt_length: int, generation only: the tokens the prefill
            processes at once (default: `sequence_length`).
        optimizer: training only, one of `OPTIMIZERS` (default `"adamw"`).
        remat: training only, `"none"` or `"full"` (each block keeps only
            its input and recomputes the rest in the backward pass, as a
            backbone built under `keras.RematScope(mode="full")` does).
        lora_rank: int, training only: LoRA adapters of this rank are the
            only trainable weights.
        dtype: a dtype policy name (`"bfloat16"`, `"mixed_bfloat16"`, ...),
            or `None` for the plan's variable dtypes, computing in them.
        expert_compute: mixtures of experts: `"sparse"` (a grouped
            matmul: GPU, TPU) or `"dense"` (every expert on every token:
            what `ExpertBank` runs on CPU).
    """

    mode: str
    batch_size: int
    sequence_length: int
    prompt_length: int = None
    optimizer: str = "adamw"
    remat: str = "none"
    lora_rank: int = None
    dtype: str = None
    expert_compute: str = "sparse"

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(
                f"A workload's mode is one of {MODES}. Received: {self.mode!r}."
            )
        for name in ("batch_size", "sequence_length"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(
                    f"{name} must be a positive int. Received: {value!r}."
                )
            if value < 1:
                raise ValueError(
                    f"{name} must be a positive int. Received: {value!r}."
                )
        if self.prompt_length is not None and not (
            isinstance(self.prompt_length, int)
            and 1 <= self.prompt_length <= self.sequence_length
        ):
            raise ValueError(
                "prompt_length must be an int from 1 to sequence_length "
                f"({self.sequence_length}). Received: {self.prompt_length!r}."
            )
        optimizer = str(self.optimizer).lower()
        if optimizer not in OPTIMIZERS:
            raise ValueError(
                f"Unknown optimizer {self.optimizer!r}. Known: "
                f"{', '.join(OPTIMIZERS)}."
            )
        object.__setattr__(self, "optimizer", optimizer)
        remat = "none" if self.remat is None else str(self.remat).lower()
        if remat not in REMAT_MODES:
            raise ValueError(
                f"Unknown remat mode {self.remat!r}. Known: "
                f"{', '.join(REMAT_MODES)}."
            )
        object.__setattr__(self, "remat", remat)
        if self.lora_rank is not None and not (
            isinstance(self.lora_rank, int) and self.lora_rank > 0
        ):
            raise ValueError(
                "lora_rank must be a positive int. Received: "
                f"{self.lora_rank!r}."
            )
        if self.expert_compute not in ("sparse", "dense"):
            raise ValueError(
                "expert_compute is 'sparse' or 'dense'. Received: "
                f"{self.expert_compute!r}."
            )
        if self.dtype is not None and self.dtype not in POLICIES:
            raise ValueError(
                f"Unknown dtype policy {self.dtype!r}. Known: "
                f"{', '.join(POLICIES)}."
            )

    @property
    def tokens(self):
        """Tokens per step (training) or per prefill (generation)."""
        length = self.prompt_length or self.sequence_length
        return self.batch_size * length

    def describe(self, remat=True):
        if self.mode == TRAIN:
            extras = [f"optimizer {self.optimizer}"]
            if remat:
                extras.append(f"remat {self.remat}")
            if self.lora_rank:
                extras.append(f"LoRA rank {self.lora_rank}")
            if self.dtype:
                extras.append(self.dtype)
            return (
                f"training, batch {self.batch_size} x "
                f"{self.sequence_length} tokens, {', '.join(extras)}"
            )
        prompt = self.prompt_length or self.sequence_length
        dtype = f", {self.dtype}" if self.dtype else ""
        return (
            f"generation, batch {self.batch_size}, context "
            f"{self.sequence_length} (prompt {prompt}){dtype}"
        )

    def to_dict(self):
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per device at a workload's peak, by category.

    Attributes:
        workload: the `Workload`.
        categories: dict of category -> bytes per device, in the order the
            module doc lists them.
        notes: tuple of str, what the estimate assumed.
    """

    workload: Workload
    categories: dict
    notes: tuple = ()

    @property
    def total(self):
        return sum(self.categories.values())

    @property
    def largest(self):
        """`(category, bytes)` of the biggest item."""
        return max(self.categories.items(), key=lambda item: item[1])

    def fits(self, memory_bytes):
        return self.total <= memory_bytes

    def verdict(self, memory_bytes, description=None):
        """One line: fits or not in `memory_bytes`, naming the biggest item."""
        device = f"{description}, " if description else ""
        name, size = self.largest
        share = self.total / memory_bytes
        verdict = "fits" if self.fits(memory_bytes) else "does NOT fit"
        return (
            f"{verdict} in {device}{format_bytes(memory_bytes)} per device "
            f"({share:.0%}); the largest item is {name.replace('_', ' ')} "
            f"({format_bytes(size)})"
        )

    def lines(self):
        """The breakdown as printable lines."""
        rows = [f"memory per device, {self.workload.describe()}:"]
        for name, size in self.categories.items():
            rows.append(f"  {name.replace('_', ' '):<22} {format_bytes(size)}")
        rows.append(f"  {'total':<22} {format_bytes(self.total)}")
        rows.extend(f"  note: {note}" for note in self.notes)
        return rows

    def to_dict(self):
        return {
            "workload": self.workload.to_dict(),
            "bytes_per_device": {
                name: int(size) for name, size in self.categories.items()
            },
            "total": int(self.total),
            "largest": self.largest[0],
            "notes": list(self.notes),
        }


@dataclasses.dataclass(frozen=True)
class BlockWidths:
    """One block's per-token widths on one device (see the module doc).

    Attributes:
        path: the block's path prefix.
        hidden: the residual stream's width.
        attention: summed local outputs of its attention projections.
        feedforward: summed local outputs of its feed-forward projections
            (for experts: as many tokens' worth as each device computes).
        query_heads: the query heads each device scores.
        query_width: the local width of the query projection's output
            (heads x head_dim on each device), for attention FLOPs.
    """

    path: str
    hidden: int
    attention: float
    feedforward: float
    query_heads: int
    query_width: int = 0


def _local_width(weight, skip=("hidden",)):
    """Product of the shard sizes of a kernel's dimensions outside `skip`."""
    width = 1
    for size, name in zip(weight.shard_shape, weight.dim_names, strict=True):
        if name not in skip:
            width *= size
    return width


def block_widths(plan, top_k=None, expert_compute="sparse"):
    """The `BlockWidths` of each block of the plan, in order.

    Experts count `top_k` of every token's feed-forwards with
    `expert_compute="sparse"` (a grouped matmul, as on GPU and TPU), and
    every token through every local expert with `"dense"` (what
    `ExpertBank` runs on CPU).

    A block is a top-level path prefix with a kernel that has heads; its
    input projections are its kernels with a `hidden` dimension that is
    not their last (their outputs are heads or a feed-forward width).
    """
    blocks = {}
    for weight in plan.weights:
        names = weight.dim_names or ()
        if "hidden" not in names or len(names) < 2:
            continue
        prefix = weight.path.split("/", 1)[0]
        blocks.setdefault(prefix, []).append(weight)
    result = []
    for prefix, weights in blocks.items():
        attention = feedforward = 0.0
        hidden = query_heads = None
        query_width = 0
        for weight in weights:
            names = weight.dim_names
            hidden = weight.shape[names.index("hidden")]
            if "heads" in names and query_heads is None:
                query_heads = weight.shard_shape[names.index("heads")]
                if "head_dim" in names:
                    dim = names.index("head_dim")
                    if weight.shard_shape[dim] < weight.shape[dim]:
                        # Split inside each head: every device scores
                        # every head with partial sums, then all-reduces.
                        query_heads = weight.shape[names.index("heads")]
            if names[-1] == "hidden":
                # An output projection: its output is the residual stream.
                continue
            if "heads" in names or "kv_heads" in names:
                attention += _local_width(weight)
                if "heads" in names and not query_width:
                    query_width = _local_width(weight)
            elif "ffw" in names and "experts" in names:
                experts = weight.shape[0]
                local = weight.shard_shape[0]
                # Sparse: each device computes its experts for the tokens
                # routed to them, top_k per token spread evenly. Dense:
                # its experts see every token.
                share = local
                if expert_compute == "sparse":
                    share = (top_k or 1) * local / experts
                feedforward += share * _local_width(
                    weight, ("hidden", "experts")
                )
            elif "ffw" in names:
                feedforward += _local_width(weight)
        if query_heads is not None:
            result.append(
                BlockWidths(
                    prefix,
                    hidden,
                    attention,
                    feedforward,
                    query_heads,
                    query_width,
                )
            )
    return result


def model_like_shards(weight, plan):
    """How many ways axes other than the plan's batch axes split a weight
    (the batch axes shard weights for memory only: FSDP)."""
    shards = 1
    for entry in weight.spec:
        for axis in entry_axes(entry):
            if axis not in plan.batch_axes:
                shards *= plan.mesh.axis_sizes[axis]
    return shards


def batch_shards(plan, batch_size):
    """How many ways the batch is split (the batch axes, when they divide
    it; else it stays whole)."""
    shards = math.prod(plan.mesh.axis_sizes[a] for a in plan.batch_axes)
    return shards if batch_size % shards == 0 else 1


def experts_per_token(config, top_k=None):
    """`top_k`, else the config's `top_k` or `num_experts_per_tok`."""
    config = config or {}
    return top_k or config.get("top_k") or config.get("num_experts_per_tok")


def _dtypes(plan, workload):
    """`(variable itemsize of a weight, compute itemsize)`."""
    if workload.dtype is not None:
        variable, compute = POLICIES[workload.dtype]
        return (lambda weight: dtype_itemsize(variable)), dtype_itemsize(
            compute
        )
    floats = [w.dtype for w in plan.weights if "float" in str(w.dtype)]
    compute = dtype_itemsize(floats[0]) if floats else 4
    return (lambda weight: dtype_itemsize(weight.dtype)), compute


def _is_adapter(weight):
    return weight.path.endswith(("lora_kernel_a", "lora_kernel_b"))


def _optimizer_state_elements(weight, optimizer):
    """Elements of Keras's optimizer variables for one trainable shard."""
    moments = OPTIMIZERS[optimizer]
    if moments is not None:
        return moments * weight.shard_params
    shape = weight.shard_shape
    # Keras's Adafactor keeps a full-size `velocity` for every weight, and
    # row and column statistics of the last two dimensions of matrices.
    if len(shape) < 2:
        return math.prod(shape)
    factored = math.prod(shape[:-1]) + math.prod(shape[:-2] + shape[-1:])
    return math.prod(shape) + factored


def _vocabulary_shards(plan):
    """`(vocabulary size, its local size)` of the output projection."""
    candidates = [
        w for w in plan.weights if w.dim_names and "vocab" in w.dim_names
    ]
    if not candidates:
        return None, None
    # The untied output embedding when there is one, else the table.
    weight = next(
        (w for w in candidates if w.path.endswith("reverse_embeddings")),
        candidates[0],
    )
    dim = weight.dim_names.index("vocab")
    return weight.shape[dim], weight.shard_shape[dim]


def estimate_memory(plan, workload, *, top_k=None):
    """Per-device bytes of `workload` under `plan`, by category.

    Args:
        plan: a `LayoutPlan` (from `Backbone.plan_layout`); plan it with
            `lora_rank` to count LoRA adapters.
        workload: a `Workload`.
        top_k: experts per token of a mixture-of-experts backbone (default:
            the plan's config's `top_k` or `num_experts_per_tok`).

    Returns:
        A `MemoryEstimate`.

    Example:

    ```python
    from keras_nlp.distribution.memory import Workload, estimate_memory
    from keras_nlp.models import GemmaBackbone

    plan = GemmaBackbone.plan_layout(
        {"batch": 2, "model": 4}, preset="gemma_2b_en"
    )
    estimate = estimate_memory(
        plan, Workload("train", batch_size=8, sequence_length=1024)
    )
    print("\\n".join(estimate.lines()))
    print(estimate.verdict(16 * 10**9, "TPU v5e"))
    ```
    """
    basis = _Basis.of(plan, workload, top_k)
    if workload.mode == GENERATE:
        return _generation(plan, workload, basis)
    return _training(plan, workload, basis)


@dataclasses.dataclass
class _Basis:
    """What training and generation estimates share."""

    variable_size: object  # weight -> bytes per element of its variable
    compute_size: int
    weights: float
    blocks: list
    batch_local: float
    vocabulary: int
    vocabulary_local: int
    notes: list

    @classmethod
    def of(cls, plan, workload, top_k):
        config = plan.config or {}
        top_k = experts_per_token(config, top_k)
        variable_size, compute_size = _dtypes(plan, workload)
        batch = workload.batch_size
        vocabulary, vocabulary_local = _vocabulary_shards(plan)
        chunk = query_chunk(workload.sequence_length)
        notes = [
            "attention scores are counted materialized (no fused attention "
            "kernel)"
            if chunk is None
            else f"attention takes {chunk} queries at a time: one chunk's "
            "scores are counted, recomputed in the backward pass"
        ]
        dropouts = {
            key: value
            for key, value in config.items()
            if "dropout" in key and isinstance(value, (int, float)) and value
        }
        if dropouts and workload.mode == TRAIN:
            notes.append(
                f"dropout masks are not counted ({dropouts}): they add to "
                "the activations"
            )
        return cls(
            variable_size=variable_size,
            compute_size=compute_size,
            weights=sum(
                w.shard_params * variable_size(w) for w in plan.weights
            ),
            blocks=block_widths(plan, top_k, workload.expert_compute),
            batch_local=batch / batch_shards(plan, batch),
            vocabulary=vocabulary or 0,
            vocabulary_local=vocabulary_local or 0,
            notes=notes,
        )


def _training(plan, workload, basis):
    size = basis.variable_size
    adapters = [w for w in plan.weights if _is_adapter(w)]
    if workload.lora_rank and not adapters:
        raise ValueError(
            "The workload has lora_rank="
            f"{workload.lora_rank}, but the plan has no LoRA adapters: plan "
            f"it with lora_rank={workload.lora_rank}."
        )
    trainable = adapters if workload.lora_rank else plan.weights
    length = workload.sequence_length
    local_length, residual_shards = sequence_shards(plan, length)
    tokens = basis.batch_local * local_length
    # Long sequences attend in chunks of queries, each recomputed for the
    # backward pass: one chunk's scores at a time, none kept per block.
    chunk = query_chunk(length)
    per_block = [
        _block_elements(
            block,
            tokens,
            basis.batch_local,
            local_length,
            keys=length,
            residual_shards=residual_shards,
            queries=0 if chunk else None,
        )
        for block in basis.blocks
    ]
    categories = {
        "weights": basis.weights,
        "gradients": sum(w.shard_params * size(w) for w in trainable),
        "optimizer_state": sum(
            _optimizer_state_elements(w, workload.optimizer) * size(w)
            for w in trainable
        ),
    }
    if workload.remat == "full":
        saved = sum(
            tokens * block.hidden / residual_shards for block in basis.blocks
        )
        categories["activations"] = saved * basis.compute_size
        categories["recomputed_block"] = (
            max(per_block, default=0) * basis.compute_size
        )
        basis.notes.append(
            "remat full: each block keeps its input; one block is "
            "recomputed at a time in the backward pass"
        )
    else:
        categories["activations"] = sum(per_block) * basis.compute_size
    if chunk:
        categories["attention_chunk"] = (
            ACTIVATION_FACTORS.scores
            * max(
                basis.batch_local * block.query_heads * chunk * length
                for block in basis.blocks
            )
            * basis.compute_size
        )
    # The loss takes the whole vocabulary on every device: XLA gathers
    # the logits' vocabulary shards for the softmax cross-entropy.
    categories["logits_and_loss"] = (
        tokens
        * 4
        * (
            LOGITS_WHOLE * basis.vocabulary
            + LOGITS_LOCAL * basis.vocabulary_local
        )
    )
    return MemoryEstimate(workload, categories, tuple(basis.notes))


def sequence_shards(plan, length):
    """`(tokens of one sequence per device, residual stream shards)`.

    The context axis splits every activation's sequence when it divides
    `length`; sequence parallelism then splits the residual stream over
    the model axis too, when that divides what is left (as the layouts
    apply them, see `activations`).
    """
    sizes = plan.mesh.axis_sizes
    context = sizes.get(plan.context_axis, 1) if plan.context_axis else 1
    if length % context:
        context = 1
    local = length // context
    model = sizes.get(plan.model_axis, 1)
    residual = 1
    if plan.sequence_parallel[0] and local % model == 0:
        residual = model
    return local, residual


def _block_elements(
    block,
    tokens,
    batch_local,
    length,
    keys=None,
    factors=ACTIVATION_FACTORS,
    residual_shards=1,
    queries=None,
):
    queries = length if queries is None else queries
    scores = batch_local * block.query_heads * queries * (keys or length)
    return (
        tokens * factors.residual * block.hidden / residual_shards
        + tokens * factors.attention * block.attention
        + tokens * factors.feedforward * block.feedforward
        + factors.scores * scores
    )


def _generation(plan, workload, basis):
    cache = sum(
        cache_bytes_per_device(
            cache_plan,
            workload.batch_size,
            workload.sequence_length,
            plan.mesh.axis_sizes,
            plan.batch_axes,
            basis.compute_size,
        )[0]
        for cache_plan in plan.kv_caches
    )
    if not plan.kv_caches:
        basis.notes.append("the backbone keeps no key/value cache in the plan")
    prompt = workload.prompt_length or workload.sequence_length
    prefill = max(
        (
            _block_elements(
                block,
                basis.batch_local * prompt,
                basis.batch_local,
                prompt,
                workload.sequence_length,
                FORWARD_FACTORS,
            )
            for block in basis.blocks
        ),
        default=0,
    )
    # Weights split over the batch axes (FSDP) are gathered once for the
    # whole loop: XLA hoists the loop-invariant all-gathers out of it.
    gathered = GATHERED_COPIES * sum(
        (w.params / model_like_shards(w, plan) - w.shard_params)
        * basis.variable_size(w)
        for w in plan.weights
    )
    categories = {
        "weights": basis.weights,
        "gathered_weights": gathered,
        "kv_cache": cache,
        "prefill_activations": prefill * basis.compute_size,
        "logits": basis.batch_local * basis.vocabulary_local * 4 * 2,
    }
    return MemoryEstimate(workload, categories, tuple(basis.notes))
