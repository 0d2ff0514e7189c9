"""GPT-OSS's own option: which blocks its window applies to."""

from keras_nlp.models.gpt_oss.gpt_oss_backbone import GptOssBackbone
from tests.models.tiny_configs import tiny

_, TINY = tiny("GptOssBackbone")  # two blocks, sliding_window=4
EVEN = ["sliding_attention", "full_attention"]


def windows(model):
    return [b.attention.sliding_window_size for b in model.transformer_layers]


def test_layer_types_choose_the_windowed_blocks():
    # keras-hub windows the odd blocks, the query and the 4 tokens before.
    default = GptOssBackbone(**TINY)
    assert windows(default) == [None, 5]
    assert default.get_config()["layer_types"] is None
    assert windows(GptOssBackbone(**dict(TINY, sliding_window=None))) == [
        None,
        None,
    ]
    # OpenAI's checkpoints window the even blocks (Hugging Face's names).
    model = GptOssBackbone(**TINY, layer_types=EVEN)
    assert windows(model) == [5, None]
    config = model.get_config()
    assert config["layer_types"] == EVEN
    assert windows(GptOssBackbone.from_config(config)) == [5, None]
