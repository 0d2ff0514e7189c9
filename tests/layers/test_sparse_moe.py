"""SparseMoE: routing math, variable names, keras-hub blocks, rules.

keras-hub's Mixtral, Qwen 3 MoE and GPT-OSS sparse blocks (inputs,
weights, outputs) are stored by `python -m tests.oracles sparse_moe`; no
test here builds them live: the Mixtral, Qwen 3 MoE and GPT-OSS backbones'
live rows in tests/models/oracle_cases.py run keras-hub's blocks against
their stored outputs (tests/models/test_backbone_oracles.py).
"""

import re
import textwrap

import keras
import numpy as np
import pytest

from keras_nlp.distribution import DATA
from keras_nlp.distribution import EXPERT
from keras_nlp.distribution import MODEL
from keras_nlp.layers.layout_rules import sparse_moe_rules
from keras_nlp.layers.sparse_moe import SparseMoE
from keras_nlp.layers.sparse_moe import configure_experts
from keras_nlp.models import MixtralBackbone
from tests import oracles
from tests.layers.test_expert_dispatch import looped_slots

HIDDEN, WIDTH = 8, 6
# Blocks whose weights a test draws or copies (or only names) start at
# zeros: a random initializer compiles a program for each new weight shape
# (seconds per block on two cores) only to be overwritten.
ZEROS = "zeros"


def inputs(batch=2, length=5, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(batch, length, HIDDEN)).astype("float32")


def randomize(layer, seed=0, scale=1.0):
    """N(0, scale / fan_in) kernels; N(0, scale) router and expert biases."""
    rng = np.random.default_rng(seed)
    for variable in layer.weights:
        fan_in = variable.shape[-2] if len(variable.shape) == 3 else 1
        if variable.path.endswith("/kernel"):
            fan_in = variable.shape[0]
        value = rng.normal(0, scale * fan_in**-0.5, variable.shape)
        variable.assign(value.astype("float32"))


def forward(layer, x):
    """`layer(x)` as a NumPy array; on JAX compiled as one program (an
    eager call compiles every op on its first shapes: several times
    slower). A fresh program each call: it follows the layer's options."""
    if keras.backend.backend() != "jax":
        return keras.ops.convert_to_numpy(layer(x))
    import jax

    outputs, _ = jax.jit(layer.stateless_call)(
        [v.value for v in layer.trainable_variables],
        [v.value for v in layer.non_trainable_variables],
        x,
    )
    return np.asarray(outputs)


def numpy_moe(x, router, gate, intermediate, output, top_k, normalize):
    """One token and one expert at a time, as the papers write it."""
    silu = lambda z: z / (1 + np.exp(-z))  # noqa: E731
    result = np.zeros_like(x)
    for b in range(x.shape[0]):
        for t in range(x.shape[1]):
            token = x[b, t]
            logits = token @ router
            probabilities = np.exp(logits - logits.max())
            probabilities /= probabilities.sum()
            chosen = np.argsort(-probabilities)[:top_k]
            weights = probabilities[chosen]
            if normalize:
                weights = weights / weights.sum()
            for expert, weight in zip(chosen, weights, strict=True):
                hidden = silu(token @ gate[expert]) * (
                    token @ intermediate[expert]
                )
                result[b, t] += weight * (hidden @ output[expert])
    return result


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("num_experts, top_k", [(4, 2), (3, 1), (5, 5)])
def test_equals_a_per_token_loop(num_experts, top_k, normalize):
    moe = SparseMoE(
        num_experts,
        WIDTH,
        top_k=top_k,
        normalize_top_k=normalize,
        kernel_initializer=ZEROS,
    )
    x = inputs()
    moe.build(x.shape)
    randomize(moe)
    value = {v.path.rsplit("/", 1)[-1]: v.numpy() for v in moe.weights}
    expected = numpy_moe(
        x,
        moe.router.kernel.numpy(),
        value["expert_feedforward_gate_dense"],
        value["expert_feedforward_intermediate_dense"],
        value["expert_feedforward_output_dense"],
        top_k,
        normalize,
    )
    np.testing.assert_allclose(forward(moe, x), expected, atol=1e-5, rtol=1e-5)


