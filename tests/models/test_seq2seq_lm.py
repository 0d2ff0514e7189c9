"""BartSeq2SeqLM and T5Seq2SeqLM: logits, cached generation, sharding, fit.

keras-hub's logits and greedy generations (with and without stop ids) on
the same weights are stored as oracle data (`python -m tests.oracles
seq2seq_lm`); BART's are also compared live. The oracle models get fixed
weights from `deterministic_values`, so that the stored data can be
reproduced; the sharding checks use the zoo's tiny models.
"""

import functools

import jax
import keras
import numpy as np
import pytest

import keras_nlp.models
from keras_nlp.distribution.backbone_planner import backbone_variables
from keras_nlp.models.t5gemma.t5gemma_backbone import FINAL_NORM_NAMES
from keras_nlp.models.task_preprocessing import preset_token_id
from keras_nlp.tokenizers import Tokenizer
from tests import oracles
from tests.models.test_keras_hub_api import _MERGES as HUB_MERGES
from tests.models.test_keras_hub_api import _PIECES as HUB_PIECES
from tests.models.test_keras_hub_api import TEXTS as HUB_TEXTS
from tests.models.tiny_configs import tiny
from tests.models.zoo import build_with_weights
from tests.models.zoo import reference
from tests.models.zoo import sharded
from tests.tokenizers import tiny_tokenizers

# backbone -> (task, config of the oracle comparison). T5's is the tied
# one, whose head scales the hidden states.
CASES = {
    "BartBackbone": ("BartSeq2SeqLM", "tiny"),
    "T5Backbone": ("T5Seq2SeqLM", "relu_tied_8_heads"),
    # Soft caps and windows (T5Gemma), merged attention (T5Gemma 2).
    "T5GemmaBackbone": ("T5GemmaSeq2SeqLM", "tiny"),
    "T5Gemma2Backbone": ("T5Gemma2Seq2SeqLM", "tiny"),
}
DATA_PREFIX = "seq2seq_lm-"
LIVE_CASE = "BartBackbone"
PROMPT_LENGTHS = (1, 3, 2)
WIDTH = 10


def deterministic_values(backbone_cls, config, seed=0):
    """Fixed random values of the backbone's weights, in their order:
    norm scales near one, small biases, kernels scaled by their fan-in."""
    rng = np.random.default_rng(seed)
    values = []
    for variable in backbone_variables(backbone_cls, config):
        shape, leaf = variable.shape, variable.path.rsplit("/", 1)[-1]
        if len(shape) == 1 and leaf in ("gamma", "weight"):
            value = 1.0 + rng.normal(0.0, 0.2, shape)
        elif len(shape) == 1 or leaf == "bias":
            value = rng.normal(0.0, 0.1, shape)
        else:
            value = rng.normal(0.0, shape[0] ** -0.5, shape)
        values.append(value.astype("float32"))
    return values


def generation_inputs(vocabulary_size, seed=1):
    """Three sources (one padded) and right-padded decoder prompts."""
    rng = np.random.default_rng(seed)
    batch = len(PROMPT_LENGTHS)
    encoder_mask = np.ones((batch, 9), "int32")
    encoder_mask[1, 6:] = 0
    decoder_ids = np.zeros((batch, WIDTH), "int32")
    decoder_mask = np.zeros((batch, WIDTH), "int32")
    for row, length in enumerate(PROMPT_LENGTHS):
        decoder_ids[row, :length] = rng.integers(1, vocabulary_size, length)
        decoder_mask[row, :length] = 1
    return {
        "encoder_token_ids": rng.integers(
            1, vocabulary_size, (batch, 9)
        ).astype("int32"),
        "encoder_padding_mask": encoder_mask,
        "decoder_token_ids": decoder_ids,
        "decoder_padding_mask": decoder_mask,
    }


@functools.cache
def oracle_lm(name):
    """Our task on `deterministic_values`, built once."""
    task, config_name = CASES[name]
    backbone_cls, config = tiny(name, config_name)
    backbone = build_with_weights(
        backbone_cls, config, deterministic_values(backbone_cls, config)
    )
    return getattr(keras_nlp.models, task)(backbone)


def jit_forward(lm):
    """`lm`'s forward pass as one compiled program (op by op, a first
    call compiles dozens)."""
    return jax.jit(lambda inputs: lm(inputs))


@functools.cache
def oracle_forward(name):
    return jit_forward(oracle_lm(name))


