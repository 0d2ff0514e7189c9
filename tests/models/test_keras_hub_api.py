"""A keras-hub user's calls work unchanged: same arguments, same order."""

import functools
import inspect
from unittest import mock

import jax
import keras
import keras_hub
import numpy as np
import pytest

import keras_nlp.models
from keras_nlp.models import MixtralBackbone
from keras_nlp.models.causal_lm import causal_lm_class
from tests.models.tiny_configs import TINY_CONFIGS
from tests.models.tiny_configs import tiny
from tests.models.zoo import build_with_weights
from tests.models.zoo import reference

# The base classes are subclassed, not called, by keras-hub users.
BASE_CLASSES = (
    "Backbone",
    "CausalLM",
    "MaskedLM",
    "Seq2SeqLM",
    "TextClassifier",
)
SHARED = sorted(
    name
    for name in keras_nlp.models.__all__
    if name not in BASE_CLASSES and hasattr(keras_hub.models, name)
)


def named_parameters(cls):
    """`(name, default)` of the constructor's positional-or-keyword
    parameters, in order: the ones a keras-hub call can bind by position."""
    parameters = list(inspect.signature(cls.__init__).parameters.values())
    return [
        (p.name, None if p.default is inspect.Parameter.empty else p.default)
        for p in parameters[1:]
        if p.kind == p.POSITIONAL_OR_KEYWORD
    ]


def keyword_only_parameters(cls):
    parameters = inspect.signature(cls.__init__).parameters.values()
    return {p.name: p for p in parameters if p.kind == p.KEYWORD_ONLY}


@pytest.mark.parametrize("name", SHARED)
def test_constructor_arguments_in_keras_hubs_order(name):
    ours = named_parameters(getattr(keras_nlp.models, name))
    theirs = named_parameters(getattr(keras_hub.models, name))
    # Positional calls bind the same values to the same names.
    assert [n for n, _ in ours] == [n for n, _ in theirs]
    for (parameter, mine), (_, default) in zip(ours, theirs, strict=True):
        if not callable(default):
            assert mine == default, parameter


@pytest.mark.parametrize("name", SHARED)
def test_our_extra_options_are_keyword_only_with_defaults(name):
    # Options keras-hub lacks (e.g. exact GELU for a Hugging Face
    # checkpoint) come after `*`, so no keras-hub call binds them, and
    # their defaults keep keras-hub's architecture.
    ours = keyword_only_parameters(getattr(keras_nlp.models, name))
    theirs = keyword_only_parameters(getattr(keras_hub.models, name))
    for parameter in ours.values():
        if parameter.name not in theirs:
            assert parameter.default is not inspect.Parameter.empty, (
                parameter.name
            )


def test_mixtral_router_logits_are_a_clear_error():
    _, config = tiny("MixtralBackbone")
    with pytest.raises(ValueError, match="output_router_logits=True"):
        MixtralBackbone(**config, output_router_logits=True)
    assert "output_router_logits" in MixtralBackbone(**config).get_config()


# === Causal LMs: keras-hub's task API ===

# Every decoder family with a causal LM, on its first text-only config
# (PaliGemma's prompts carry images: its file tests its task).
DECODERS = [
    (name, "mqa_4_1" if name == "Gemma3Backbone" else "tiny")
    for name in TINY_CONFIGS
    if name != "PaliGemmaBackbone"
    and getattr(keras_nlp.models, name.replace("Backbone", "CausalLM"), None)
]
# Families with a table of learned positions, one with RoPE, and Gemma 4
# (a block reading an earlier block's cache, windows of 3).
CACHED_FAMILIES = [
    "GPT2Backbone",
    "OPTBackbone",
    "LlamaBackbone",
    "Gemma4Backbone",
]


def causal_lm(name, config_name="tiny"):
    """The zoo's backbone in its causal LM, uncompiled."""
    ref = reference(name, config_name)
    return ref, causal_lm_class(ref.backbone_cls)(ref.backbone, compile=False)


# Blocks that read more than the hidden states (Gemma 4: per-layer inputs,
# earlier blocks' keys), which Keras's GPTQ and AWQ cannot run one by one.
NO_SEQUENTIAL_BLOCKS = ("Gemma4Backbone",)


