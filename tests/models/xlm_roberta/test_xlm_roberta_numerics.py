"""Numerical parity of keras_nlp's XLM-RoBERTa with keras-hub's.

The architecture is RoBERTa's (`tests/models/roberta` checks it, and the
mistakes its comparison catches, in depth); here keras-hub's own
`XLMRobertaBackbone` is the oracle, with a vocabulary that divides only by
2 like 250002.
"""

import pytest

from tests.models.backbone_checks import assert_encoder_matches_oracle
from tests.models.backbone_checks import assert_outputs_close
from tests.models.roberta.test_roberta_numerics import bert_epsilon
from tests.models.roberta.test_roberta_numerics import make_pair

VOCABULARY_SIZE = 98


def xlm_pair(name, **kwargs):
    return make_pair(
        name,
        backbone_name="XLMRobertaBackbone",
        vocabulary_size=VOCABULARY_SIZE,
        **kwargs,
    )


# The presets' 12 (base) and 16 (large) heads.
@pytest.mark.parametrize("name", ["heads12", "heads16"])
def test_matches_keras_hub(name):
    oracle, ours, inputs = xlm_pair(name)
    assert type(oracle).__name__ == type(ours).__name__
    max_diff = assert_encoder_matches_oracle(ours, oracle, inputs)
    print(f"xlm_roberta {name}: max |ours - keras_hub| = {max_diff:.3e}")


def test_the_comparison_detects_a_wrong_epsilon():
    oracle, ours, inputs = xlm_pair("heads16", embedding_scale=1e-3)
    assert_encoder_matches_oracle(ours, oracle, inputs)
    bert_epsilon(ours)
    with pytest.raises(AssertionError):
        assert_outputs_close(ours(inputs), oracle(inputs))