def test_default_variable_paths_are_mixtral_s():
    moe = SparseMoE(
        4, WIDTH, kernel_initializer=ZEROS, name="mixtral_sparse_moe_block"
    )
    moe.build((None, None, HIDDEN))
    prefix = "mixtral_sparse_moe_block/"
    assert {v.path: tuple(v.shape) for v in moe.weights} == {
        prefix + "sparse_feedforward_gate_dense/kernel": (HIDDEN, 4),
        prefix + "experts/expert_feedforward_gate_dense": (4, HIDDEN, WIDTH),
        prefix + "experts/expert_feedforward_intermediate_dense": (
            4,
            HIDDEN,
            WIDTH,
        ),
        prefix + "experts/expert_feedforward_output_dense": (4, WIDTH, HIDDEN),
    }


def test_sublayer_names_rename_the_paths():
    names = {
        "router": "router",
        "experts": "bank",
        "gate": "w_gate_up",
        "output": "w_down",
    }
    moe = SparseMoE(
        4,
        WIDTH,
        fused_gate_intermediate=True,
        sublayer_names=names,
        kernel_initializer=ZEROS,
        name="moe",
    )
    moe.build((None, None, HIDDEN))
    assert {v.path: tuple(v.shape) for v in moe.weights} == {
        "moe/router/kernel": (HIDDEN, 4),
        "moe/bank/w_gate_up": (4, HIDDEN, 2 * WIDTH),
        "moe/bank/w_down": (4, WIDTH, HIDDEN),
    }
    config = moe.get_config()
    clone = SparseMoE.from_config(config)
    assert clone.get_config() == config


def test_fused_gate_intermediate_equals_separate_weights():
    x = inputs()
    separate = SparseMoE(4, WIDTH, top_k=2, kernel_initializer=ZEROS)
    separate.build(x.shape)
    randomize(separate)
    fused = SparseMoE(
        4,
        WIDTH,
        top_k=2,
        fused_gate_intermediate=True,
        kernel_initializer=ZEROS,
    )
    fused.build(x.shape)
    bank = separate.experts
    fused.router.kernel.assign(separate.router.kernel)
    fused.experts.gate.assign(
        np.concatenate([bank.gate.numpy(), bank.intermediate.numpy()], -1)
    )
    fused.experts.output_kernel.assign(bank.output_kernel)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(fused(x)),
        keras.ops.convert_to_numpy(separate(x)),
        atol=1e-6,
    )


def copy_by_name(source, target):
    """Copies stored weights by their last two path segments (the blocks'
    names differ)."""
    targets = {"/".join(v.path.split("/")[-2:]): v for v in target.weights}
    assert sorted(targets) == sorted(source)
    for name, value in source.items():
        assert tuple(targets[name].shape) == value.shape, name
        targets[name].assign(value)


MIXTRAL = [(4, 2), (3, 1)]
QWEN3_NORMALIZE = [True, False]


def _oracle_block(kind, option):
    from keras_hub.src.models.gpt_oss import gpt_oss_decoder
    from keras_hub.src.models.mixtral import mixtral_decoder
    from keras_hub.src.models.qwen3_moe import qwen3_moe_decoder

    if kind == "mixtral":
        num_experts, top_k = option
        return mixtral_decoder.MixtralSparseMoeBlock(
            HIDDEN, WIDTH, num_experts, top_k=top_k
        )
    if kind == "qwen3_moe":
        return qwen3_moe_decoder.Qwen3SparseMoeBlock(
            HIDDEN, WIDTH, num_experts=6, top_k=3, norm_top_k_prob=option
        )
    return gpt_oss_decoder.GptOssSparseMoeBlock(
        HIDDEN, WIDTH, num_experts=5, top_k=2
    )


def oracle_name(kind, option=None):
    if kind == "mixtral":
        return "sparse_moe-mixtral-e{}_top{}".format(*option)
    if kind == "qwen3_moe":
        return f"sparse_moe-qwen3_moe-normalize_{option}"
    return "sparse_moe-gpt_oss"


def oracle_arrays(kind, option=None):
    """keras-hub's block on `inputs(length=7)` with `randomize`d weights
    (by their last two path segments) and its outputs."""
    x = inputs(length=7)
    oracle = _oracle_block(kind, option)
    oracle.build(x.shape)
    # GPT-OSS: weights 4x the unit scale, so the clamp at 7 engages.
    randomize(oracle, scale=4.0 if kind == "gpt_oss" else 1.0)
    arrays = {"inputs": x}
    for variable in oracle.weights:
        name = "/".join(variable.path.split("/")[-2:])
        arrays[f"weights/{name}"] = keras.ops.convert_to_numpy(variable)
    expected, _ = oracle(x)
    arrays["outputs"] = keras.ops.convert_to_numpy(expected)
    return arrays


