"""WhisperAudioToText: cached generation, sharding, the log-mel front end.

The generation checks use the zoo's tiny Whisper config with the fixed
values of `deterministic_values` (the zoo's random ones make the tiny
decoder repeat one token whatever the audio); the front end is checked
against the mel filters' definition, computed again here in float64
another way (each triangle by interpolation between its corners).
"""

import functools

import jax
import numpy as np
import pytest

import keras_nlp.models
from keras_nlp.models.whisper import log_mel_spectrogram
from keras_nlp.models.whisper import mel_filters
from tests.models.test_seq2seq_lm import deterministic_values
from tests.models.tiny_configs import tiny
from tests.models.zoo import build_with_weights
from tests.models.zoo import distribution_for

NAME = "WhisperBackbone"
PROMPT_LENGTHS = (1, 3, 2, 1)
WIDTH = 10
FRAMES = 15


def generation_inputs(config, seed=1):
    """Random log-mel frames and right-padded decoder prompts."""
    rng = np.random.default_rng(seed)
    batch = len(PROMPT_LENGTHS)
    tokens = np.zeros((batch, WIDTH), "int32")
    mask = np.zeros((batch, WIDTH), "int32")
    for row, length in enumerate(PROMPT_LENGTHS):
        tokens[row, :length] = rng.integers(
            1, config["vocabulary_size"], length
        )
        mask[row, :length] = 1
    features = rng.normal(size=(batch, FRAMES, config["num_mels"]))
    return {
        "encoder_features": features.astype("float32"),
        "decoder_token_ids": tokens,
        "decoder_padding_mask": mask,
    }


def tiny_config():
    """The zoo's tiny config with one block a side: half the compiling."""
    backbone_cls, config = tiny(NAME)
    return backbone_cls, dict(config, num_layers=1)


@functools.cache
def unsharded():
    """`(task, inputs, its greedy tokens)` of `tiny_config`."""
    backbone_cls, config = tiny_config()
    backbone = build_with_weights(
        backbone_cls, config, deterministic_values(backbone_cls, config)
    )
    lm = keras_nlp.models.WhisperAudioToText(backbone)
    inputs = generation_inputs(config)
    tokens = lm.generate(inputs, stop_token_ids=None)["decoder_token_ids"]
    return lm, inputs, tokens


def test_cached_greedy_generation_equals_full_forward_passes():
    lm, inputs, tokens = unsharded()
    forward = jax.jit(lambda x: lm(x))
    # Cache-free greedy: the whole backbone again for every new slot.
    expected = np.array(inputs["decoder_token_ids"])
    prompt = inputs["decoder_padding_mask"] > 0
    full = {**inputs, "decoder_padding_mask": np.ones_like(expected)}
    for slot in range(min(PROMPT_LENGTHS), WIDTH):
        logits = np.asarray(forward({**full, "decoder_token_ids": expected}))
        chosen = logits[:, slot - 1].argmax(-1)
        expected[:, slot] = np.where(prompt[:, slot], expected[:, slot], chosen)
    np.testing.assert_array_equal(tokens, expected)
    # Rows continue, rather than repeat one token.
    assert len(set(tokens[:, max(PROMPT_LENGTHS) :].ravel().tolist())) > 2
    # The audio reaches the tokens (through the cross-attention caches):
    # other features, other continuations, with the same loop.
    swapped = {**inputs, "encoder_features": inputs["encoder_features"][::-1]}
    other = lm.generate(swapped, stop_token_ids=None)["decoder_token_ids"]
    assert (other != tokens).any(axis=1).sum() >= 2
    assert lm.generate_traces == 1
    # The cached prefill's logits are the forward pass's.
    backbone = lm.backbone

    def prefill(features, token_ids):
        cross = lm.cross_attention_caches(backbone.encode(features))
        caches = lm.init_cache(token_ids.shape[0], WIDTH)
        return lm.call_with_cache(token_ids, caches, cross, 0, None)[0]

    cached = jax.jit(prefill)(inputs["encoder_features"], expected)
    logits = forward({**full, "decoder_token_ids": expected})
    np.testing.assert_allclose(cached, logits, atol=2e-5)


