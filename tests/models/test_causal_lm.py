"""`CausalLM` on one device: generation, sampling, stop tokens, lengths,
text, training, presets and config.

Runs on JAX; CI runs the tests marked `tensorflow_pass` again on
TensorFlow, where `generate` compiles its loop with `tf.function`, samples
with TensorFlow's stateless ops, and `fit` and `predict` trace their steps
as TensorFlow graphs.

A `generate` call compiles its loop once per model instance, sampler, stop
tokens and shape (a few seconds), so the tests share module-level models
and call them with few shapes: most calls continue the prompts `PROMPTS`
(5 and 3 tokens, left-padded) to `MAX_LENGTH`. The families' models share
their shapes, so that building one reuses the weight initializers another
compiled.

The reference of generation does not use the cache: `greedy_full_forward`
continues each prompt alone by argmax over full forward passes of the
growing sequence. The weights (`sensitive`) make continuations depend on
their context: with them, a loop that attended to the left padding, or
(GPT-2, OPT) that counted positions from the first slot instead of each
row's first token, gives other tokens than the reference.
"""

import functools
import json

import keras
import numpy as np
import pytest

from keras_nlp.models import BertBackbone
from keras_nlp.models import CausalLM
from keras_nlp.models import GemmaCausalLM
from keras_nlp.models import GPT2CausalLM
from keras_nlp.models import LlamaBackbone
from keras_nlp.models import LlamaCausalLM
from keras_nlp.models.causal_lm import causal_lm_class
from keras_nlp.models.sampling import Sampler
from keras_nlp.models.sampling import get_sampler
from keras_nlp.models.sampling import next_tokens
from keras_nlp.tokenizers import Tokenizer
from tests.models.backbone_checks import randomized
from tests.models.causal_lm_checks import generated
from tests.models.causal_lm_checks import greedy_full_forward
from tests.models.causal_lm_checks import sensitive
from tests.models.tiny_configs import backbone_class
from tests.models.tiny_configs import tiny
from tests.tokenizers import tiny_tokenizers

# What CI runs on TensorFlow too: the generation loop (left padding per
# position scheme, tracing, sampling, stop tokens), training, and a preset
# and a config with `predict`.
tensorflow_pass = pytest.mark.tensorflow_pass

_DIMS = dict(vocabulary_size=96, num_layers=1, hidden_dim=32)
_HEADS = dict(num_heads=4, intermediate_dim=64)
_GQA = dict(num_query_heads=4, num_key_value_heads=2, intermediate_dim=64)
# Position schemes: backbone class, config, scale of the embeddings.
FAMILIES = {
    "llama_rope": ("LlamaBackbone", dict(_DIMS, **_GQA), 1.0),
    # A quarter of each head rotated; one fused query/key/value kernel.
    "gpt_neox_partial_rope_fused_qkv": (
        "GPTNeoXBackbone",
        dict(_DIMS, **_HEADS, rotary_percentage=0.25, max_sequence_length=32),
        1.0,
    ),
    "gpt2_learned_positions": (
        "GPT2Backbone",
        dict(_DIMS, **_HEADS, max_sequence_length=32),
        1.0,
    ),
    "opt_learned_positions": (
        "OPTBackbone",
        dict(_DIMS, **_HEADS, max_sequence_length=32),
        1.0,
    ),
    "bloom_alibi": ("BloomBackbone", dict(_DIMS, **_HEADS), 1.0),
    # A window of 3, shorter than the 5-token prompt; two blocks, so that
    # what the first block's window sees reaches the second's.
    "mistral_window_3": (
        "MistralBackbone",
        dict(_DIMS, **_GQA, num_layers=2, sliding_window=3),
        1.0,
    ),
    # Gemma 2: an attention soft cap low enough to change the scores, a
    # final soft cap, a window of 4, post-norms. Gemma scales its
    # embeddings up by sqrt(hidden_dim): smaller ones keep them from
    # drowning the attention.
    "gemma2_soft_caps": (
        "GemmaBackbone",
        dict(
            _DIMS,
            **_GQA,
            head_dim=8,
            query_head_dim_normalize=True,
            use_post_ffw_norm=True,
            use_post_attention_norm=True,
            attention_logit_soft_cap=2.0,
            final_logit_soft_cap=30.0,
            use_sliding_window_attention=True,
            sliding_window_size=4,
        ),
        0.2,
    ),
    # Qwen 3.5: a linear attention block (its state, not a cache of keys,
    # carries the prompt: left padding must leave it untouched) before a
    # full attention block with a window of 3 and half of each head
    # rotated.
    "qwen3_5_recurrent_state": (
        "Qwen3_5Backbone",
        dict(
            _DIMS,
            **_GQA,
            num_layers=2,
            head_dim=8,
            layer_types=["linear_attention", "full_attention"],
            partial_rotary_factor=0.5,
            sliding_window_size=3,
            linear_num_key_heads=2,
            linear_num_value_heads=4,
            linear_key_head_dim=8,
            linear_value_head_dim=8,
            linear_conv_kernel_dim=3,
        ),
        1.0,
    ),
    # Llama 4: chunks of 3 (a RoPE block; the shorter prompt's 2 pads
    # would shift them) and query temperatures that grow with each
    # position (a NoPE block), both counted from a row's first real
    # token, as they are for the row alone.
    "llama4_chunks_temperature": (
        "Llama4Backbone",
        dict(
            _DIMS,
            **_GQA,
            num_layers=2,
            intermediate_dim_mlp=64,
            num_experts=2,
            interleave_moe_layer_step=2,
            no_rope_layers=[1, 0],
            attention_chunk_size=3,
            floor_scale=1,
            attn_scale=2.0,
        ),
        1.0,
    ),
}
PROMPTS = [[11, 12, 13, 14, 15], [21, 22, 23]]
MAX_LENGTH = 9


