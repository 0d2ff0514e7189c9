"""Greedy generation equals keras-hub's, token for token, in every family.

For each decoder family that keras-hub 0.32 has a causal LM for, our tiny
backbone and keras-hub's get the same weights (our variable paths are
keras-hub's), keras-hub's backbone goes into its CausalLM with
`preprocessor=None` and greedy sampling, and both generate from the same
prompts: a batch of three of different lengths (3, 6 and 1 tokens), padded
on the right to the total length (10), which both fill. keras-hub decodes
the right-padded rows in place, overwriting the padding; ours takes the same
dict, re-pads the prompts on the left and counts positions from each row's
first token. The token arrays and masks must be equal. Sliding windows
shorter than the 10 tokens are on wherever keras-hub applies them while
decoding (each changes 4-14 of the 30 tokens when ours drops it); learned
positions (GPT-2, OPT) catch a position offset that RoPE would not see.

keras-hub's generations are oracle data: `python -m tests.oracles
causal_lm` runs them and stores its tokens and masks (and the logits the
GPT-NeoX and Gemma 2 checks need) under `tests/oracle_data/causal_lm-*`;
the tests run only ours (one compiled loop per family, one block unless the
family's options need two) and compare. One family (`LIVE_CASE`) also runs
keras-hub live, so a keras-hub release that generates differently shows. A
separate test compares stop tokens (one family), and one shows that Gemma
2's soft caps matter where compared.

Weights: token embeddings with std 0.1 / sqrt(hidden), so the residual
does not drown the blocks (otherwise tied heads repeat the last token, and
a position or cache bug would not show); kernels with std 2 / sqrt(d), d
the second-to-last dimension (heads x head_dim for attention outputs);
norm scales 1 + N(0, 0.2^2), biases std 0.1. Both models are built with
deferred variables: keras-hub's random initializers would compile one
program per shape (~0.5 s each here), more than its generation.

keras-hub 0.32 bugs worked around (see `Case`):
- Qwen 2, Qwen 3 and Qwen 3 MoE drop the sliding window on their fused
  attention path (taken on JAX): it is switched off for Qwen 3 and Qwen 3
  MoE. The explicit path of Qwen 2 and Qwen MoE cannot trace a windowed
  decoding step (`if cache_update_index` on a tracer), so those two run
  without a window.
- `generate` cannot return a text-only Gemma 3's outputs (`"images": None`
  fails `_normalize_generate_outputs`): Gemma 3 calls the compiled generate
  function that `generate` wraps.
- GPT-NeoX decodes with each step's query rotated at position 0, and Qwen
  3.5 (and its MoE) runs its linear attention's state over padding and
  over tokens twice: their comparisons are strict xfails, and ours is
  checked against keras-hub's forward pass instead.
"""

import contextlib
import dataclasses
import functools
import re
from unittest import mock

import keras
import keras_hub
import numpy as np
import pytest

import keras_nlp.models
from keras_nlp.saving.weight_transfer import forget_deferred
from tests import oracles
from tests.models.tiny_configs import tiny

# The comparison is one of math, run once: on JAX. Our TensorFlow loop is
# checked in test_causal_lm.py (CI's TensorFlow run would pay ~1 minute of
# compiling keras-hub's loops again).
pytestmark = pytest.mark.skipif(
    keras.backend.backend() != "jax",
    reason="keras-hub comparisons run on the JAX backend",
)

# Prompt lengths (different, one of a single token) and the total length.
LENGTHS = (3, 6, 1)
WIDTH = 10
# The generated tokens (20 in all) hold at least this many distinct ids:
# the weights make continuations depend on context, not only on the last
# token (a guard on the test's power, not a property of the models).
MIN_DISTINCT = 8


