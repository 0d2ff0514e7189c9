"""GPT-NeoX layouts: full-size preset plans and a tiny config's fallbacks."""

import pytest

from keras_nlp.models.gpt_neo_x.gpt_neo_x_backbone import GPTNeoXBackbone
from tests.models.backbone_checks import MESHES
from tests.models.backbone_checks import assert_preset_plan_is_efficient
from tests.models.backbone_checks import mesh_dict
from tests.models.tiny_configs import tiny_configs

pytestmark = pytest.mark.multi_device

PRESETS = list(GPTNeoXBackbone.presets)
# The tiny configs (tests/models/tiny_configs.py) are sharded on every mesh
# by tests/models/test_conformance.py; "odd_vocab_4_heads" has an odd
# vocabulary and fewer heads than the largest model axis.
TINY = tiny_configs("GPTNeoXBackbone")
QKV = "transformer_layer_0/self_attention/query_key_value"


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("preset", PRESETS)
def test_preset_plan_is_efficient(preset, mesh_shape):
    plan = assert_preset_plan_is_efficient(GPTNeoXBackbone, preset, mesh_shape)
    # 16 heads, hidden and MLP widths and the vocabulary all divide every
    # mesh axis here: nothing falls back.
    assert not plan.fallbacks
    assert plan.memory_ratio <= 1.02
    # The output kernel's rows are the concatenated heads; each shard holds
    # whole heads, like the fused kernel's heads dimension.
    config = GPTNeoXBackbone.presets[preset]
    head_dim = config["hidden_dim"] // config["num_heads"]
    for i in range(config["num_layers"]):
        path = f"transformer_layer_{i}/self_attention/attention_output/kernel"
        assert plan.weight(path).shard_shape[0] % head_dim == 0


@pytest.mark.parametrize("preset", PRESETS)
def test_preset_plan_on_a_data_only_mesh(preset):
    # The rank-2 fused bias names only the model axis: whole when it is 1.
    plan = GPTNeoXBackbone.plan_layout(mesh_dict((8, 1)), preset=preset)
    assert not plan.fallbacks
    assert plan.memory_ratio <= 1.02
    whole = {
        w.path
        for w in plan.weights
        if len(w.shape) >= 2 and w.shard_shape == w.shape
    }
    config = GPTNeoXBackbone.presets[preset]
    assert whole == {
        f"transformer_layer_{i}/self_attention/query_key_value/bias"
        for i in range(config["num_layers"])
    }
    for path in whole:
        assert plan.weight(path).spec == ("model", None)


@pytest.mark.parametrize("preset", PRESETS)
def test_preset_exact_specs(preset):
    plan = GPTNeoXBackbone.plan_layout(mesh_dict((2, 4)), preset=preset)
    block = "transformer_layer_7/"
    expected = {
        "token_embedding/embeddings": ("model", "batch"),
        f"{QKV}/kernel": ("batch", "model", None),
        f"{QKV}/bias": ("model", None),
        block + "self_attention/attention_output/kernel": ("model", "batch"),
        block + "self_attention/attention_output/bias": (None,),
        block + "feedforward_intermediate_dense/kernel": ("batch", "model"),
        block + "feedforward_output_dense/kernel": ("model", "batch"),
        block + "feedforward_layer_norm/gamma": (None,),
        "layer_norm/beta": (None,),
    }
    for path, spec in expected.items():
        assert plan.weight(path).spec == spec, path
    hidden = GPTNeoXBackbone.presets[preset]["hidden_dim"]
    assert plan.weight(f"{QKV}/kernel").shard_shape == (
        hidden // 2,
        4,
        3 * hidden // 16,
    )


def test_lora_adapters_follow_the_fused_kernel():
    config = dict(GPTNeoXBackbone.presets["pythia_1.4b_en"], lora_rank=8)
    plan = GPTNeoXBackbone.plan_layout(mesh_dict((2, 4)), config=config)
    adapter = plan.weight(f"{QKV}/lora_kernel_a")
    assert adapter.shape == (2048, 16, 8)
    assert adapter.spec == ("batch", "model", None)
    assert plan.weight(f"{QKV}/lora_kernel_b").spec == (None, None)
    assert not plan.fallbacks
    assert plan.memory_ratio <= 1.02


def test_heads_that_do_not_divide_fall_back_whole():
    config = TINY["odd_vocab_4_heads"]
    plan = GPTNeoXBackbone.plan_layout(mesh_dict((1, 8)), config=config)
    kernel = plan.weight(f"{QKV}/kernel")
    assert kernel.spec == ("batch", None, None)
    assert "dim 1 (heads, size 4) is not divisible by 'model'" in kernel.reason
    bias = plan.weight(f"{QKV}/bias")
    assert bias.spec == (None, None)
    assert "dim 0 (heads, size 4)" in bias.reason
    # The odd vocabulary puts the model axis on the hidden dimension.
    embedding = plan.weight("token_embedding/embeddings")
    assert embedding.spec == ("batch", "model")
    assert embedding.decision == "alternative"
    assert {w.path for w in plan.fallbacks} == {f"{QKV}/kernel", f"{QKV}/bias"}


def test_untied_output_projection_is_sharded_like_the_table():
    # Pythia's own `embed_out` (`tie_word_embeddings=False`).
    config = dict(
        GPTNeoXBackbone.presets["pythia_410m_en"], tie_word_embeddings=False
    )
    plan = GPTNeoXBackbone.plan_layout(mesh_dict((2, 4)), config=config)
    table = plan.weight("token_embedding/embeddings")
    output = plan.weight("token_embedding/reverse_embeddings")
    assert output.shape == table.shape[::-1] == (1024, 50304)
    assert output.spec == table.spec[::-1] == ("batch", "model")