@functools.cache
def family_lm(family):
    """A one-block (two for Mistral) causal LM of a family."""
    name, config, embedding_scale = FAMILIES[family]
    backbone_cls = backbone_class(name)
    # `sensitive` scales its draws by the initial values' spread: seed the
    # initializers, so the weights do not depend on which tests ran before
    # (GPT-NeoX repeated tokens after one order of CI's TensorFlow run).
    keras.utils.set_random_seed(0)
    backbone = sensitive(backbone_cls(**config), 1, embedding_scale)
    return causal_lm_class(backbone_cls)(backbone)


def llama():
    return family_lm("llama_rope")


# Other prompts of the lengths of `PROMPTS`, in the other order.
OTHER_PROMPTS = [[31, 32, 33], [34, 35, 36, 37, 38]]


@functools.cache
def llama_greedy():
    """The shared Llama's first greedy generations, in this order, with
    its trace count before and after each: `PROMPTS`, `OTHER_PROMPTS`
    (same shape), `PROMPTS[1]` alone (a new shape), `PROMPTS` again."""
    model = llama()
    traces = [model.generate_traces]
    outputs = []
    for prompts in (PROMPTS, OTHER_PROMPTS, [PROMPTS[1]], PROMPTS):
        outputs.append(model.generate(prompts, max_length=MAX_LENGTH))
        traces.append(model.generate_traces)
    return outputs, traces


def llama_reference():
    """Greedy `PROMPTS` to `MAX_LENGTH` on the shared Llama."""
    return llama_greedy()[0][0]


@functools.cache
def llama_instance(purpose):
    """Another `LlamaCausalLM` on the shared backbone: its own compiled
    loops, so that its sampler or stop tokens do not replace another's."""
    return LlamaCausalLM(llama().backbone)


# === Left padding: a batch equals its rows alone and a full forward ===

# Where the rows alone are also generated (a compile each): a relative and
# an absolute position scheme.
ALONE_FAMILIES = ("llama_rope", "gpt2_learned_positions")


@tensorflow_pass
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_left_padded_batch_equals_rows_alone_and_full_forward(family):
    model = family_lm(family)
    if family == "llama_rope":
        batch = llama_reference()
    else:
        batch = model.generate(PROMPTS, max_length=MAX_LENGTH)
    assert batch["token_ids"].shape == (2, MAX_LENGTH)
    np.testing.assert_array_equal(batch["padding_mask"], 1)
    # Not a degenerate model that repeats a few tokens.
    assert len({t for row in generated(batch, PROMPTS) for t in row}) >= 5

    expected = greedy_full_forward(model, PROMPTS, MAX_LENGTH)
    np.testing.assert_array_equal(batch["token_ids"], expected)
    if family in ALONE_FAMILIES:
        # The shorter prompt, left-padded in the batch, alone.
        if family == "llama_rope":
            alone = llama_greedy()[0][2]
        else:
            alone = model.generate([PROMPTS[1]], max_length=MAX_LENGTH)
        np.testing.assert_array_equal(alone["token_ids"], expected[1:])
        np.testing.assert_array_equal(alone["padding_mask"], 1)


# === Tracing ===


@tensorflow_pass
def test_generate_traces_once_per_batch_prompt_and_total_length():
    outputs, traces = llama_greedy()
    start = traces[0]
    # PROMPTS traces; other prompts of its shape don't; PROMPTS[1] alone
    # (a new batch size and prompt length) does; PROMPTS again doesn't.
    assert traces == [start, start + 1, start + 1, start + 2, start + 2]
    np.testing.assert_array_equal(
        outputs[3]["token_ids"], outputs[0]["token_ids"]
    )
    # The seed is an input of the loop (greedy here: it changes nothing).
    model = llama()
    before = model.generate_traces
    output = model.generate(OTHER_PROMPTS, max_length=MAX_LENGTH, seed=5)
    assert model.generate_traces == before
    np.testing.assert_array_equal(output["token_ids"], outputs[1]["token_ids"])


def test_max_new_tokens_traces_once_per_longest_prompt():
    """With `max_new_tokens` the loop's shape is the batch and the longest
    prompt: other lengths of the shorter prompts reuse it. With
    `max_length`, rows fill up to it, so the shortest prompt sets the
    cache length, and a new shortest prompt traces anew (documented)."""
    model = llama()
    model.generate([[1], [2, 3, 4, 5, 6]], max_new_tokens=3)
    traces = model.generate_traces
    model.generate([[1, 2, 3, 4], [5, 6, 7, 8, 9]], max_new_tokens=3)
    assert model.generate_traces == traces
    model.generate([[1], [2, 3, 4, 5, 6]], max_length=MAX_LENGTH)
    traces = model.generate_traces
    model.generate([[1, 2, 3, 4], [5, 6, 7, 8, 9]], max_length=MAX_LENGTH)
    assert model.generate_traces == traces + 1


# === Samplers ===

HOT = Sampler(temperature=2.0)


@functools.cache
def hot_generation(seed):
    return llama_instance("hot").generate(
        PROMPTS, max_length=MAX_LENGTH, sampler=HOT, seed=seed
    )


@tensorflow_pass
def test_seeded_sampling_is_reproducible_and_seeds_differ():
    model = llama_instance("hot")
    first = hot_generation(1)
    traces = model.generate_traces
    again = model.generate(PROMPTS, max_length=MAX_LENGTH, sampler=HOT, seed=1)
    other = model.generate(PROMPTS, max_length=MAX_LENGTH, sampler=HOT, seed=2)
    # The seed is an input of the compiled loop, not part of it.
    assert model.generate_traces == traces
    np.testing.assert_array_equal(again["token_ids"], first["token_ids"])
    assert generated(other, PROMPTS) != generated(first, PROMPTS)
    # A high temperature leaves the greedy path.
    assert generated(first, PROMPTS) != generated(llama_reference(), PROMPTS)
    # Prompts are kept.
    np.testing.assert_array_equal(first["token_ids"][0, :5], PROMPTS[0])