def hub_lm(name):
    """keras-hub's task on the same values: BART's variables have our
    paths; T5's auto-named norms number differently, so its values go
    in our (and keras-hub's) weight order."""
    import keras_hub

    task, config_name = CASES[name]
    backbone_cls, config = tiny(name, config_name)
    values = deterministic_values(backbone_cls, config)
    oracle = getattr(keras_hub.models, name)(**config)
    ours = backbone_variables(backbone_cls, config)
    by_path = dict(zip((v.path for v in ours), values, strict=True))
    # T5Gemma's final norms are auto-named in keras-hub: numbered per
    # session, fresh-session numbers in ours.
    renamed = {
        getattr(oracle, f"{side}_norm").scale.path: (f"{norm_name}/scale")
        for side, norm_name in zip(
            ("encoder", "decoder"), FINAL_NORM_NAMES, strict=True
        )
        if name.startswith("T5Gemma")
    }
    if name == "T5Backbone":
        pairs = zip(oracle.weights, values, strict=True)
    else:
        pairs = [
            (v, by_path[renamed.get(v.path, v.path)]) for v in oracle.weights
        ]
    for variable, value in pairs:
        variable.assign(value)
    lm = getattr(keras_hub.models, task)(backbone=oracle, preprocessor=None)
    lm.compile(sampler="greedy")
    return lm


def stop_id_for(token_ids, inputs):
    """A token that the second row generates, for the stop-id case."""
    return int(token_ids[1, PROMPT_LENGTHS[1] + 1])


def hub_arrays(name):
    lm = hub_lm(name)
    inputs = generation_inputs(lm.backbone.vocabulary_size)
    outputs = lm.generate(inputs, stop_token_ids=None)
    arrays = {f"input/{k}": np.asarray(v) for k, v in inputs.items()}
    arrays["hub/logits"] = keras.ops.convert_to_numpy(lm(inputs))
    for key, value in outputs.items():
        arrays[f"hub/{key}"] = keras.ops.convert_to_numpy(value)
    stop_id = stop_id_for(arrays["hub/decoder_token_ids"], inputs)
    arrays["stop_id"] = np.array(stop_id, "int32")
    stopped = lm.generate(inputs, stop_token_ids=(stop_id,))
    for key, value in stopped.items():
        arrays[f"hub_stopped/{key}"] = keras.ops.convert_to_numpy(value)
    return arrays


def generate_oracle_data():
    return {DATA_PREFIX + name: hub_arrays(name) for name in CASES}


def stored(name):
    data = oracles.load(DATA_PREFIX + name)
    inputs = {
        k.split("/", 1)[1]: v for k, v in data.items() if k.startswith("input/")
    }
    return data, inputs


def greedy_by_full_passes(name, inputs):
    """Cache-free greedy reference: the whole decoder run again for every
    new slot, each row's prompt kept."""
    tokens = np.array(inputs["decoder_token_ids"])
    prompt = np.asarray(inputs["decoder_padding_mask"]) > 0
    forward = oracle_forward(name)
    full = {**inputs, "decoder_padding_mask": np.ones_like(tokens)}
    for slot in range(min(PROMPT_LENGTHS), tokens.shape[1]):
        logits = np.asarray(forward({**full, "decoder_token_ids": tokens}))
        chosen = logits[:, slot - 1].argmax(-1)
        tokens[:, slot] = np.where(prompt[:, slot], tokens[:, slot], chosen)
    return tokens


@pytest.mark.parametrize("name", list(CASES))
def test_logits_equal_keras_hub(name):
    data, inputs = stored(name)
    logits = np.asarray(oracle_forward(name)(inputs))
    np.testing.assert_allclose(logits, data["hub/logits"], atol=2e-5)


@pytest.mark.parametrize("name", list(CASES))
def test_greedy_generation_equals_keras_hub_and_full_passes(name):
    data, inputs = stored(name)
    lm = oracle_lm(name)
    outputs = lm.generate(inputs, stop_token_ids=None)
    tokens = outputs["decoder_token_ids"]
    np.testing.assert_array_equal(tokens, data["hub/decoder_token_ids"])
    np.testing.assert_array_equal(
        outputs["decoder_padding_mask"], data["hub/decoder_padding_mask"]
    )
    # The cached loop is the model's greedy choice at every slot.
    np.testing.assert_array_equal(tokens, greedy_by_full_passes(name, inputs))
    # Rows continue, rather than repeat one token.
    assert len(set(tokens[:, max(PROMPT_LENGTHS) :].ravel().tolist())) > 2
    assert lm.generate_traces == 1
    if name != LIVE_CASE:
        # Stop ids are the shared loop's, checked on one family: another
        # set of them compiles another loop.
        return
    stop_id = int(data["stop_id"])
    stopped = lm.generate(inputs, stop_token_ids=(stop_id,))
    mask = data["hub_stopped/decoder_padding_mask"]
    np.testing.assert_array_equal(stopped["decoder_padding_mask"], mask)
    # keras-hub leaves tokens past the stop as they came; ours are padding.
    np.testing.assert_array_equal(
        stopped["decoder_token_ids"][mask],
        data["hub_stopped/decoder_token_ids"][mask],
    )
    assert (stopped["decoder_token_ids"][~mask] == 0).all()
    assert not mask.all()
    assert lm.generate_traces == 2