@dataclasses.dataclass(frozen=True)
class Case:
    """One family's comparison.

    Attributes:
        backbone: the backbone class name, ours and keras-hub's.
        config: the tiny config (`tests/models/tiny_configs.py`).
        options: config overrides (one block by default).
        auto_named: keras-hub layers with Keras auto names
            (`mixtral_sparse_moe_block_3`), whose suffix is dropped to
            match our paths.
        fused_attention: the keras-hub module whose fused attention path
            drops the sliding window; it is switched off while keras-hub
            traces its generation.
        direct_generate: call keras-hub's compiled generate function
            instead of `generate` (text-only Gemma 3, see the docstring).
        keras_hub_bug: why keras-hub's generation is wrong for this
            family; the comparison is then expected to fail (strictly, so
            a fixed keras-hub shows), and a test of its own compares ours
            with keras-hub's forward pass instead.
        oracle_values: optional `(oracle, values) -> [(variable, value)]`
            for keras-hub's variables, when its paths or shapes are not
            ours (SmolLM3).
    """

    backbone: str
    config: str = "tiny"
    options: tuple = ()
    auto_named: tuple = ()
    fused_attention: str = None
    direct_generate: bool = False
    keras_hub_bug: str = None
    oracle_values: object = None

    def make_config(self):
        backbone_cls, config = tiny(self.backbone, self.config)
        return backbone_cls, {**config, "num_layers": 1, **dict(self.options)}

    @property
    def task_name(self):
        return self.backbone.replace("Backbone", "CausalLM")


def _options(**kwargs):
    return tuple(kwargs.items())


_QWEN = "keras_hub.src.models.{}.{}_attention"


def _smollm3_values(oracle, values):
    """Our values for keras-hub's SmolLM3: its query, key and value
    kernels and biases flatten our heads; its output projections and RoPE
    frequencies are named outside their blocks (`o_proj/kernel` in each),
    so they are matched by block; the frequencies are RoPE's."""
    pairs = []
    for index, block in enumerate(oracle.transformer_layers):
        prefix = f"transformer_layer_{index}/self_attn/"
        attention = block.self_attn
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            for variable in getattr(attention, name).weights:
                leaf = variable.path.rsplit("/", 1)[-1]
                value = values[f"{prefix}{name}/{leaf}"]
                pairs.append((variable, value.reshape(variable.shape)))
        rope = attention.rotary_embedding
        size = attention.head_dim
        exponents = np.arange(0, size, 2, dtype="float32") / size
        pairs.append((rope.inv_freq, 1.0 / rope.rope_theta**exponents))
    given = {id(variable) for variable, _ in pairs}
    for variable in oracle.weights:
        if id(variable) not in given:
            pairs.append((variable, values[variable.path]))
    return pairs