def generate_oracle_data():
    cases = [("mixtral", option) for option in MIXTRAL]
    cases += [("qwen3_moe", option) for option in QWEN3_NORMALIZE]
    cases.append(("gpt_oss", None))
    return {oracle_name(*case): oracle_arrays(*case) for case in cases}


def stored_block(kind, option=None):
    """The stored inputs, weights `{last two segments: value}`, outputs."""
    stored = oracles.load(oracle_name(kind, option))
    weights = {k.split("/", 1)[1]: v for k, v in stored.items() if "/" in k}
    return stored["inputs"], weights, stored["outputs"]


@pytest.mark.parametrize("num_experts, top_k", MIXTRAL)
def test_equals_keras_hub_mixtral_block(num_experts, top_k):
    x, weights, expected = stored_block("mixtral", (num_experts, top_k))
    ours = SparseMoE(num_experts, WIDTH, top_k=top_k, kernel_initializer=ZEROS)
    ours.build(x.shape)
    copy_by_name(weights, ours)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(ours(x)), expected, atol=1e-5, rtol=1e-5
    )


@pytest.mark.parametrize("normalize", QWEN3_NORMALIZE)
def test_fused_layout_equals_keras_hub_qwen3_moe_block(normalize):
    x, weights, expected = stored_block("qwen3_moe", normalize)
    ours = SparseMoE(
        6,
        WIDTH,
        top_k=3,
        normalize_top_k=normalize,
        fused_gate_intermediate=True,
        kernel_initializer=ZEROS,
    )
    ours.build(x.shape)
    copy_by_name(weights, ours)
    actual = keras.ops.convert_to_numpy(ours(x))
    np.testing.assert_allclose(actual, expected, atol=1e-5, rtol=1e-5)
    # The comparison is sharp: the other routing normalization differs.
    ours.normalize_top_k = not normalize
    assert np.abs(keras.ops.convert_to_numpy(ours(x)) - actual).max() > 1e-2


# GPT-OSS's block: keras-hub's paths under the block's name.
GPT_OSS_OPTIONS = dict(
    activation="quick_gelu",
    routing="top_k_then_softmax",
    use_router_bias=True,
    use_expert_bias=True,
    fused_gate_intermediate=True,
    fused_layout="interleaved",
    clamp_limit=7.0,
    intermediate_offset=1.0,
    sublayer_names={
        "router": "router/router_dense",
        "gate": "gate_up_proj",
        "output": "down_proj",
        "gate_bias": "gate_up_proj_bias",
        "output_bias": "down_proj_bias",
    },
)


def test_gpt_oss_options_equal_keras_hub_gpt_oss_block():
    x, weights, expected = stored_block("gpt_oss")
    ours = SparseMoE(
        5,
        WIDTH,
        top_k=2,
        kernel_initializer=ZEROS,
        name="moe",
        **GPT_OSS_OPTIONS,
    )
    ours.build(x.shape)
    assert {v.path: tuple(v.shape) for v in ours.weights} == {
        "moe/router/router_dense/kernel": (HIDDEN, 5),
        "moe/router/router_dense/bias": (5,),
        "moe/experts/gate_up_proj": (5, HIDDEN, 2 * WIDTH),
        "moe/experts/gate_up_proj_bias": (5, 2 * WIDTH),
        "moe/experts/down_proj": (5, WIDTH, HIDDEN),
        "moe/experts/down_proj_bias": (5, HIDDEN),
    }
    copy_by_name(weights, ours)
    experts = ours.experts
    gate_up = np.einsum("bsh,ehf->bsef", x, experts.gate.numpy())
    gate_up += experts.gate_bias.numpy()
    assert np.mean(np.abs(gate_up) > 7.0) > 0.05
    actual = keras.ops.convert_to_numpy(ours(x))
    np.testing.assert_allclose(actual, expected, atol=1e-5, rtol=1e-5)
    # Without the clamp (or with the halves layout) the outputs differ.
    experts.clamp_limit = None
    assert np.abs(keras.ops.convert_to_numpy(ours(x)) - actual).max() > 1e-2
    experts.clamp_limit, experts.fused_layout = 7.0, "concatenated"
    assert np.abs(keras.ops.convert_to_numpy(ours(x)) - actual).max() > 1e-2

    config = ours.get_config()
    clone = SparseMoE.from_config(config)
    assert clone.get_config() == config
    rules = sparse_moe_rules(
        "moe/",
        sublayer_names=GPT_OSS_OPTIONS["sublayer_names"],
        fused_gate_intermediate=True,
        expert_bias_names=("gate_up_proj_bias", "down_proj_bias"),
    )
    assert [rule[0] for rule in rules] == [
        "moe/router/router_dense/kernel",
        "moe/experts/gate_up_proj",
        "moe/experts/down_proj",
        "moe/experts/gate_up_proj_bias",
        "moe/experts/down_proj_bias",
    ]