def test_switching_samplers_back_does_not_trace_again():
    """`generate` is traced once per shape: going back to a sampler used
    before reuses its compiled loop."""
    model = llama_instance("hot")
    hot_generation(1)
    model.generate(PROMPTS, max_length=MAX_LENGTH)
    traces = model.generate_traces
    model.generate(PROMPTS, max_length=MAX_LENGTH, sampler=HOT, seed=2)
    model.generate(PROMPTS, max_length=MAX_LENGTH)
    assert model.generate_traces == traces


def test_compiled_sampler_is_the_default():
    model = llama_instance("compiled_sampler")
    # Top-k keeps 3 tokens, then top-p only the most likely: greedy.
    sampler = Sampler(top_k=3, top_p=1e-3, temperature=2.0)
    model.compile(sampler=sampler)
    assert model.sampler == sampler
    output = model.generate(PROMPTS, max_length=MAX_LENGTH, seed=3)
    np.testing.assert_array_equal(
        output["token_ids"], llama_reference()["token_ids"]
    )


# Probabilities of a 5-token vocabulary, most likely first: 1, 3, 4, 0, 2.
PROBABILITIES = np.array([0.1, 0.4, 0.05, 0.3, 0.15])
DRAWS = 4000


def sampler_id(value):
    """`top_k=2-top_p=0.8` for a `Sampler`: its arguments that are set."""
    if not isinstance(value, Sampler):
        return None
    defaults = Sampler()
    changed = [
        f"{field}={getattr(value, field)}"
        for field in ("greedy", "temperature", "top_k", "top_p", "seed")
        if getattr(value, field) != getattr(defaults, field)
    ]
    return "-".join(changed) or "random"


def draw(sampler, seed=3, step=0):
    logits = np.tile(np.log(PROBABILITIES), (DRAWS, 1)).astype("float32")
    tokens = next_tokens(
        keras.ops.convert_to_tensor(logits),
        sampler,
        keras.ops.convert_to_tensor(seed, "int32"),
        keras.ops.convert_to_tensor(step, "int32"),
    )
    tokens = keras.ops.convert_to_numpy(tokens)
    assert tokens.shape == (DRAWS,) and tokens.dtype == np.int32
    return tokens


def frequencies(tokens):
    return np.bincount(tokens, minlength=len(PROBABILITIES)) / len(tokens)


def renormalized(kept, temperature=1.0):
    weights = np.zeros_like(PROBABILITIES)
    weights[kept] = PROBABILITIES[kept] ** (1.0 / temperature)
    return weights / weights.sum()


@tensorflow_pass
@pytest.mark.parametrize(
    "sampler, kept",
    [
        (Sampler(), [0, 1, 2, 3, 4]),
        (Sampler(top_k=2), [1, 3]),
        (Sampler(top_k=4), [0, 1, 3, 4]),
        (Sampler(top_k=9), [0, 1, 2, 3, 4]),
        # Before each token (most likely first): 0, .4, .7, .85, .95.
        (Sampler(top_p=0.3), [1]),
        (Sampler(top_p=0.5), [1, 3]),
        (Sampler(top_p=0.8), [1, 3, 4]),
        (Sampler(top_p=1.0), [0, 1, 2, 3, 4]),
        (Sampler(top_k=2, top_p=0.8), [1, 3]),
        (Sampler(top_k=3, top_p=0.5), [1, 3]),
    ],
    ids=sampler_id,
)
def test_next_tokens_draws_from_the_truncated_distribution(sampler, kept):
    tokens = draw(sampler)
    assert set(np.unique(tokens).tolist()) == set(kept)
    np.testing.assert_allclose(
        frequencies(tokens), renormalized(kept), atol=0.04
    )


@tensorflow_pass
def test_next_tokens_temperature_sharpens_and_flattens():
    for temperature in (0.5, 3.0):
        tokens = draw(Sampler(temperature=temperature))
        np.testing.assert_allclose(
            frequencies(tokens),
            renormalized([0, 1, 2, 3, 4], temperature),
            atol=0.04,
        )


@tensorflow_pass
def test_next_tokens_greedy_and_seeds():
    np.testing.assert_array_equal(draw(get_sampler("greedy")), 1)
    np.testing.assert_array_equal(draw(Sampler(top_k=1, temperature=9.0)), 1)
    # Each step draws with its own seed; the same seed and step repeat.
    first = draw(Sampler(), seed=3, step=4)
    np.testing.assert_array_equal(draw(Sampler(), seed=3, step=4), first)
    assert np.mean(draw(Sampler(), seed=3, step=5) != first) > 0.3
    assert np.mean(draw(Sampler(), seed=4, step=4) != first) > 0.3


def test_get_sampler_names():
    assert get_sampler("greedy") == Sampler(greedy=True)
    assert get_sampler("random") == Sampler()
    assert get_sampler("top_k") == Sampler(top_k=5)
    assert get_sampler("top_p") == Sampler(top_p=0.9)
    assert get_sampler({"top_k": 3, "seed": 1}) == Sampler(top_k=3, seed=1)
    sampler = Sampler(top_p=0.5)
    assert get_sampler(sampler) is sampler


@pytest.mark.parametrize(
    "arguments, message",
    [
        (dict(temperature=0), "`temperature` must be a number > 0. "),
        (dict(temperature="hot"), "Received: temperature='hot'"),
        (dict(top_k=0), "`top_k` must be a positive integer or None. "),
        (dict(top_k=2.5), "Received: top_k=2.5."),
        (dict(top_k=True), "Received: top_k=True."),
        (dict(top_p=0), "`top_p` must be in (0, 1] or None. "),
        (dict(top_p=1.5), "Received: top_p=1.5."),
        (
            dict(seed=1.5),
            "`seed` must be an int from -2**31 to 2**31 - 1, or None. "
            "Received: seed=1.5.",
        ),
        (dict(seed=2**31), "Received: seed=2147483648."),
        (
            dict(greedy=True, top_k=3),
            "A greedy sampler takes the most likely token, so it takes no "
            "`temperature`, `top_k` or `top_p`. Received: temperature=1.0, "
            "top_k=3, top_p=None; use greedy=False to sample.",
        ),
    ],
    ids=str,
)
def test_sampler_argument_errors(arguments, message):
    with pytest.raises(ValueError) as error:
        Sampler(**arguments)
    assert message in str(error.value)
    with pytest.raises(ValueError) as error:
        get_sampler(arguments)
    assert message in str(error.value)