_QWEN3_5_BUG = (
    "keras-hub 0.32's Qwen3_5CausalLM prefills the whole padded width: its "
    "linear attention layers decay their state over the padding after each "
    "prompt (the decay of a zeroed input is not 1), and decoding restarts "
    "at the shortest prompt's end, running tokens already in the state "
    "again; its tokens leave its own forward pass. See "
    "test_generation_follows_keras_hub_forward_pass."
)
_LLAMA3_HEADS = _options(num_query_heads=8, num_key_value_heads=2)
CASES = {
    "gemma": Case("GemmaBackbone"),
    # Gemma 2: soft caps far below the logits (see the Gemma 2 test), a
    # window of 4 on block 0, post-norms, queries scaled by head_dim.
    "gemma2": Case(
        "GemmaBackbone",
        "gqa_8_4_gemma2",
        _options(attention_logit_soft_cap=1.0, final_logit_soft_cap=0.3),
    ),
    # Text only, query/key norms, post-norms, a window of 4.
    "gemma3": Case("Gemma3Backbone", "mqa_4_1", direct_generate=True),
    # Four blocks, every option: local (window 3) and global blocks with
    # their own heads, the last two reading blocks 0 and 1's keys and
    # values (no cache of their own), per-layer inputs, experts.
    "gemma4": Case(
        "Gemma4Backbone",
        options=_options(
            num_layers=4, num_kv_shared_layers=2, num_experts_per_token=2
        ),
    ),
    # Llama, Llama 3 and Phi-3 (without RoPE scaling) are one architecture:
    # on Llama 3's tiny shape, our three generation loops are one program,
    # which JAX compiles once (its compilation cache, see conftest.py).
    "llama": Case("LlamaBackbone", options=_LLAMA3_HEADS),
    "llama3": Case("Llama3Backbone"),
    "mistral": Case("MistralBackbone", options=_options(sliding_window=4)),
    "mixtral": Case(
        "MixtralBackbone",
        options=_options(sliding_window=4),
        auto_named=("mixtral_sparse_moe_block",),
    ),
    "phi3": Case("Phi3Backbone", options=_LLAMA3_HEADS),
    "qwen": Case("QwenBackbone"),
    "qwen3": Case(
        "Qwen3Backbone",
        options=_options(sliding_window_size=4),
        fused_attention=_QWEN.format("qwen3", "qwen3"),
    ),
    "qwen_moe": Case(
        "QwenMoeBackbone",
        auto_named=("qwen_sparse_moe_block", "qwen_moe_mlp"),
    ),
    "qwen3_moe": Case(
        "Qwen3MoeBackbone",
        options=_options(sliding_window_size=4),
        auto_named=("qwen3_sparse_moe_block", "qwen3_moe_mlp"),
        fused_attention=_QWEN.format("qwen3_moe", "qwen3_moe"),
    ),
    # Two blocks: GPT-OSS windows every second block (block 1).
    "gpt_oss": Case("GptOssBackbone", options=_options(num_layers=2)),
    # Two blocks: the second has no RoPE.
    "smollm3": Case(
        "SmolLM3Backbone",
        options=_options(num_layers=2),
        oracle_values=_smollm3_values,
    ),
    "gpt2": Case("GPT2Backbone"),
    "opt": Case("OPTBackbone"),
    "gpt_neo_x": Case(
        "GPTNeoXBackbone",
        keras_hub_bug=(
            "keras-hub 0.32's GPTNeoXAttention rotates a decoding step's "
            "query at position 0 (its rotary layer gets no start index), "
            "so its cached generation leaves its own forward pass; with "
            "the query at cache_update_index it equals ours. See "
            "test_generation_follows_keras_hub_forward_pass."
        ),
    ),
    "bloom": Case("BloomBackbone"),
    "falcon": Case("FalconBackbone"),
    # Two blocks, linear attention then full attention (no window: the
    # backbone oracle rows compare it); the MoE's 2 of 4 experts.
    "qwen3_5": Case(
        "Qwen3_5Backbone",
        options=_options(num_layers=2, sliding_window_size=None),
        keras_hub_bug=_QWEN3_5_BUG,
    ),
    "qwen3_5_moe": Case(
        "Qwen3_5MoeBackbone",
        options=_options(num_layers=2, sliding_window_size=None, top_k=2),
        keras_hub_bug=_QWEN3_5_BUG,
    ),
}
# The family whose stop tokens are compared.
STOP_CASE = "llama"
# The family whose keras-hub generation is also run live.
LIVE_CASE = "llama"
# The families whose checks need keras-hub's logits of a forward pass.
FORWARD_LOGITS = ("gpt_neo_x", "gemma2", "qwen3_5", "qwen3_5_moe")
DATA_PREFIX = "causal_lm-"
# Causal LMs of both libraries compared to keras-hub's in another file.
COMPARED_ELSEWHERE = {
    # Images in the prompts.
    "PaliGemmaCausalLM": "tests/models/pali_gemma/test_pali_gemma_causal_lm.py",
}


def test_every_keras_hub_decoder_family_is_compared():
    """A causal LM that both libraries have is in `CASES`."""
    ours = {n for n in dir(keras_nlp.models) if n.endswith("CausalLM")}
    theirs = {n for n in dir(keras_hub.models) if n.endswith("CausalLM")}
    compared = {case.task_name for case in CASES.values()}
    assert (ours & theirs) - {"CausalLM"} - set(COMPARED_ELSEWHERE) == compared


# === Building the pair ===


def weight_value(path, shape, rng):
    """A random value for the variable at `path` (see the docstring)."""
    leaf = path.rsplit("/", 1)[-1]
    if leaf in ("bias", "beta"):
        return rng.normal(0.0, 0.1, shape)
    if leaf in ("scale", "gamma") or not shape:
        # Scalars too (Gemma 4's `layer_scalar` on each block's output).
        return 1.0 + rng.normal(0.0, 0.2, shape)
    if len(shape) == 1:
        return rng.normal(0.0, 0.5, shape)
    if leaf == "embeddings":
        return rng.normal(0.0, 0.1 * shape[-1] ** -0.5, shape)
    fan_in = shape[0] * shape[1] if "attention_output" in path else shape[-2]
    return rng.normal(0.0, 2.0 * fan_in**-0.5, shape)


def deferred(build):
    """`build()` with deferred variables: no initializer runs."""
    with keras.StatelessScope(initialize_variables=False):
        return build()


def give_values(model, values, rename=lambda path: path, pairs=None):
    """Initializes `model`'s deferred variables from `values` by path, or
    from `pairs` of `(variable, value)` when given."""
    if pairs is None:
        pairs = [(v, values[rename(v.path)]) for v in model.weights]
    try:
        for variable, value in pairs:
            variable._initialize(value)
            variable._initializer = None
        # Seed states and other non-weights start as their initializers say.
        for variable in model.variables:
            if variable._value is None:
                variable._deferred_initialize()
    finally:
        forget_deferred(model)