def test_aux_loss_ignores_padding_and_only_in_training():
    x = inputs()
    moe = SparseMoE(
        4, WIDTH, top_k=2, router_aux_loss_coef=0.5, kernel_initializer=ZEROS
    )
    moe.build(x.shape)
    randomize(moe)
    moe(x)
    assert moe.losses == []
    mask = np.ones((2, 5), "int32")
    mask[1] = 0
    moe(x, padding_mask=mask, training=True)
    (masked,) = [float(loss) for loss in moe.losses]
    moe(x[:1], training=True)
    (first_row,) = [float(loss) for loss in moe.losses]
    np.testing.assert_allclose(masked, first_row, rtol=1e-6)
    # A uniform router sends each expert an equal share: the loss is 1.
    moe.router.kernel.assign(np.zeros((HIDDEN, 4), "float32"))
    moe(x, training=True)
    (uniform,) = [float(loss) for loss in moe.losses]
    np.testing.assert_allclose(uniform, 0.5, rtol=1e-6)


def test_bfloat16_routes_in_float32():
    moe = SparseMoE(4, WIDTH, dtype="bfloat16")
    out = moe(inputs())
    assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"
    assert keras.backend.standardize_dtype(moe.router.kernel.dtype) == (
        "bfloat16"
    )


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(num_experts=0), ["num_experts=0", "positive integer"]),
        (dict(top_k=5), ["top_k=5", "at most `num_experts` (4)"]),
        (dict(top_k=0), ["top_k=0", "positive integer"]),
        (dict(router_jitter_noise=1.5), ["router_jitter_noise=1.5", "[0, 1)"]),
        (dict(sublayer_names={"gates": "x"}), ["gates", "valid keys"]),
        (dict(routing="top_k"), ["routing='top_k'", "'top_k_then_softmax'"]),
        (
            dict(fused_layout="interleaved"),
            ["fused_layout='interleaved'", "fused_gate_intermediate=True"],
        ),
        (
            dict(fused_gate_intermediate=True, fused_layout="pairs"),
            ["fused_layout='pairs'", "'interleaved'"],
        ),
        (dict(clamp_limit=-1.0), ["clamp_limit=-1.0", "positive number"]),
        (dict(intermediate_offset="1"), ["intermediate_offset='1'"]),
        (dict(sublayer_names={"router": "a//b"}), ["'a//b'", "nests"]),
        (dict(sublayer_names={"gate": "a/b"}), ["'a/b'", "without"]),
    ],
)
def test_invalid_arguments_are_named(kwargs, words):
    arguments = dict(num_experts=4, intermediate_dim=WIDTH, top_k=2)
    with pytest.raises(ValueError) as error:
        SparseMoE(**{**arguments, **kwargs})
    for word in words:
        assert word in str(error.value)


def test_rules_follow_the_names():
    rules = sparse_moe_rules("block/moe/")
    assert rules == [
        (
            "block/moe/sparse_feedforward_gate_dense/kernel",
            (None, None),
            ("hidden", "experts"),
        ),
        (
            "block/moe/experts/(expert_feedforward_gate_dense"
            "|expert_feedforward_intermediate_dense)",
            (EXPERT, DATA, MODEL),
            ("experts", "hidden", "ffw"),
        ),
        (
            "block/moe/experts/expert_feedforward_output_dense",
            (EXPERT, MODEL, DATA),
            ("experts", "ffw", "hidden"),
        ),
    ]
    fused = sparse_moe_rules(
        "moe/",
        sublayer_names={"experts": "bank", "gate": "w_gate_up"},
        fused_gate_intermediate=True,
    )
    assert [rule[0] for rule in fused] == [
        "moe/sparse_feedforward_gate_dense/kernel",
        "moe/bank/w_gate_up",
        "moe/bank/expert_feedforward_output_dense",
    ]
    biased = sparse_moe_rules("moe/", expert_bias_names=("in_bias", "out_bias"))
    assert biased[-2:] == [
        ("moe/experts/in_bias", (EXPERT, MODEL), ("experts", "ffw")),
        ("moe/experts/out_bias", (EXPERT, DATA), ("experts", "hidden")),
    ]


