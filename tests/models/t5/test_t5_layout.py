"""T5's flat attention projections put heads on the model axis only when
every shard holds whole heads. Every preset's plan is pinned by
tests/models/test_preset_plans.py."""

import pytest

from keras_nlp.models.t5.t5_backbone import flat_heads_stay_whole

pytestmark = pytest.mark.multi_device


@pytest.mark.parametrize(
    "num_heads, whole",
    [(8, True), (16, True), (32, True), (64, True), (6, False), (12, False)],
)
def test_flat_heads_go_on_the_model_axis_only_when_they_stay_whole(
    num_heads, whole
):
    # 6 x 64 = 384 divides by 4 and 8, 12 x 64 = 768 by 8: heads would
    # split; a power of two divides every such axis up to the head count.
    assert flat_heads_stay_whole(num_heads, 64) is whole