@pytest.mark.parametrize(
    "name, config_name", DECODERS, ids=[name for name, _ in DECODERS]
)
def test_score_and_quantization_structure_follow_the_forward_pass(
    name, config_name
):
    ref, lm = causal_lm(name, config_name)
    token_ids = ref.inputs["token_ids"]
    padding_mask = ref.inputs["padding_mask"]
    targets = np.roll(token_ids, -1, axis=1)

    def scores(token_ids, padding_mask, targets):
        seen = {}

        def record(hidden, index):
            seen[index] = hidden
            return hidden

        logits = lm.score(token_ids, padding_mask, layer_intercept_fn=record)
        losses = lm.score(
            token_ids, padding_mask, scoring_mode="loss", target_ids=targets
        )
        return logits, losses, seen

    # One compiled program: eager ops cost ~3x more on these tiny models.
    logits, losses, seen = jax.jit(scores)(token_ids, padding_mask, targets)
    hidden = ref.outputs
    if isinstance(hidden, dict):
        hidden = hidden["sequence_output"]
    expected = keras.ops.convert_to_numpy(
        lm.logits(keras.ops.convert_to_tensor(hidden))
    )
    np.testing.assert_allclose(logits, expected, atol=2e-5, rtol=1e-4)
    blocks = lm.backbone.decoder_stack.blocks
    assert sorted(seen) == list(range(-1, len(blocks)))

    # The loss is the per-token cross-entropy of those logits.
    shifted = expected - expected.max(-1, keepdims=True)
    log_probabilities = shifted - np.log(np.exp(shifted).sum(-1, keepdims=1))
    np.testing.assert_allclose(
        losses,
        -np.take_along_axis(log_probabilities, targets[..., None], -1)[..., 0],
        atol=1e-4,
    )

    # Keras's GPTQ walks these: token ids -> the embeddings `score` saw,
    # then the backbone's blocks in order.
    structure = lm.get_quantization_layer_structure("gptq")
    if name in NO_SEQUENTIAL_BLOCKS:
        assert structure is None
        return
    assert structure["sequential_blocks"] == blocks
    (embed,) = structure["pre_block_layers"]
    np.testing.assert_allclose(jax.jit(embed)(token_ids), seen[-1], atol=1e-6)
    assert lm.get_quantization_layer_structure("int8") is None


@pytest.mark.parametrize("name", CACHED_FAMILIES)
def test_call_with_cache_defaults_to_the_cache_positions(name):
    # Token by token, positions left at their default, the logits are
    # the full forward pass's (keras-hub's decoding calls it this way).
    ref, lm = causal_lm(name)
    token_ids = ref.inputs["token_ids"][:1, :4]
    full = lm.score(token_ids)
    cache = lm.init_cache(1, 4)
    steps = []
    for index in range(4):
        logits, _, cache = lm.call_with_cache(
            token_ids[:, index : index + 1], cache, index
        )
        steps.append(keras.ops.convert_to_numpy(logits)[:, 0])
    np.testing.assert_allclose(np.stack(steps, 1), full, atol=2e-5)


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"scoring_mode": "probabilities"}, "'logits' or 'loss'"),
        ({"scoring_mode": "loss"}, "needs `target_ids`"),
    ],
)
def test_score_errors(arguments, message):
    _, lm = causal_lm("GPT2Backbone")
    with pytest.raises(ValueError, match=message):
        lm.score(np.ones((1, 3), "int32"), **arguments)


def test_a_keras_hub_backbone_is_named_with_its_library():
    theirs = keras_hub.models.GPT2Backbone(
        vocabulary_size=16,
        num_layers=1,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=8,
    )
    with pytest.raises(ValueError) as error:
        keras_nlp.models.GPT2CausalLM(theirs)
    assert str(error.value).startswith(
        "GPT2CausalLM takes a keras_nlp.models.GPT2Backbone. Received: "
        "keras_hub.models.GPT2Backbone. Build ours from the same weights"
    )


def test_an_unknown_preprocessor_names_what_is_accepted():
    _, lm = causal_lm("GPT2Backbone")
    with pytest.raises(ValueError, match="generate_preprocess.*Received: "):
        type(lm)(lm.backbone, preprocessor=object())


# A byte-level BPE vocabulary of keras-hub's GPT-2 tokenizer, written
# here: the words of `TEXTS` and their pieces.
_PIECES = ["<|endoftext|>", "Ġ", "a", "i", "r", "p", "l", "n", "e", "t"]
_PIECES += ["h", "s", "o", "Ġa", "Ġai", "Ġair", "pl", "an", "plan", "plane"]
_PIECES += ["Ġat", "po", "por", "port", "Ġt", "Ġth", "Ġthe", "ai", "air"]
_MERGES = ["Ġ a", "Ġa i", "Ġai r", "p l", "pl an", "a n", "plan e", "Ġa t"]
_MERGES += ["p o", "po r", "por t", "Ġ t", "Ġt h", "Ġth e", "a i", "ai r"]
TEXTS = [" airplane at airport", " the airplane"]


@functools.cache
def keras_hub_preprocessor():
    # Every id of the model has a piece, so any generated id has text.
    size = reference("GPT2Backbone").config["vocabulary_size"]
    pieces = _PIECES + [f"w{i}" for i in range(size - len(_PIECES))]
    tokenizer = keras_hub.models.GPT2Tokenizer(
        vocabulary={piece: i for i, piece in enumerate(pieces)},
        merges=_MERGES,
    )
    return keras_hub.models.GPT2CausalLMPreprocessor(
        tokenizer, sequence_length=8
    )