def test_docstring_example_runs():
    (block,) = re.findall(r"```python\n(.*?)```", SparseMoE.__doc__, re.DOTALL)
    namespace = {}
    exec(textwrap.dedent(block), namespace)
    assert tuple(namespace["outputs"].shape) == (2, 5, 8)


# === The sparse path (JAX's grouped matmul) against the dense one ===


def sparse_and_dense(seed=0, router_bias=None, scale=1.0, **kwargs):
    """Blocks with the same weights, one per compute path: sparse, dense,
    and slots with room for every pair (capacity = tokens)."""
    blocks = []
    no_drop = float(kwargs["num_experts"])
    for compute, capacity_factor in (
        ("sparse", None),
        ("dense", None),
        ("auto", no_drop),
    ):
        block = SparseMoE(
            compute=compute,
            capacity_factor=capacity_factor,
            kernel_initializer=ZEROS,
            **kwargs,
        )
        block.build((None, None, HIDDEN))
        randomize(block, seed, scale)
        if router_bias is not None:
            # The inputs' first feature is 1 (`biased_inputs`): a large
            # first kernel row steers every token to (or from) experts.
            kernel = keras.ops.convert_to_numpy(block.router.kernel)
            kernel[0] += router_bias
            block.router.kernel.assign(kernel)
        blocks.append(block)
    return blocks


def outputs_and_gradients(block, x):
    """The outputs, and the gradients of a loss w.r.t. inputs and weights."""
    if keras.backend.backend() != "jax":
        return keras.ops.convert_to_numpy(block(x)), []
    import jax

    def loss(weights, x):
        y, _ = block.stateless_call(weights, [], x)
        return (y * y).sum(), y

    weights = [v.value for v in block.trainable_variables]
    # One compiled program instead of op-by-op dispatch.
    (_, y), grads = jax.jit(
        jax.value_and_grad(loss, argnums=(0, 1), has_aux=True)
    )(weights, x)
    return np.asarray(y), [np.asarray(g) for g in (*grads[0], grads[1])]


CASES = {
    "mixtral_like": dict(num_experts=8, top_k=2),
    "fused_qwen3_like": dict(
        num_experts=6, top_k=3, fused_gate_intermediate=True
    ),
    # Expert 0 is never chosen: a group of zero rows.
    "an_idle_expert": dict(
        num_experts=4, top_k=2, router_bias=np.array([-50.0, 0, 0, 0])
    ),
    # Every token picks expert 2 first: one group holds them all.
    "one_expert_for_all": dict(
        num_experts=4, top_k=1, router_bias=np.array([0, 0, 50.0, 0])
    ),
    # Biases on the router and on separate gate, intermediate and output.
    "biased_separate": dict(
        num_experts=4, top_k=2, use_router_bias=True, use_expert_bias=True
    ),
    # GPT-OSS: top-k logits then softmax, interleaved fused weight with
    # biases, the clamp (engaged by the weights' scale) and the offset.
    "gpt_oss_like": dict(num_experts=5, top_k=2, scale=4.0, **GPT_OSS_OPTIONS),
}