@pytest.mark.multi_device
@pytest.mark.parametrize("mesh", [(2, 4), (1, 8)], ids=str)
def test_sharded_generation_and_caches_equal_unsharded(mesh):
    """Both caches follow the key kernels: tiny's 4 heads on the model
    axis of 4, whole on the model axis of 8."""
    lm_unsharded, inputs, expected = unsharded()
    distribution = distribution_for(type(lm_unsharded.backbone), mesh)
    with distribution.scope():
        backbone = build_with_weights(
            type(lm_unsharded.backbone),
            tiny_config()[1],
            lm_unsharded.backbone.weights,
        )
    lm = keras_nlp.models.WhisperAudioToText(backbone)
    batch = len(PROMPT_LENGTHS)
    with distribution.scope():
        actual = lm.generate(inputs, stop_token_ids=None)
        caches = lm.init_cache(batch, WIDTH)
        encoder_output = jax.jit(backbone.encode)(inputs["encoder_features"])
        cross = jax.jit(lm.cross_attention_caches)(encoder_output)
        self_plans, cross_plans = lm._cache_plans()
    np.testing.assert_array_equal(actual["decoder_token_ids"], expected)
    layers = backbone.num_layers
    heads = "model" if backbone.num_heads % mesh[1] == 0 else None
    assert [p.spec[3] for p in self_plans + cross_plans] == [heads] * (
        2 * layers
    )
    expected_sharding = jax.sharding.NamedSharding(
        distribution.device_mesh.backend_mesh,
        jax.sharding.PartitionSpec("batch", None, None, heads, None),
    )
    # The cross-attention caches span the encoder's (FRAMES + 1) // 2.
    assert cross[-1].shape[2] == (FRAMES + 1) // 2
    for cache in (caches[0], cross[-1]):
        assert cache.sharding.is_equivalent_to(expected_sharding, 5)


def test_generate_rejects_wrong_features():
    lm, inputs, _ = unsharded()
    features = inputs["encoder_features"]
    cases = [
        (features[0], r"\(batch, frames, num_mels=8\)`. Received shape: "),
        (features[..., :5], r"Received shape: \(4, 15, 5\)"),
        (
            np.zeros((4, 33, 8), "float32"),
            r"length 33 of `encoder_features`.*max_encoder_sequence_length=32",
        ),
    ]
    for bad, message in cases:
        with pytest.raises(ValueError, match=message):
            lm.generate({**inputs, "encoder_features": bad})
    with pytest.raises(ValueError, match="with `encoder_features` and"):
        lm.generate({"decoder_token_ids": inputs["decoder_token_ids"]})
    assert lm.generate_traces == 1


def slaney_triangles(sampling_rate, num_fft, num_mels):
    """The filters again: corners from the mel scale's two pieces, each
    triangle interpolated through (lower, 0), (center, 2 / width),
    (upper, 0)."""
    nyquist_mel = 15.0 + 27.0 * np.log(sampling_rate / 2 / 1000.0) / np.log(6.4)
    mels = np.linspace(0.0, nyquist_mel, num_mels + 2)
    corners = np.array(
        [
            m * 200.0 / 3.0 if m < 15.0 else 1000.0 * 6.4 ** ((m - 15.0) / 27)
            for m in mels
        ]
    )
    bins = np.arange(num_fft // 2 + 1) * sampling_rate / num_fft
    rows = [
        np.interp(bins, (lower, center, upper), (0, 2 / (upper - lower), 0))
        for lower, center, upper in zip(
            corners[:-2], corners[1:-1], corners[2:], strict=True
        )
    ]
    return np.array(rows), corners


def test_mel_filters_follow_the_slaney_definition():
    filters = mel_filters(16000, 400, 80)
    expected, corners = slaney_triangles(16000, 400, 80)
    assert filters.shape == (80, 201)
    np.testing.assert_allclose(filters, expected, atol=1e-12)
    # Wide filters (above 1 kHz) sample their unit area well on 40 Hz bins.
    areas = filters.sum(axis=1) * 40.0
    wide = corners[2:] - corners[:-2] > 400.0
    np.testing.assert_allclose(areas[wide], 1.0, atol=0.03)


def test_log_mel_of_tones_peaks_at_their_mel_bins():
    rate = 16000
    time = np.arange(rate) / rate
    tones = (500.0, 3000.0)
    audio = np.stack([0.5 * np.sin(2 * np.pi * f * time) for f in tones])
    features = log_mel_spectrogram(audio, sampling_rate=rate)
    assert features.shape == (2, 100, 80)
    assert features.dtype == np.float32
    filters, corners = slaney_triangles(rate, 400, 80)
    for row, frequency in enumerate(tones):
        peak = features[row].mean(axis=0).argmax()
        # The filter weighing the tone most, interpolated between bins.
        weights = [
            np.interp(frequency, np.arange(201) * 40.0, f) for f in filters
        ]
        assert peak == np.argmax(weights)
        assert corners[peak] < frequency < corners[peak + 2]
        # Clamped to 8 (scaled: 2) below the maximum: silent bins sit there.
        spread = features[row].max() - features[row].min()
        np.testing.assert_allclose(spread, 2.0, atol=1e-6)
    padded = log_mel_spectrogram(audio[0], num_frames=3000)
    assert padded.shape == (3000, 80)
    np.testing.assert_allclose(padded[:90], features[0, :90], atol=1e-5)
    with pytest.raises(ValueError, match=r"Received shape: \(1, 2, 3\)"):
        log_mel_spectrogram(np.zeros((1, 2, 3)))