@pytest.mark.parametrize("name", [LIVE_CASE])
def test_keras_hub_still_gives_the_stored_logits(name):
    """The installed keras-hub's logits are the stored ones (its greedy
    tokens follow from them, and compiling its generation is slow)."""
    data, inputs = stored(name)
    live = np.asarray(jit_forward(hub_lm(name))(inputs))
    np.testing.assert_allclose(live, data["hub/logits"], atol=1e-5)


@pytest.mark.multi_device
@pytest.mark.parametrize("mesh", [(2, 4), (1, 8)], ids=str)
@pytest.mark.parametrize("name", [LIVE_CASE])
def test_sharded_logits_generation_and_caches_equal_unsharded(name, mesh):
    """On one family (the other shares the loop and its layouts): BART's
    heads, and so its caches, go on the model axis where it divides them
    (4 on (2, 4)), and stay whole where it does not (on (1, 8))."""
    ref = reference(name)
    task = getattr(keras_nlp.models, CASES[name][0])
    inputs = generation_inputs(ref.config["vocabulary_size"])
    inputs = {k: np.concatenate([v, v[:1]]) for k, v in inputs.items()}
    unsharded = task(ref.backbone)
    expected_logits = np.asarray(jit_forward(unsharded)(inputs))
    expected = unsharded.generate(inputs, stop_token_ids=None)

    backbone, distribution = sharded(name, "tiny", mesh)
    lm = task(backbone)
    with distribution.scope():
        logits = jit_forward(lm)(inputs)
        actual = lm.generate(inputs, stop_token_ids=None)
        caches = lm.init_cache(4, WIDTH)
        encoder_output = np.zeros((4, 9, ref.config["hidden_dim"]), "float32")
        cross = jax.jit(lm.cross_attention_caches)(encoder_output)
        self_plans, cross_plans = lm._cache_plans()
    np.testing.assert_allclose(logits, expected_logits, atol=1e-5)
    np.testing.assert_array_equal(
        actual["decoder_token_ids"], expected["decoder_token_ids"]
    )
    # Both caches of every block follow their key kernel.
    heads = "model" if ref.config["num_heads"] % mesh[1] == 0 else None
    planned = ("batch", None, None, heads, None)
    assert [p.spec[3] for p in self_plans + cross_plans] == [heads] * (
        2 * ref.config["num_layers"]
    )
    expected_sharding = jax.sharding.NamedSharding(
        distribution.device_mesh.backend_mesh,
        jax.sharding.PartitionSpec(*planned),
    )
    for cache in (caches[0], cross[-1]):
        assert cache.sharding.is_equivalent_to(expected_sharding, 5)


def test_fit_lowers_the_teacher_forced_loss():
    backbone_cls, config = tiny("BartBackbone")
    config = dict(config, num_layers=1, dropout=0.0)
    backbone = build_with_weights(
        backbone_cls, config, deterministic_values(backbone_cls, config, 1)
    )
    lm = keras_nlp.models.BartSeq2SeqLM(backbone)
    lm.compile(optimizer=keras.optimizers.Adam(1e-2))
    # Every variable committed to its device, as the train step's outputs
    # are: otherwise the second step compiles the step again.
    lm.optimizer.build(lm.trainable_variables)
    for variable in lm.variables + lm.optimizer.variables:
        variable.assign(jax.device_put(variable.value, jax.devices()[0]))
    x = generation_inputs(config["vocabulary_size"])
    x["decoder_token_ids"] = x["encoder_token_ids"][:, :WIDTH]
    x["decoder_padding_mask"] = x["encoder_padding_mask"]
    # One batch per epoch: each epoch's loss is that of its start.
    losses = lm.fit(x, epochs=4, batch_size=3, verbose=0).history["loss"]
    assert losses[-1] < 0.8 * losses[0], losses
    config = lm.get_config()
    assert config["backbone"]["config"] == backbone.get_config()


# === Text and presets ===


