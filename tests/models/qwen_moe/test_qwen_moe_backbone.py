"""Which blocks of a Qwen MoE are sparse."""

from keras_nlp.models.families.moe import sparse_blocks


def test_sparse_blocks_follow_the_step_and_the_dense_list():
    assert sparse_blocks(4) == [True] * 4
    assert sparse_blocks(4, decoder_sparse_step=2) == [False, True] * 2
    assert sparse_blocks(4, 1, [0, 3]) == [False, True, True, False]
    assert sparse_blocks(3, 3, [2]) == [False] * 3