def random_values(backbone, seed=0):
    """Path -> a `weight_value` for each of `backbone`'s weights."""
    rng = np.random.default_rng(seed)
    return {
        v.path: weight_value(v.path, tuple(v.shape), rng).astype("float32")
        for v in backbone.weights
    }


def build_ours(case, config):
    """Our backbone for `config`, with `random_values`."""
    backbone_cls, _ = case.make_config()
    backbone = deferred(lambda: backbone_cls.from_config(config))
    give_values(backbone, random_values(backbone))
    return backbone


def build_pair(case):
    """`(ours, keras-hub's)` backbones with the same `random_values`."""
    backbone_cls, config = case.make_config()
    ours = deferred(lambda: backbone_cls.from_config(config))
    oracle = deferred(
        lambda: getattr(keras_hub.models, case.backbone)(**config)
    )
    values = random_values(ours)
    give_values(ours, values)
    if case.oracle_values is not None:
        pairs = case.oracle_values(oracle, values)
        give_values(oracle, values, pairs=pairs)
        return ours, oracle
    names = "|".join(map(re.escape, case.auto_named)) or "$^"
    pattern = re.compile(rf"\b({names})_\d+/")
    oracle_paths = sorted(pattern.sub(r"\1/", v.path) for v in oracle.weights)
    assert oracle_paths == sorted(values)
    give_values(oracle, values, lambda path: pattern.sub(r"\1/", path))
    return ours, oracle


def prompts(vocabulary_size, seed=1):
    """Right-padded prompts of `LENGTHS` tokens in `WIDTH` slots."""
    rng = np.random.default_rng(seed)
    token_ids = np.zeros((len(LENGTHS), WIDTH), "int32")
    padding_mask = np.zeros((len(LENGTHS), WIDTH), "int32")
    for row, length in enumerate(LENGTHS):
        token_ids[row, :length] = rng.integers(1, vocabulary_size, length)
        padding_mask[row, :length] = 1
    return {"token_ids": token_ids, "padding_mask": padding_mask}


def hub_generate(case, hub_lm, inputs, stop_token_ids=None):
    """keras-hub's generation of `inputs`, as NumPy arrays."""
    patch = contextlib.nullcontext()
    if case.fused_attention:
        patch = mock.patch(
            f"{case.fused_attention}.fused_attention_op_available",
            lambda: False,
        )
    with patch:
        if case.direct_generate:
            outputs = hub_lm.make_generate_function()(
                inputs, stop_token_ids=stop_token_ids
            )
        else:
            outputs = hub_lm.generate(inputs, stop_token_ids=stop_token_ids)
    return {
        key: keras.ops.convert_to_numpy(outputs[key])
        for key in ("token_ids", "padding_mask")
    }


@dataclasses.dataclass
class Generated:
    ours: object  # our CausalLM
    inputs: dict
    expected: dict  # keras-hub's outputs (stored)
    actual: dict  # ours


def hub_lm(case, oracle):
    lm = getattr(keras_hub.models, case.task_name)(
        backbone=oracle, preprocessor=None
    )
    lm.compile(sampler="greedy")
    return lm


@functools.cache
def generated(name):
    """Our greedy outputs of a case, without stop ids, and keras-hub's
    (stored by `generate_oracle_data`)."""
    case = CASES[name]
    ours = build_ours(case, case.make_config()[1])
    causal_lm = getattr(keras_nlp.models, case.task_name)(ours)
    stored = oracles.load(DATA_PREFIX + name)
    inputs = {k: stored[k] for k in ("token_ids", "padding_mask")}
    expected = {k: stored["hub/" + k] for k in ("token_ids", "padding_mask")}
    return Generated(
        causal_lm,
        inputs,
        expected,
        causal_lm.generate(inputs, stop_token_ids=None),
    )