def test_unknown_sampler_name():
    with pytest.raises(ValueError) as error:
        get_sampler("beam")
    assert str(error.value) == (
        "Unknown sampler 'beam'. Use one of ('greedy', 'random', 'top_k', "
        "'top_p'), a dict of `Sampler` arguments or a "
        "`keras_nlp.models.sampling.Sampler`."
    )
    with pytest.raises(ValueError, match="Unknown sampler 'beam'"):
        llama().generate(PROMPTS, max_length=MAX_LENGTH, sampler="beam")


# === Stop tokens ===


@tensorflow_pass
def test_a_row_stops_at_its_stop_token_and_the_others_continue():
    reference = llama_reference()
    continuations = generated(reference, PROMPTS)
    # Row 0's first generated token (drawn by the prefill step), which
    # row 1 never generates.
    stop = continuations[0][0]
    assert stop not in continuations[1]
    model = llama_instance("stop")
    output = model.generate(
        PROMPTS, max_length=MAX_LENGTH, stop_token_ids=[stop]
    )
    # Kept, then padding (id 0 without a tokenizer) and mask 0.
    length = len(PROMPTS[0]) + 1
    np.testing.assert_array_equal(
        output["token_ids"][0],
        list(reference["token_ids"][0, :length]) + [0] * (MAX_LENGTH - length),
    )
    np.testing.assert_array_equal(
        output["padding_mask"][0], [1] * length + [0] * (MAX_LENGTH - length)
    )
    np.testing.assert_array_equal(
        output["token_ids"][1], reference["token_ids"][1]
    )
    np.testing.assert_array_equal(output["padding_mask"][1], 1)
    # An int works as a list of one.
    traces = model.generate_traces
    single = model.generate(PROMPTS, max_length=MAX_LENGTH, stop_token_ids=stop)
    assert model.generate_traces == traces
    np.testing.assert_array_equal(single["token_ids"], output["token_ids"])


@pytest.mark.parametrize(
    "stop_token_ids, message",
    [
        (
            [5, 96],
            "`stop_token_ids`, position 1: token id 96 is outside the "
            "vocabulary; valid ids are 0 to 95 (vocabulary_size=96).",
        ),
        (
            -1,
            "`stop_token_ids`, position 0: token id -1 is outside the "
            "vocabulary; valid ids are 0 to 95 (vocabulary_size=96).",
        ),
        (
            [2.5],
            "`stop_token_ids`, position 0: token ids must be integers; "
            "received 2.5 (float).",
        ),
        (
            "eos",
            "`stop_token_ids` must be 'auto', None or a list of ints. "
            "Received: 'eos'.",
        ),
    ],
    ids=str,
)
def test_stop_token_ids_errors(stop_token_ids, message):
    with pytest.raises(ValueError) as error:
        llama().generate(
            PROMPTS, max_length=MAX_LENGTH, stop_token_ids=stop_token_ids
        )
    assert str(error.value) == message


# === Lengths ===


def test_max_length_is_the_length_of_every_row():
    reference = llama_reference()
    assert reference["token_ids"].shape == (2, MAX_LENGTH)
    np.testing.assert_array_equal(reference["padding_mask"], 1)
    assert [len(row) for row in generated(reference, PROMPTS)] == [4, 6]


def test_max_new_tokens_is_the_number_of_new_tokens_of_every_row():
    reference = llama_reference()
    output = llama().generate(PROMPTS, max_new_tokens=4)
    # The longest prompt plus max_new_tokens wide.
    assert output["token_ids"].shape == (2, 9)
    assert [len(row) for row in generated(output, PROMPTS)] == [4, 4]
    np.testing.assert_array_equal(
        output["token_ids"][0], reference["token_ids"][0]
    )
    np.testing.assert_array_equal(
        output["token_ids"][1], list(reference["token_ids"][1, :7]) + [0, 0]
    )
    np.testing.assert_array_equal(output["padding_mask"][1], [1] * 7 + [0, 0])


def test_prompt_layouts_give_the_same_generation():
    reference = llama_reference()["token_ids"]
    model = llama()
    # Right-padded to MAX_LENGTH, without max_length: the padding is filled.
    right = np.zeros((2, MAX_LENGTH), "int32")
    right[0, :5], right[1, :3] = PROMPTS
    right_mask = (np.arange(MAX_LENGTH) < np.array([[5], [3]])).astype("int32")
    output = model.generate({"token_ids": right, "padding_mask": right_mask})
    np.testing.assert_array_equal(output["token_ids"], reference)
    # Left-padded, with max_length.
    left = np.array([PROMPTS[0], [0, 0, *PROMPTS[1]]], "int32")
    left_mask = np.array([[1] * 5, [0, 0, 1, 1, 1]], "int32")
    output = model.generate(
        {"token_ids": left, "padding_mask": left_mask}, max_length=MAX_LENGTH
    )
    np.testing.assert_array_equal(output["token_ids"], reference)
    # An int array without padding.
    output = model.generate(
        np.array([PROMPTS[0], PROMPTS[0]]), max_length=MAX_LENGTH
    )
    np.testing.assert_array_equal(output["token_ids"], reference[[0, 0]])


def test_strip_prompt_returns_the_generated_tokens_only():
    reference = llama_reference()
    output = llama().generate(PROMPTS, max_length=MAX_LENGTH, strip_prompt=True)
    assert output["token_ids"].shape == (2, MAX_LENGTH)
    for row, tokens in enumerate(generated(reference, PROMPTS)):
        padding = MAX_LENGTH - len(tokens)
        np.testing.assert_array_equal(
            output["token_ids"][row], tokens + [0] * padding
        )
        np.testing.assert_array_equal(
            output["padding_mask"][row], [1] * len(tokens) + [0] * padding
        )