# Two texts of the SentencePiece training text's characters; the longer
# first, so that the second is padded.
TEXT_PROMPTS = tiny_tokenizers.PLAIN[:2]
TEXT_WIDTH = 8


@functools.cache
def text_bart():
    """A BART whose vocabulary is exactly a tiny SentencePiece
    tokenizer's, so that every generated id has text."""
    tokenizer = Tokenizer(
        {"tokenizer.model": tiny_tokenizers.train_sentencepiece()}
    )
    backbone_cls, config = tiny("BartBackbone")
    config = dict(config, vocabulary_size=tokenizer.vocabulary_size)
    backbone = build_with_weights(
        backbone_cls, config, deterministic_values(backbone_cls, config, 2)
    )
    return keras_nlp.models.BartSeq2SeqLM(backbone, tokenizer=tokenizer)


def test_text_generation_is_the_decoded_token_id_generation():
    lm = text_bart()
    tokenizer = lm.tokenizer
    texts = lm.generate(TEXT_PROMPTS, TEXT_WIDTH, stop_token_ids=None)
    # The same by hand: the encoder's text with the tokenizer's special
    # tokens, right-padded; the decoder starts from BART's `</s>`.
    encoded = tokenizer.encode(TEXT_PROMPTS)
    lengths = np.array([len(ids) for ids in encoded])
    assert lengths[0] > lengths[1]
    start = tokenizer.eos_token_ids[0]
    assert lm.decoder_start_token_id == start
    encoder_ids = np.full((2, lengths[0]), tokenizer.pad_token_id)
    for row, ids in enumerate(encoded):
        encoder_ids[row, : len(ids)] = ids
    outputs = lm.generate(
        {
            "encoder_token_ids": encoder_ids,
            "encoder_padding_mask": np.arange(lengths[0]) < lengths[:, None],
            "decoder_token_ids": np.full((2, TEXT_WIDTH), start),
            "decoder_padding_mask": np.arange(TEXT_WIDTH)[None] < [[1], [1]],
        },
        stop_token_ids=None,
    )
    rows = [
        ids[mask]
        for ids, mask in zip(
            outputs["decoder_token_ids"],
            outputs["decoder_padding_mask"],
            strict=True,
        )
    ]
    assert all(row[0] == start and len(row) == TEXT_WIDTH for row in rows)
    assert texts == tokenizer.decode(rows)
    # Rows with text (not only special tokens): the check compares
    # something.
    assert all(texts), texts
    # The text path runs the same compiled loop.
    assert lm.generate_traces == 1


def test_preset_round_trip_keeps_logits_and_tokenizer(tmp_path):
    lm = text_bart()
    lm.save_to_preset(tmp_path)
    assert (tmp_path / "tokenizer.model").exists()
    loaded = keras_nlp.models.BartSeq2SeqLM.from_preset(tmp_path)
    assert loaded.tokenizer.encode(TEXT_PROMPTS) == lm.tokenizer.encode(
        TEXT_PROMPTS
    )
    assert loaded.decoder_start_token_id == lm.decoder_start_token_id
    # A Hugging Face preset's own start id wins over the family's; it is
    # kept in the task's config.
    assert preset_token_id(tmp_path, "decoder_start_token_id") is None
    huggingface = tiny_tokenizers.write_files(
        tmp_path / "hf", {"config.json": {"decoder_start_token_id": 5}}
    )
    assert preset_token_id(huggingface, "decoder_start_token_id") == 5
    started = type(lm)(
        lm.backbone,
        tokenizer=lm.tokenizer,
        decoder_start_token_id=5,
        compile=False,
    )
    assert started.decoder_start_token_id == 5
    assert started.get_config()["decoder_start_token_id"] == 5

    # One compiled forward pass, run on each model's variables.
    @jax.jit
    def forward(values, inputs):
        with keras.StatelessScope(
            state_mapping=zip(lm.variables, values, strict=True)
        ):
            return lm(inputs)

    def logits(model):
        return np.asarray(forward([v.value for v in model.variables], inputs))

    inputs = generation_inputs(lm.tokenizer.vocabulary_size)
    np.testing.assert_array_equal(logits(loaded), logits(lm))


def keras_hub_bart_preprocessor(vocabulary_size):
    """keras-hub's BART preprocessor on a tiny byte-level BPE vocabulary
    (the GPT-2 one of `test_keras_hub_api` with BART's special tokens),
    filled up to `vocabulary_size` so that every id has text."""
    import keras_hub

    pieces = ["<s>", "<pad>", "</s>", "<mask>"] + HUB_PIECES[1:]
    pieces += [f"w{i}" for i in range(vocabulary_size - len(pieces))]
    tokenizer = keras_hub.models.BartTokenizer(
        vocabulary={piece: i for i, piece in enumerate(pieces)},
        merges=HUB_MERGES,
    )
    return keras_hub.models.BartSeq2SeqLMPreprocessor(
        tokenizer, encoder_sequence_length=8, decoder_sequence_length=8
    )