@pytest.mark.parametrize("case", list(CASES))
def test_sparse_equals_dense_outputs_and_gradients(case):
    options = dict(CASES[case])
    router_bias = options.pop("router_bias", None)
    sparse, dense, slotted = sparse_and_dense(
        intermediate_dim=WIDTH, router_bias=router_bias, **options
    )
    x = inputs(batch=3, length=7)
    x[..., 0] = 1.0
    y_dense, grads_dense = outputs_and_gradients(dense, x)
    results = [outputs_and_gradients(block, x) for block in (sparse, slotted)]
    for y_sparse, grads_sparse in results:
        np.testing.assert_allclose(y_sparse, y_dense, atol=1e-5, rtol=1e-5)
        assert len(grads_sparse) == len(grads_dense)
        for g_sparse, g_dense in zip(grads_sparse, grads_dense, strict=True):
            np.testing.assert_allclose(g_sparse, g_dense, atol=1e-4, rtol=1e-4)
    _, grads_sparse = results[0]
    if keras.backend.backend() == "jax" and case == "an_idle_expert":
        # The idle expert's weights (gate: trainable variable 1) get no
        # gradient on either path; the others do.
        assert not np.any(grads_sparse[1][0])
        assert np.all(np.any(grads_sparse[1][1:], axis=(1, 2)))


@pytest.mark.parametrize("capacity_factor", [0.5, 1.0])
def test_a_full_expert_drops_the_later_pairs(capacity_factor):
    options = dict(num_experts=4, top_k=2, intermediate_dim=WIDTH)
    _, dense, _ = sparse_and_dense(**options)
    slotted = SparseMoE(
        capacity_factor=capacity_factor, kernel_initializer=ZEROS, **options
    )
    slotted.build((None, None, HIDDEN))
    slotted.set_weights(dense.get_weights())
    x = inputs(batch=2, length=9)
    _, top_indices, top_weights = dense._routing(x)
    top_indices = keras.ops.convert_to_numpy(top_indices).reshape(-1, 2)
    capacity = int(np.ceil(capacity_factor * 18 * 2 / 4))
    slots = looped_slots(top_indices, 4, capacity)
    dropped = slots == 4 * capacity
    assert dropped.any()
    # The dense path with the dropped pairs' weights zeroed.
    kept_weights = keras.ops.convert_to_numpy(top_weights).reshape(-1, 2)
    kept_weights = np.where(dropped, 0.0, kept_weights).reshape(2, 9, 2)
    expected = dense.experts._dense(
        x, top_indices.reshape(2, 9, 2), kept_weights.astype("float32")
    )
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(slotted(x)),
        keras.ops.convert_to_numpy(expected),
        atol=1e-5,
        rtol=1e-5,
    )
    config = slotted.get_config()
    assert config["capacity_factor"] == capacity_factor
    assert SparseMoE.from_config(config).experts.capacity_factor == (
        capacity_factor
    )


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(capacity_factor=0), ["capacity_factor=0", "positive number"]),
        (dict(capacity_factor="1"), ["capacity_factor='1'"]),
        (
            dict(capacity_factor=1.25, compute="dense"),
            ["compute='dense'", "capacity_factor=None"],
        ),
    ],
)
def test_bad_capacity_factors_are_named(kwargs, words):
    with pytest.raises(ValueError) as error:
        SparseMoE(num_experts=4, intermediate_dim=WIDTH, **kwargs)
    for word in words:
        assert word in str(error.value)


def test_configure_experts_switches_every_block():
    model = MixtralBackbone(
        vocabulary_size=32,
        num_layers=2,
        num_query_heads=2,
        num_key_value_heads=1,
        hidden_dim=HIDDEN,
        intermediate_dim=WIDTH,
        num_experts=4,
    )
    x = {
        "token_ids": np.arange(12, dtype="int32").reshape(2, 6),
        "padding_mask": np.ones((2, 6), "int32"),
    }
    reference = forward(model, x)
    assert configure_experts(model, capacity_factor=4.0) == 2
    blocks = [
        layer
        for layer in model._flatten_layers()
        if isinstance(layer, SparseMoE)
    ]
    assert [b.experts.capacity_factor for b in blocks] == [4.0, 4.0]
    np.testing.assert_allclose(forward(model, x), reference, atol=1e-5)
    with pytest.raises(ValueError, match="compute='dense'"):
        configure_experts(model, compute="dense", capacity_factor=2.0)
    with pytest.raises(ValueError, match="has no SparseMoE block"):
        configure_experts(keras.layers.Dense(2))


def test_sparse_compute_config_round_trips_and_bad_value_is_named():
    block = SparseMoE(num_experts=4, intermediate_dim=WIDTH, compute="dense")
    assert SparseMoE.from_config(block.get_config()).compute == "dense"
    with pytest.raises(ValueError, match="compute='ragged'"):
        SparseMoE(num_experts=4, intermediate_dim=WIDTH, compute="ragged")