@pytest.mark.parametrize(
    "inputs, arguments, message",
    [
        (
            PROMPTS,
            dict(max_length=9, max_new_tokens=4),
            "Pass `max_length` or `max_new_tokens`, not both. Received: "
            "max_length=9, max_new_tokens=4.",
        ),
        (
            PROMPTS,
            dict(max_length=5),
            "A prompt of 5 tokens leaves nothing to generate within "
            "max_length=5. Pass a larger `max_length` or use "
            "`max_new_tokens`.",
        ),
        (
            PROMPTS,
            {},
            "Pass `max_length` (the length a row may reach, prompt "
            "included) or `max_new_tokens` for prompts given as lists or "
            "text.",
        ),
        (
            PROMPTS,
            dict(max_length=0),
            "`max_length` must be a positive integer. Received: max_length=0.",
        ),
        (
            PROMPTS,
            dict(max_new_tokens=True),
            "`max_new_tokens` must be a positive integer. Received: "
            "max_new_tokens=True.",
        ),
        (
            PROMPTS,
            dict(max_length=9.0),
            "`max_length` must be a positive integer. Received: "
            "max_length=9.0.",
        ),
        (
            {
                "token_ids": np.array([[1, 2, 3, 4]]),
                "padding_mask": np.array([[1, 0, 1, 1]]),
            },
            dict(max_length=9),
            "Row 0 of `padding_mask` has padding between real tokens; pad "
            "each prompt on the left or the right only. Received: "
            "[1, 0, 1, 1].",
        ),
        (
            [[1, 2], []],
            dict(max_length=9),
            "Prompt 1 is empty; every prompt needs at least one token (a "
            "start token, for instance).",
        ),
        (
            {
                "token_ids": np.array([[1, 2], [3, 4]]),
                "padding_mask": np.array([[0, 0], [1, 1]]),
            },
            dict(max_length=9),
            "Prompt 0 is empty; every prompt needs at least one token",
        ),
        ([], dict(max_length=9), "`generate` received no prompts."),
        (
            "the lazy dog",
            dict(max_new_tokens=4),
            "Text prompts need a tokenizer, and this LlamaCausalLM has none "
            "(its preset directory had no tokenizer.json or "
            "tokenizer.model). Pass token ids, or `tokenizer=` when building "
            "the model.",
        ),
        (
            {"ids": np.array([[1, 2]])},
            dict(max_length=9),
            "A dict of prompts needs `token_ids` (and optionally "
            "`padding_mask`). Received keys: ['ids'].",
        ),
        (
            np.array([[0.5, 1.5]]),
            dict(max_length=9),
            "`generate` takes a string or list of strings, a list of token "
            "id lists, a 2D int array, or a dict with `token_ids` and "
            "`padding_mask`. Received: ndarray.",
        ),
        *(
            (
                [[1, 2], [3, bad]],
                dict(max_new_tokens=4),
                f"Prompt 1, position 1: token id {bad} is outside the "
                "vocabulary; valid ids are 0 to 95 (vocabulary_size=96).",
            )
            for bad in (96, 10**6, -1)
        ),
        *(
            (
                [[1, bad]],
                dict(max_new_tokens=4),
                "Prompt 0, position 1: token ids must be integers; received "
                f"{shown}.",
            )
            for bad, shown in ((1.5, "1.5 (float)"), ("7", "'7' (str)"))
        ),
        (
            {"token_ids": np.array([[0.0, 2.0]])},
            dict(max_new_tokens=4),
            "Prompt 0, position 0: token ids must be integers; received 0.0 "
            "(float64).",
        ),
        (
            PROMPTS,
            dict(max_new_tokens=4, seed=1.5),
            "`seed` must be an int from -2**31 to 2**31 - 1, or None. "
            "Received: seed=1.5.",
        ),
        *(
            (
                PROMPTS,
                arguments,
                f"Generating to {total} positions exceeds the 1048576 that "
                "`generate` allows a model without learned positions "
                "(LlamaBackbone). Pass a smaller `max_length` or "
                "`max_new_tokens`.",
            )
            for arguments, total in (
                (dict(max_new_tokens=10**7), 10**7 + 5),
                (dict(max_new_tokens=10**9), 10**9 + 5),
                (dict(max_length=10**9), 10**9),
            )
        ),
        (
            # Within the positions, but 4 TiB of caches: more than any
            # host has (2**15 rows x 2**20 slots x 128 bytes).
            [[1]] * 2**15,
            dict(max_length=2**20),
            "The key/value caches of 32768 rows of 1048576 slots would take "
            "4.00 TiB, more than the ",
        ),
    ],
    ids=[
        "both_lengths",
        "prompt_too_long",
        "no_length",
        "zero_length",
        "bool_length",
        "float_length",
        "padding_between_tokens",
        "empty_prompt",
        "empty_masked_prompt",
        "no_prompts",
        "text_without_tokenizer",
        "dict_without_token_ids",
        "float_array",
        "id_of_vocabulary_size",
        "id_1e6",
        "id_minus_1",
        "float_id",
        "string_id",
        "float_token_ids",
        "float_seed",
        "max_new_tokens_1e7",
        "max_new_tokens_1e9",
        "max_length_1e9",
        "caches_past_memory",
    ],
)
def test_generate_input_errors(inputs, arguments, message):
    model = llama()
    traces = model.generate_traces
    with pytest.raises(ValueError) as error:
        model.generate(inputs, **arguments)
    assert message in str(error.value)
    # One line, raised before the loop is traced (or anything allocated).
    assert "\n" not in str(error.value)
    assert model.generate_traces == traces


