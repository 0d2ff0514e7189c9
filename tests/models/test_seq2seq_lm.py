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
from tests import oracles
from tests.models.tiny_configs import tiny
from tests.models.zoo import build_with_weights
from tests.models.zoo import reference
from tests.models.zoo import sharded

# backbone -> (task, config of the oracle comparison). T5's is the tied
# one, whose head scales the hidden states.
CASES = {
    "BartBackbone": ("BartSeq2SeqLM", "tiny"),
    "T5Backbone": ("T5Seq2SeqLM", "relu_tied_8_heads"),
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
    if name == "T5Backbone":
        pairs = zip(oracle.weights, values, strict=True)
    else:
        pairs = [(v, by_path[v.path]) for v in oracle.weights]
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


@pytest.mark.parametrize("name", [LIVE_CASE])
def test_sharded_logits_generation_and_caches_equal_unsharded(name):
    """On one family (the other shares the loop and its layouts): BART's
    heads, and so its caches, go on the model axis."""
    ref = reference(name)
    task = getattr(keras_nlp.models, CASES[name][0])
    inputs = generation_inputs(ref.config["vocabulary_size"])
    inputs = {k: np.concatenate([v, v[:1]]) for k, v in inputs.items()}
    unsharded = task(ref.backbone)
    expected_logits = np.asarray(jit_forward(unsharded)(inputs))
    expected = unsharded.generate(inputs, stop_token_ids=None)

    backbone, distribution = sharded(name, "tiny", (2, 4))
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
    # Both caches of every block follow their key kernel: 4 heads on the
    # model axis of 4.
    planned = ("batch", None, None, "model", None)
    assert [p.spec[3] for p in self_plans + cross_plans] == ["model"] * (
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