def hub_arrays(name):
    """keras-hub's generation of a case (and the extra arrays its tests
    need), as stored."""
    case = CASES[name]
    ours, oracle = build_pair(case)
    lm = hub_lm(case, oracle)
    inputs = prompts(ours.token_embedding.input_dim)
    expected = hub_generate(case, lm, inputs)
    arrays = dict(inputs)
    arrays.update({"hub/" + k: v for k, v in expected.items()})
    if name == STOP_CASE:
        stop_ids = stop_ids_for(expected["token_ids"], inputs)
        arrays["stop_ids"] = np.array(stop_ids, "int32")
        stopped = hub_generate(case, lm, inputs, stop_ids)
        arrays.update({"hub_stopped/" + k: v for k, v in stopped.items()})
    if name in FORWARD_LOGITS:
        # keras-hub's logits over the tokens the test feeds it: ours for
        # GPT-NeoX (keras-hub's generation is wrong), keras-hub's own for
        # Gemma 2.
        if case.keras_hub_bug:
            causal_lm = getattr(keras_nlp.models, case.task_name)(ours)
            tokens = causal_lm.generate(inputs, stop_token_ids=None)
            tokens = tokens["token_ids"]
        else:
            tokens = expected["token_ids"]
        arrays["logits_tokens"] = tokens
        arrays["hub_logits"] = forward_logits(lm, tokens)
    return arrays


def generate_oracle_data():
    return {DATA_PREFIX + name: hub_arrays(name) for name in CASES}


@pytest.mark.parametrize("name", [LIVE_CASE])
def test_keras_hub_still_generates_the_stored_tokens(name):
    """The stored keras-hub generations are what the installed keras-hub
    generates (one family, live: a new version that changes generation
    shows here; every family's backbone is checked live in
    test_backbone_oracles.py)."""
    case = CASES[name]
    ours, oracle = build_pair(case)
    stored = oracles.load(DATA_PREFIX + name)
    inputs = {k: stored[k] for k in ("token_ids", "padding_mask")}
    live = hub_generate(case, hub_lm(case, oracle), inputs)
    for key, value in live.items():
        np.testing.assert_array_equal(value, stored["hub/" + key])


def continuations(token_ids):
    return [token_ids[row, n:] for row, n in enumerate(LENGTHS)]


# === Greedy generation, every family ===


def case_params():
    params = []
    for name, case in CASES.items():
        marks = ()
        if case.keras_hub_bug:
            marks = pytest.mark.xfail(strict=True, reason=case.keras_hub_bug)
        params.append(pytest.param(name, marks=marks, id=name))
    return params


@pytest.mark.parametrize("name", case_params())
def test_greedy_generation_equals_keras_hub(name):
    """Our tokens and mask are keras-hub's, with the prompts in place."""
    result = generated(name)
    expected, actual = result.expected, result.actual
    np.testing.assert_array_equal(actual["token_ids"], expected["token_ids"])
    # Without stop ids every slot is real in both.
    assert expected["padding_mask"].astype(bool).all()
    np.testing.assert_array_equal(
        actual["padding_mask"].astype(bool),
        expected["padding_mask"].astype(bool),
    )
    # The prompts are kept where they were.
    prompt = result.inputs["padding_mask"].astype(bool)
    np.testing.assert_array_equal(
        actual["token_ids"][prompt], result.inputs["token_ids"][prompt]
    )
    new_tokens = np.concatenate(continuations(expected["token_ids"]))
    assert len(set(new_tokens.tolist())) >= MIN_DISTINCT, new_tokens


# === Stop tokens ===


def choose_stop_id(expected):
    """A token some row generates mid-way and another row never does."""
    rows = continuations(expected)
    for row, tokens in enumerate(rows):
        for token in tokens[1:].tolist():
            others = [t for r, t in enumerate(rows) if r != row]
            if any(token not in t for t in others) and all(
                token not in t[:1] for t in rows
            ):
                return token
    raise AssertionError(f"no mid-way token to stop at in {rows}")


def stop_ids_for(unstopped, inputs):
    """A token some row generates mid-way, and a prompt token that no row
    generates (seen only in a prompt)."""
    stop_id = choose_stop_id(unstopped)
    generated_ids = set(np.concatenate(continuations(unstopped)).tolist())
    prompt_ids = inputs["token_ids"][inputs["padding_mask"].astype(bool)]
    prompt_stop = next(t for t in prompt_ids.tolist() if t not in generated_ids)
    return (stop_id, prompt_stop)