@pytest.mark.parametrize(
    "arguments, total",
    [(dict(max_length=40), 40), (dict(max_new_tokens=31), 33)],
    ids=str,
)
def test_generating_past_learned_positions_is_an_error(arguments, total):
    model = family_lm("gpt2_learned_positions")
    with pytest.raises(ValueError) as error:
        model.generate([[1, 2]], **arguments)
    assert str(error.value) == (
        f"Generating to {total} positions exceeds the GPT2Backbone's learned "
        "positions (max_sequence_length=32). Pass a smaller `max_length` or "
        "`max_new_tokens`."
    )


def test_mixed_prompt_lengths_may_each_reach_max_sequence_length():
    """Each row's positions count from its first token: left padding does
    not count against GPT-2's 32 learned positions."""
    model = family_lm("gpt2_learned_positions")
    output = model.generate([[1, 2, 3], [4]], max_length=32)
    assert output["token_ids"].shape == (2, 32)
    np.testing.assert_array_equal(output["padding_mask"], 1)


# === Text in and out ===


@functools.cache
def sentencepiece_files():
    return {"tokenizer.model": tiny_tokenizers.train_sentencepiece()}


@functools.cache
def text_lm():
    """A one-block Llama with a tokenizer of exactly its vocabulary."""
    tokenizer = Tokenizer(sentencepiece_files())
    config = dict(
        FAMILIES["llama_rope"][1], vocabulary_size=tokenizer.vocabulary_size
    )
    backbone = sensitive(LlamaBackbone(**config), seed=2)
    return LlamaCausalLM(backbone, tokenizer=tokenizer)


# The longest prompt first.
TEXTS = ["the lazy dog turns into", "Keras"]


@functools.cache
def text_generation():
    """`TEXTS` continued by 4 tokens: texts, and the same from token ids."""
    model = text_lm()
    texts = model.generate(TEXTS, max_new_tokens=4, stop_token_ids=None)
    ids = model.generate(
        model.tokenizer.encode(TEXTS), max_new_tokens=4, stop_token_ids=None
    )
    return texts, ids


def test_text_in_text_out():
    model = text_lm()
    tokenizer = model.tokenizer
    assert len(tokenizer.encode(TEXTS[0])) > len(tokenizer.encode(TEXTS[1]))
    texts, ids = text_generation()
    assert isinstance(texts, list) and len(texts) == 2
    for text, prompt in zip(texts, TEXTS, strict=True):
        assert isinstance(text, str)
        assert text.startswith(prompt)
        assert len(text) > len(prompt)
    # The texts are the decoded ids.
    assert texts == [
        tokenizer.decode(row[mask == 1])
        for row, mask in zip(ids["token_ids"], ids["padding_mask"], strict=True)
    ]
    # One string in, one string out: the longest prompt's row.
    single = model.generate(TEXTS[0], max_new_tokens=4, stop_token_ids=None)
    assert isinstance(single, str)
    assert single == texts[0]


def test_eos_of_the_tokenizer_stops_generation():
    model = text_lm()
    _, ids = text_generation()
    continuations = generated(ids, model.tokenizer.encode(TEXTS))
    # The end of sequence: a token that row 0 generates after its first
    # (inside the loop) and before its last, and row 1 never does.
    position, eos = next(
        (position, token)
        for position, token in enumerate(continuations[0][:-1])
        if position > 0
        and token not in continuations[0][:position]
        and token not in continuations[1]
    )
    files = dict(sentencepiece_files())
    files["generation_config.json"] = json.dumps({"eos_token_id": eos}).encode()
    tokenizer = Tokenizer(files)
    assert tokenizer.eos_token_ids == (eos,)
    stopping = LlamaCausalLM(model.backbone, tokenizer=tokenizer)

    output = stopping.generate(tokenizer.encode(TEXTS), max_new_tokens=4)
    # Row 0 keeps its EOS, then is padded with the tokenizer's pad id:
    # without a PAD token, the EOS. Row 1 goes on as before.
    kept = len(tokenizer.encode(TEXTS[0])) + position + 1
    np.testing.assert_array_equal(
        output["token_ids"][0, :kept], ids["token_ids"][0, :kept]
    )
    np.testing.assert_array_equal(output["token_ids"][0, kept:], eos)
    np.testing.assert_array_equal(
        output["padding_mask"][0],
        np.arange(output["padding_mask"].shape[1]) < kept,
    )
    np.testing.assert_array_equal(
        output["padding_mask"][1], ids["padding_mask"][1]
    )
    real = ids["padding_mask"][1] == 1
    np.testing.assert_array_equal(
        output["token_ids"][1][real], ids["token_ids"][1][real]
    )
    np.testing.assert_array_equal(output["token_ids"][1][~real], eos)

    texts = stopping.generate(TEXTS, max_new_tokens=4)
    assert texts == tokenizer.decode(
        [
            row[mask == 1]
            for row, mask in zip(
                output["token_ids"], output["padding_mask"], strict=True
            )
        ]
    )


def test_eos_ids_of_the_tokenizer_files_are_checked_as_stop_ids_are():
    files = dict(sentencepiece_files())
    files["generation_config.json"] = json.dumps(
        {"eos_token_id": [2, 10**12]}
    ).encode()
    tokenizer = Tokenizer(files)
    model = LlamaCausalLM(text_lm().backbone, tokenizer=tokenizer)
    size = tokenizer.vocabulary_size
    with pytest.raises(ValueError) as error:
        model.generate([[1, 2]], max_new_tokens=2)
    assert str(error.value) == (
        "generation_config.json `eos_token_id`: token id 1000000000000 is "
        f"outside the vocabulary; valid ids are 0 to {size - 1} "
        f"(vocabulary_size={size}). Correct the file, or pass "
        "`stop_token_ids` to `generate`."
    )
    assert model.generate_traces == 0


