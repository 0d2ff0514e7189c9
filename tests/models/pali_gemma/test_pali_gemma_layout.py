"""PaliGemma's rules: one per weight, each of its own tower. Every preset's
plan is pinned by tests/models/test_preset_plans.py."""

import re

import pytest

from keras_nlp.models.pali_gemma import PaliGemmaBackbone
from tests.models.tiny_configs import tiny

pytestmark = pytest.mark.multi_device


def test_each_path_matches_one_rule_of_its_own_tower():
    _, config = tiny("PaliGemmaBackbone")
    backbone = PaliGemmaBackbone(**config)
    rules = PaliGemmaBackbone._layout_rules(config)
    for variable in backbone.weights:
        matches = [r[0] for r in rules if re.fullmatch(r[0], variable.path)]
        assert len(matches) <= 1, (variable.path, matches)
        if len(variable.shape) > 1:
            assert matches, variable.path
        vision = variable.path.startswith("image_")
        assert all(m.startswith("image_") == vision for m in matches)