def test_stop_tokens_end_rows_where_keras_hub_ends_them():
    """Both stop a row at its first generated stop id (kept), and neither
    stops at a stop id inside a prompt.

    Comparable: the masks, and the tokens under them. Past a row's stop,
    ours writes padding (0); keras-hub keeps generating that row until
    every row has stopped (or the width is full) and only masks it.
    """
    result = generated(STOP_CASE)
    unstopped = result.expected["token_ids"]
    stored = oracles.load(DATA_PREFIX + STOP_CASE)
    stop_ids = tuple(stored["stop_ids"].tolist())
    assert stop_ids == stop_ids_for(unstopped, result.inputs)
    stop_id = stop_ids[0]
    expected = {
        k: stored["hub_stopped/" + k] for k in ("token_ids", "padding_mask")
    }
    actual = result.ours.generate(result.inputs, stop_token_ids=stop_ids)

    # Where each row should stop: its first generated `stop_id`.
    mask = np.ones_like(unstopped, bool)
    stopped = []
    for row, length in enumerate(LENGTHS):
        hits = np.flatnonzero(unstopped[row, length:] == stop_id)
        if hits.size:
            mask[row, length + hits[0] + 1 :] = False
            stopped.append(row)
    assert 0 < len(stopped) < len(LENGTHS), (stop_id, unstopped)
    np.testing.assert_array_equal(expected["padding_mask"].astype(bool), mask)
    np.testing.assert_array_equal(actual["padding_mask"].astype(bool), mask)
    np.testing.assert_array_equal(
        actual["token_ids"][mask], expected["token_ids"][mask]
    )
    np.testing.assert_array_equal(actual["token_ids"][mask], unstopped[mask])
    # Past the stop: our padding; keras-hub's masked continuation (some row
    # never stops, so its loop ran to the width).
    assert (actual["token_ids"][~mask] == 0).all()
    np.testing.assert_array_equal(expected["token_ids"], unstopped)


# === Checks against the forward pass ===


def forward_logits(model, token_ids):
    """A causal LM's logits over whole rows (every token real).

    On JAX, one compiled program (an eager call compiles op by op, slower).
    """
    inputs = {"token_ids": token_ids, "padding_mask": np.ones_like(token_ids)}
    if keras.backend.backend() != "jax":
        return keras.ops.convert_to_numpy(model(inputs))
    import jax

    variables = list(model.variables)

    def logits(values, inputs):
        mapping = list(zip(variables, values, strict=True))
        with keras.StatelessScope(state_mapping=mapping):
            return model(inputs)

    values = [v.value for v in variables]
    return keras.ops.convert_to_numpy(jax.jit(logits)(values, inputs))


def greedy_mismatches(logits, token_ids):
    """How many generated tokens are not the argmax of the logits before."""
    predicted = logits.argmax(-1)
    return sum(
        int(np.sum(predicted[row, length - 1 : -1] != token_ids[row, length:]))
        for row, length in enumerate(LENGTHS)
    )


@pytest.mark.parametrize(
    "name", [name for name, case in CASES.items() if case.keras_hub_bug]
)
def test_generation_follows_keras_hub_forward_pass(name):
    """Each token ours generates is the argmax of keras-hub's logits over
    our output, where keras-hub's cached generation is wrong (GPT-NeoX,
    Qwen 3.5, see `CASES`)."""
    result = generated(name)
    tokens = result.actual["token_ids"]
    stored = oracles.load(DATA_PREFIX + name)
    # The stored logits are keras-hub's over these very tokens.
    np.testing.assert_array_equal(tokens, stored["logits_tokens"])
    assert greedy_mismatches(stored["hub_logits"], tokens) == 0


def test_gemma2_soft_caps_shape_the_compared_outputs():
    """The soft caps are in play where `generate` is compared.

    The attention cap decides tokens: without it, our greedy continuation
    would leave keras-hub's at the first generated slot whose
    teacher-forced argmax differs. The final cap is monotonic, so greedy
    tokens cannot show it; our logits equal keras-hub's and lie in the
    cap's curved range, where uncapped ones would differ by far more.
    """
    case = CASES["gemma2"]
    result = generated("gemma2")
    tokens = result.expected["token_ids"]
    _, config = case.make_config()
    uncapped = type(result.ours)(
        build_ours(case, dict(config, attention_logit_soft_cap=None))
    )
    assert greedy_mismatches(forward_logits(uncapped, tokens), tokens) > 0

    actual = forward_logits(result.ours, tokens)
    stored = oracles.load(DATA_PREFIX + "gemma2")
    np.testing.assert_array_equal(tokens, stored["logits_tokens"])
    np.testing.assert_allclose(
        actual, stored["hub_logits"], atol=1e-5, rtol=1e-5
    )
    final_cap = dict(case.options)["final_logit_soft_cap"]
    # |capped| > 0.9 cap means |uncapped| > 1.47 cap.
    assert 0.9 * final_cap < np.abs(actual).max() < final_cap