def test_ids_past_the_tokenizers_vocabulary_are_left_out_of_text():
    # Embedding tables are often padded past the tokenizer (Qwen's): an
    # untrained row that wins a step has no text, and is dropped with a
    # warning naming it rather than failing the whole decode.
    tokenizer = Tokenizer(sentencepiece_files())
    padded = tokenizer.vocabulary_size + 4
    past = padded - 1

    class PaddedLM(LlamaCausalLM):
        def logits(self, hidden_states):
            logits = super().logits(hidden_states)
            return logits + keras.ops.cast(
                keras.ops.one_hot(past, padded) * 1e4, logits.dtype
            )

    config = dict(FAMILIES["llama_rope"][1], vocabulary_size=padded)
    model = PaddedLM(LlamaBackbone(**config), tokenizer=tokenizer)
    ids = model.generate([tokenizer.encode(TEXTS[1])], max_new_tokens=2)
    prompt_length = len(tokenizer.encode(TEXTS[1]))
    np.testing.assert_array_equal(ids["token_ids"][0, prompt_length:], past)
    with pytest.warns(UserWarning, match=rf"\[{past}\] are past the"):
        text = model.generate(TEXTS[1], max_new_tokens=2, stop_token_ids=None)
    assert text == tokenizer.decode(tokenizer.encode(TEXTS[1]))


# === Training ===


FIT_PROMPT_LENGTH = 8


def fit_data():
    """8 rows of 8 tokens, rows 4-7 right-padded: a repeated pattern."""
    rng = np.random.default_rng(0)
    token_ids = rng.integers(1, 96, (8, FIT_PROMPT_LENGTH)).astype("int32")
    padding_mask = np.ones_like(token_ids)
    padding_mask[4:, 5:] = 0
    token_ids[4:, 5:] = 0
    return {"token_ids": token_ids, "padding_mask": padding_mask}


def test_compile_defaults():
    model = LlamaCausalLM(llama().backbone)
    model.compile()
    optimizer = model.optimizer
    assert type(optimizer) is keras.optimizers.AdamW
    assert float(optimizer.learning_rate) == pytest.approx(5e-5)
    assert optimizer.weight_decay == pytest.approx(0.01)
    assert type(model.loss) is keras.losses.SparseCategoricalCrossentropy
    assert model.loss.get_config()["from_logits"] is True
    assert model.sampler == Sampler(greedy=True)
    # Its accuracy metric: see the fit test.


@tensorflow_pass
def test_fit_on_token_ids_without_targets_lowers_the_loss():
    config = FAMILIES["llama_rope"][1]
    model = LlamaCausalLM(randomized(LlamaBackbone, config, seed=3))
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-2))
    history = model.fit(fit_data(), batch_size=4, epochs=8, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.7 * losses[0], losses
    # The default metric: accuracy of the next real token.
    accuracy = history.history["accuracy"]
    assert accuracy[-1] > accuracy[0], accuracy


def masked_cross_entropy(logits, token_ids, padding_mask):
    """Mean cross-entropy of each real token predicting the next real one."""
    logits = logits[:, :-1].astype("float64")
    targets = token_ids[:, 1:]
    weights = (padding_mask[:, 1:] * padding_mask[:, :-1]).astype("float64")
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]
    return float(-(picked * weights).sum() / weights.sum())


@functools.cache
def loss_model():
    model = LlamaCausalLM(llama().backbone)
    model.compile()
    return model


def loss_inputs(width=6, seed=0):
    """Fixed logits and token ids; row 1 right-padded, row 2 left-padded."""
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(1, 96, (3, width)).astype("int32")
    padding_mask = np.ones_like(token_ids)
    padding_mask[1, 4:] = 0
    padding_mask[2, :2] = 0
    logits = rng.normal(0, 2, (3, width, 96)).astype("float32")
    return token_ids, padding_mask, logits


def compute_loss(token_ids, padding_mask, logits):
    model = loss_model()
    x = {"token_ids": token_ids, "padding_mask": padding_mask}
    loss = model.compute_loss(x=x, y=None, y_pred=logits)
    return float(keras.ops.convert_to_numpy(loss))


def test_compute_loss_is_the_masked_next_token_cross_entropy():
    token_ids, padding_mask, logits = loss_inputs()
    expected = masked_cross_entropy(logits, token_ids, padding_mask)
    assert compute_loss(token_ids, padding_mask, logits) == pytest.approx(
        expected, rel=1e-5
    )
    # More padding on the right of every row leaves the mean over real
    # tokens as it is.
    wider_ids, wider_mask, wider_logits = loss_inputs(width=9)
    wider_ids[:, :6], wider_logits[:, :6] = token_ids, logits
    wider_mask[:] = 0
    wider_mask[:, :6] = padding_mask
    assert compute_loss(wider_ids, wider_mask, wider_logits) == pytest.approx(
        expected, rel=1e-5
    )


def test_padding_tokens_and_their_logits_do_not_change_the_loss():
    token_ids, padding_mask, logits = loss_inputs()
    loss = compute_loss(token_ids, padding_mask, logits)
    other_ids, _, other_logits = loss_inputs(seed=1)
    padding = padding_mask == 0
    # The logits at a padded position predict nothing; the last real
    # token's logits predict padding, which is not learned either.
    token_ids[padding] = other_ids[padding]
    logits[padding] = other_logits[padding]
    logits[1, 3] = other_logits[1, 3]
    assert compute_loss(token_ids, padding_mask, logits) == pytest.approx(
        loss, rel=1e-6
    )
    # A real token does change it.
    token_ids[0, 3] = (token_ids[0, 3] + 1) % 96
    assert compute_loss(token_ids, padding_mask, logits) != pytest.approx(
        loss, rel=1e-3
    )


def test_accuracy_counts_real_next_tokens_only():
    token_ids, padding_mask, logits = loss_inputs()
    weights = padding_mask[:, 1:] * padding_mask[:, :-1]
    targets = token_ids[:, 1:]
    # Right at every position not learned, and at every other learned one.
    right = (weights == 0) | (np.cumsum(weights, axis=1) % 2 == 0)
    rows, columns = np.nonzero(right)
    logits[rows, columns, targets[rows, columns]] = 100.0
    predicted = logits[:, :-1].argmax(axis=-1)
    expected = ((predicted == targets) * weights).sum() / weights.sum()
    assert 0.2 < expected < 0.8
    model = loss_model()
    for metric in model.metrics:
        metric.reset_state()
    x = {"token_ids": token_ids, "padding_mask": padding_mask}
    results = model.compute_metrics(x, None, logits)
    assert float(results["accuracy"]) == pytest.approx(expected, rel=1e-6)


