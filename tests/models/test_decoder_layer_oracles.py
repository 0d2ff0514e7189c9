"""Decoder position layers equal keras-hub's: stored oracle outputs.

ALiBi's slopes (BLOOM, Falcon) for the presets' head counts, Phi-3's
su-scaled RoPE at cache indices on both sides of its pretraining length
(decoding steps pick the factors), and gpt-oss's YaRN RoPE at angles near
300 radians, against keras-hub's layers' outputs, stored by
`python -m tests.oracles decoder_layers`. The backbones' rows in
tests/models/oracle_cases.py cover these layers inside whole models.
"""

import keras
import numpy as np

from keras_nlp.layers.cached_attention import alibi_slopes
from keras_nlp.models.gpt_oss.yarn_rotary_embedding import YarnRotaryEmbedding
from keras_nlp.models.phi3.phi3_rotary_embedding import (
    Phi3SuScaledRotaryEmbedding,
)
from tests import oracles

DATA = "decoder_layers"
ALIBI_HEADS = [1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32]
# Factors for 8-dim heads, a pretraining length of 10: (start index, length)
# of each call, below, at and past it.
SU = dict(
    max_sequence_length=128, pretraining_sequence_length=10, max_wavelength=100
)
SU_FACTORS = ([1.0, 1.3, 1.7, 2.0], [1.0, 4.0, 9.0, 16.0])
SU_CALLS = [(start, n) for start in (0, 5, 9, 10, 30) for n in (1, 4)]
YARN = dict(
    max_wavelength=150000,
    original_max_position_embeddings=64,
    beta_fast=32.0,
    beta_slow=1.0,
)
YARN_CALLS = [
    (factor, truncate) for factor in (1.0, 32.0) for truncate in (True, False)
]
YARN_START = 290


def _inputs():
    rng = np.random.default_rng(0)
    arrays = {f"su_input/{n}": rng.normal(size=(2, n, 3, 8)) for n in (1, 4)}
    arrays["yarn_input"] = rng.normal(size=(1, 8, 2, 64))
    return {k: v.astype("float32") for k, v in arrays.items()}


def generate_oracle_data():
    from keras_hub.layers import AlibiBias
    from keras_hub.src.layers.modeling.rotary_embedding import RotaryEmbedding
    from keras_hub.src.models.falcon.falcon_transformer_decoder import (
        FalconTransformerDecoder,
    )
    from keras_hub.src.models.phi3.phi3_rotary_embedding import (
        Phi3SuScaledRotaryEmbedding as HubSuRotaryEmbedding,
    )

    arrays = _inputs()
    for n in ALIBI_HEADS:
        arrays[f"bloom_alibi/{n}"] = np.asarray(AlibiBias()._get_slopes(n))
        falcon = FalconTransformerDecoder(n, 16)
        arrays[f"falcon_alibi/{n}"] = np.asarray(falcon._get_slopes(n))
    su = HubSuRotaryEmbedding(
        inverese_freq_short_factor=SU_FACTORS[0],
        inverese_freq_long_factor=SU_FACTORS[1],
        **SU,
    )
    for start, n in SU_CALLS:
        index = keras.ops.convert_to_tensor(start, "int32")
        outputs = su(arrays[f"su_input/{n}"], start_index=index)
        arrays[f"su/{start}_{n}"] = keras.ops.convert_to_numpy(outputs)
    for factor, truncate in YARN_CALLS:
        yarn = RotaryEmbedding(
            scaling_factor=factor, rope_type="yarn", truncate=truncate, **YARN
        )
        outputs = yarn(arrays["yarn_input"], start_index=YARN_START)
        arrays[f"yarn/{factor}_{truncate}"] = keras.ops.convert_to_numpy(
            outputs
        )
    return {DATA: arrays}


def test_alibi_slopes_equal_keras_hub():
    stored = oracles.load(DATA)
    for n in ALIBI_HEADS:
        for family in ("bloom", "falcon"):
            expected = stored[f"{family}_alibi/{n}"]
            np.testing.assert_allclose(alibi_slopes(n), expected, rtol=1e-7)


def test_su_rotary_embedding_follows_the_cache_index_like_keras_hub():
    stored = oracles.load(DATA)
    ours = Phi3SuScaledRotaryEmbedding(*SU_FACTORS, **SU)
    for start, n in SU_CALLS:
        index = keras.ops.convert_to_tensor(start, "int32")
        actual = ours(stored[f"su_input/{n}"], start_index=index)
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(actual),
            stored[f"su/{start}_{n}"],
            atol=1e-6,
            rtol=1e-6,
            err_msg=(start, n),
        )


def test_yarn_equals_keras_hub_rotary_embedding():
    stored = oracles.load(DATA)
    for factor, truncate in YARN_CALLS:
        ours = YarnRotaryEmbedding(factor=factor, truncate=truncate, **YARN)
        actual = ours(stored["yarn_input"], start_index=YARN_START)
        # Angles near 300 radians, where a float32 ulp is 3e-5: the two
        # orders of computing them differ by a few ulps on some backends.
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(actual),
            stored[f"yarn/{factor}_{truncate}"],
            atol=3e-4,
            err_msg=(factor, truncate),
        )
        clone = YarnRotaryEmbedding.from_config(ours.get_config())
        assert clone.get_config() == ours.get_config()