def test_keras_hub_preprocessor_packs_text_for_generate_and_fit():
    # `text_bart`'s backbone: built once for the text tests.
    backbone = text_bart().backbone
    preprocessor = keras_hub_bart_preprocessor(backbone.vocabulary_size)
    lm = keras_nlp.models.BartSeq2SeqLM(backbone, preprocessor=preprocessor)
    assert lm.preprocessor is preprocessor and lm.tokenizer is None
    assert preprocessor not in lm.layers

    text = lm.generate(HUB_TEXTS[0])
    # keras-hub's own packing, generation by token ids (its end token is
    # the stop id: the same compiled loop), and its own text clean-up.
    packed = {
        key: np.asarray(value)
        for key, value in preprocessor.generate_preprocess(
            [HUB_TEXTS[0]]
        ).items()
    }
    outputs = lm.generate(packed)
    assert lm.generate_traces == 1
    end = preprocessor.tokenizer.end_token_id
    start = preprocessor.tokenizer.start_token_id
    np.testing.assert_array_equal(
        outputs["decoder_token_ids"][0, :2], [end, start]
    )
    expected = preprocessor.generate_postprocess(outputs)
    expected = np.asarray(expected).reshape(-1)[0]
    if isinstance(expected, bytes):
        expected = expected.decode("utf-8")
    assert isinstance(text, str)
    assert text == expected and text.strip(), text

    # Raw text columns are packed by the same preprocessor for `fit`,
    # `evaluate` and `predict` (what they then run is Keras's own).
    columns = {"encoder_text": HUB_TEXTS, "decoder_text": HUB_TEXTS[::-1]}
    x, y, sample_weight = lm._preprocessed(columns, None, None)
    hub_x, hub_y, hub_weight = preprocessor(columns)
    assert sorted(x) == sorted(hub_x)
    for key in x:
        np.testing.assert_array_equal(x[key], np.asarray(hub_x[key]))
    np.testing.assert_array_equal(y, hub_y)
    np.testing.assert_array_equal(sample_weight, hub_weight)
    assert x["decoder_token_ids"].shape == (2, 8)


@pytest.mark.multi_device
@pytest.mark.parametrize(
    "name, mesh",
    [
        # 2 key/value heads: on the model axis of 2, whole on that of 4 (the
        # self-attention's fallback, which the cross-attention's follows).
        ("T5GemmaBackbone", (4, 2)),
        # One merged attention per block: both caches follow its kernel.
        ("T5Gemma2Backbone", (2, 4)),
    ],
    ids=str,
)
def test_t5gemma_cross_attention_caches_are_laid_out_like_self(name, mesh):
    ref = reference(name)
    task = getattr(keras_nlp.models, CASES[name][0])
    inputs = generation_inputs(ref.config["vocabulary_size"])
    inputs = {k: np.concatenate([v, v[:1]]) for k, v in inputs.items()}
    expected = task(ref.backbone).generate(inputs, stop_token_ids=None)

    backbone, distribution = sharded(name, "tiny", mesh)
    lm = task(backbone)
    with distribution.scope():
        actual = lm.generate(inputs, stop_token_ids=None)
        caches = lm.init_cache(4, WIDTH)
        width = ref.config["encoder_hidden_dim"]
        encoder_output = np.zeros((4, 9, width), "float32")
        cross = jax.jit(lm.cross_attention_caches)(encoder_output)
        self_plans, cross_plans = lm._cache_plans()
    np.testing.assert_array_equal(
        actual["decoder_token_ids"], expected["decoder_token_ids"]
    )
    kv_heads = ref.config["decoder_num_key_value_heads"]
    heads = "model" if kv_heads % mesh[1] == 0 else None
    layers = ref.config["decoder_num_layers"]
    assert [p.spec[3] for p in self_plans + cross_plans] == [heads] * (
        2 * layers
    )
    expected_sharding = jax.sharding.NamedSharding(
        distribution.device_mesh.backend_mesh,
        jax.sharding.PartitionSpec("batch", None, None, heads, None),
    )
    for cache in (caches[0], cross[-1]):
        assert cache.sharding.is_equivalent_to(expected_sharding, 5)