def test_compute_loss_with_targets_uses_them():
    token_ids, _, logits = loss_inputs()
    model = loss_model()
    x = {"token_ids": token_ids, "padding_mask": np.ones_like(token_ids)}
    loss = model.compute_loss(x=x, y=token_ids, y_pred=logits)
    # Each position predicts its own token: no shift.
    expected = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(
        token_ids, logits
    )
    assert float(keras.ops.convert_to_numpy(loss)) == pytest.approx(
        float(keras.ops.convert_to_numpy(expected)), rel=1e-5
    )


# === Presets and config ===


@tensorflow_pass
def test_preset_round_trip_with_tokenizer(tmp_path):
    model = text_lm()
    model.save_to_preset(tmp_path)
    assert (tmp_path / "tokenizer.model").read_bytes() == (
        sentencepiece_files()["tokenizer.model"]
    )
    loaded = CausalLM.from_preset(tmp_path)
    assert type(loaded) is LlamaCausalLM
    assert loaded.tokenizer is not None
    assert loaded.tokenizer.encode(TEXTS) == model.tokenizer.encode(TEXTS)
    texts, _ = text_generation()
    assert loaded.generate(TEXTS, max_new_tokens=4, stop_token_ids=None) == (
        texts
    )
    # A Hugging Face export's config.json holds the tokenizer's ids.
    model.save_to_preset(tmp_path / "hf", format="huggingface")
    fields = json.loads((tmp_path / "hf" / "config.json").read_text())
    tokenizer = model.tokenizer
    assert fields["bos_token_id"] == tokenizer.bos_token_id is not None
    assert fields["eos_token_id"] == tokenizer.eos_token_ids[0]
    assert fields["pad_token_id"] == tokenizer.pad_token_id


def test_preset_round_trip_without_tokenizer(tmp_path):
    model = family_lm("gpt2_learned_positions")
    model.save_to_preset(tmp_path)
    assert not (tmp_path / "tokenizer.json").exists()
    assert not (tmp_path / "tokenizer.model").exists()
    loaded = CausalLM.from_preset(tmp_path)
    assert type(loaded) is GPT2CausalLM
    assert loaded.tokenizer is None
    assert loaded.backbone.get_config() == model.backbone.get_config()
    for actual, expected in zip(
        loaded.get_weights(), model.get_weights(), strict=True
    ):
        np.testing.assert_array_equal(actual, expected)
    assert type(GPT2CausalLM.from_preset(tmp_path)) is GPT2CausalLM


def test_config_is_keras_serialization_without_tensorflow(monkeypatch):
    # Keras's serializer imports TensorFlow (its start-up banner in a JAX
    # program) to rule out TensorFlow types; get_config must not reach it.
    from keras.src.saving import serialization_lib

    model = llama()
    expected = keras.saving.serialize_keras_object(model.backbone)

    class TensorFlowConsulted:
        @property
        def available(self):
            raise AssertionError("get_config looked for TensorFlow")

    monkeypatch.setattr(serialization_lib, "tf", TensorFlowConsulted())
    assert model.get_config()["backbone"] == expected


@tensorflow_pass
def test_config_round_trip_gives_the_same_logits():
    model = llama()
    config = keras.saving.serialize_keras_object(model)
    assert config["class_name"] == "LlamaCausalLM"
    assert config["config"]["backbone"]["class_name"] == "LlamaBackbone"
    restored = keras.saving.deserialize_keras_object(
        json.loads(json.dumps(config))
    )
    assert type(restored) is LlamaCausalLM
    assert restored.backbone.get_config() == model.backbone.get_config()
    restored.set_weights(model.get_weights())
    inputs = {
        "token_ids": np.array([PROMPTS[0] + [1] * 4, PROMPTS[1] + [1] * 6]),
        "padding_mask": np.ones((2, MAX_LENGTH), "int32"),
    }
    expected = model.predict(inputs, verbose=0)
    assert expected.shape == (2, MAX_LENGTH, 96)
    np.testing.assert_allclose(
        restored.predict(inputs, verbose=0), expected, atol=1e-6
    )


# === Backbones without a causal LM ===


def encoder_backbone():
    """A tiny BERT; on JAX built abstractly (`jax.eval_shape`): the check
    reads only its type and attributes, no weight needs a value."""
    backbone_cls, config = tiny("BertBackbone", "two_heads")
    if keras.backend.backend() != "jax":
        return backbone_cls(**config)
    import jax

    built = []
    jax.eval_shape(lambda: built.append(backbone_cls(**config)))
    return built[0]


def test_an_encoder_backbone_has_no_causal_lm():
    with pytest.raises(ValueError) as error:
        causal_lm_class(BertBackbone)
    message = str(error.value)
    assert message.startswith(
        "BertBackbone has no causal LM: it is not a decoder. Decoders with "
        "one: "
    )
    assert "LlamaBackbone" in message and "GemmaBackbone" in message
    assert "BertBackbone" not in message.split(":", 2)[-1]

    with pytest.raises(ValueError) as error:
        CausalLM(encoder_backbone())
    assert str(error.value) == (
        "BertBackbone is not a decoder backbone (it keeps no "
        "`decoder_stack`), so it cannot generate. Use a decoder such as "
        "GemmaBackbone or LlamaBackbone."
    )


def test_a_family_causal_lm_takes_its_own_backbone():
    with pytest.raises(ValueError) as error:
        GemmaCausalLM(llama().backbone)
    assert str(error.value) == (
        "GemmaCausalLM takes a keras_nlp.models.GemmaBackbone. Received: "
        "keras_nlp.models.LlamaBackbone."
    )
    assert causal_lm_class(LlamaBackbone) is LlamaCausalLM