def test_keras_hub_preprocessor_packs_text_for_generate_and_fit(tmp_path):
    preprocessor = keras_hub_preprocessor()
    ref = reference("GPT2Backbone")
    # A copy: training must not change the zoo's shared model.
    backbone = build_with_weights(
        ref.backbone_cls, ref.config, ref.backbone.weights
    )
    lm = keras_nlp.models.GPT2CausalLM(
        backbone=backbone, preprocessor=preprocessor
    )
    assert lm.preprocessor is preprocessor and lm.tokenizer is None
    assert lm.optimizer is not None  # compiled at construction

    # Text in, text out, by keras-hub's own packing.
    output = lm.generate(TEXTS[0])
    assert isinstance(output, str) and TEXTS[0] in output, output
    loop = lm.generate_function
    assert lm.generate(TEXTS[0]) == output and lm.generate_function is loop

    # Token ids in, once the preprocessor is gone; the prompt is kept
    # (the same stop id as its end token: the same compiled loop).
    packed = preprocessor.generate_preprocess([TEXTS[0]])
    prompt_length = int(np.sum(packed["padding_mask"]))
    end = preprocessor.tokenizer.end_token_id
    lm.preprocessor = None
    tokens = lm.generate(packed, stop_token_ids=[end])["token_ids"]
    np.testing.assert_array_equal(
        tokens[:, :prompt_length], packed["token_ids"][:, :prompt_length]
    )
    assert lm.generate_function is loop
    lm.preprocessor = preprocessor
    lm.compile(sampler="greedy")
    assert lm.generate_function is None

    # Early stopping: logits that favour the end token stop every row
    # at once: the text is the prompts', as the preprocessor writes them.
    prompts = preprocessor.generate_postprocess(
        preprocessor.generate_preprocess(TEXTS)
    )
    real_logits = lm.logits

    def favour_end(hidden):
        logits = real_logits(hidden)
        return logits + 1e9 * keras.ops.one_hot(end, logits.shape[-1])

    with mock.patch.object(lm, "logits", favour_end):
        assert lm.generate(TEXTS) == list(prompts)

    # `fit` and `predict` take the raw text too (`evaluate` alike).
    lm.compile(optimizer=keras.optimizers.SGD(0.1))
    history = lm.fit(x=TEXTS, batch_size=2, epochs=2, verbose=0)
    assert history.history["loss"][1] < history.history["loss"][0]
    vocabulary_size = ref.config["vocabulary_size"]
    predicted = lm.predict(TEXTS, verbose=0)
    assert predicted.shape == (2, 8, vocabulary_size)

    # A saved model loads as the same class, with keras-hub's preprocessor
    # and its vocabulary, and the same outputs (compiled: eager calls cost
    # seconds each).
    path = tmp_path / "model.keras"
    lm.save(path)
    restored = keras.saving.load_model(path)
    assert type(restored) is type(lm)
    assert type(restored.preprocessor) is type(preprocessor)
    assert restored.preprocessor.tokenizer.vocabulary == (
        preprocessor.tokenizer.vocabulary
    )
    np.testing.assert_allclose(
        restored.predict(TEXTS, verbose=0), predicted, atol=1e-6
    )


def test_bfloat16_causal_lm_generates_text_with_keras_hubs_preprocessor():
    ref = reference("GPT2Backbone")
    backbone = build_with_weights(
        ref.backbone_cls,
        {**ref.config, "dtype": "bfloat16"},
        ref.backbone.weights,
    )
    lm = keras_nlp.models.GPT2CausalLM(
        backbone, preprocessor=keras_hub_preprocessor(), compile=False
    )
    assert lm.score([[1, 2, 3]]).dtype == "bfloat16"
    assert TEXTS[1] in lm.generate(TEXTS[1], max_length=6)


def test_no_class_of_ours_shares_a_registered_name_with_keras_hub():
    # keras-hub registers each class as `keras_hub>Name` and
    # `keras_nlp>Name`; whichever library is imported last owns a shared
    # name, and copies, pickles and `.keras` files rebuild its class.
    import importlib
    import pkgutil

    import keras_nlp.layers

    registered = keras.saving.get_custom_objects()
    keras_hub_packages = {
        name.rpartition(">")[0]
        for name, obj in registered.items()
        if getattr(obj, "__module__", "").startswith("keras_hub.")
    }
    assert "keras_nlp" in keras_hub_packages
    checked, clashes = set(), []
    for package in (keras_nlp.models, keras_nlp.layers):
        prefix = package.__name__ + "."
        for info in pkgutil.walk_packages(package.__path__, prefix):
            module = importlib.import_module(info.name)
            for cls in vars(module).values():
                if not (
                    inspect.isclass(cls)
                    and cls.__module__ == info.name
                    and hasattr(cls, "get_config")
                ):
                    continue
                checked.add(cls)
                name = keras.saving.get_registered_name(cls)
                if name.rpartition(">")[0] in keras_hub_packages or (
                    registered.get(name, cls) is not cls
                ):
                    clashes.append(f"{info.name}.{cls.__name__}: {name}")
    # Backbones, tasks and layers alike, registered or not.
    assert {
        keras_nlp.models.Gemma3Backbone,
        keras_nlp.models.Gemma3VisionEncoder,
        keras_nlp.models.GemmaCausalLM,
        keras_nlp.layers.DecoderBlock,
    } <= checked
    assert not clashes
