"""Layers declare their variables' dimension names; rules are checked
against them."""

import keras
import pytest

from keras_nlp.distribution import DATA
from keras_nlp.distribution import MODEL
from keras_nlp.distribution import LayoutError
from keras_nlp.distribution import declare_dims
from keras_nlp.distribution import declare_einsum_dims
from keras_nlp.distribution import declare_flat_heads
from keras_nlp.distribution.backbone_planner import backbone_variables
from keras_nlp.distribution.dims import cuts_between_heads
from keras_nlp.distribution.dims import declared_dims
from keras_nlp.distribution.dims import declared_flat_heads
from keras_nlp.distribution.dims import einsum_dims
from keras_nlp.layers.layout_rules import attention_rules
from keras_nlp.layers.layout_rules import feedforward_rules
from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.models import LlamaBackbone
from keras_nlp.models import Qwen3_5Backbone
from tests.models.backbone_checks import make_mesh
from tests.models.tiny_configs import qwen3_5_config

pytestmark = pytest.mark.multi_device

TINY = dict(
    vocabulary_size=64,
    num_layers=1,
    num_query_heads=4,
    num_key_value_heads=4,
    hidden_dim=32,
    intermediate_dim=48,
)
BLOCK = r"transformer_layer_\d+/"


class TransposedQueryLlama(LlamaBackbone):
    """Llama whose query rule is written for Gemma's (heads, hidden, ...)."""

    @staticmethod
    def _layout_rules(config):
        rules = [
            *token_embedding_rules("token_embedding/", tied=False),
            *attention_rules(BLOCK + "self_attention/")[1:],
            *feedforward_rules(BLOCK),
        ]
        # (MODEL, DATA, None) on a (32, 4, 8) kernel divides (2, 4) either
        # way round: only the names can tell it is transposed.
        rules.append(
            (
                BLOCK + "self_attention/query/kernel",
                (MODEL, DATA, None),
                ("heads", "hidden", "head_dim"),
            )
        )
        return rules


def test_einsum_dims_reads_the_kernel_operand():
    legend = dict(d="hidden", n="heads", h="head_dim")
    assert einsum_dims("btd,dnh->btnh", legend) == (
        "hidden",
        "heads",
        "head_dim",
    )
    with pytest.raises(ValueError, match=r"kernel letters \['h'\]"):
        einsum_dims("btd,dnh->btnh", dict(d="hidden", n="heads"))


def test_declared_dims_are_keyed_by_variable_path():
    dense = keras.layers.EinsumDense(
        "btd,dnh->btnh", output_shape=(None, 4, 8), bias_axes="nh", name="q"
    )
    declare_einsum_dims(dense, d="hidden", n="heads", h="head_dim")
    dense.build((None, None, 16))
    assert declared_dims(dense) == {
        "q/kernel": ("hidden", "heads", "head_dim"),
        "q/bias": ("heads", "head_dim"),
    }


def test_a_declaration_of_the_wrong_rank_is_an_error():
    dense = declare_dims(keras.layers.Dense(4, name="d"), kernel=("hidden",))
    dense.build((None, 8))
    with pytest.raises(ValueError, match=r"declares 1 dimension names"):
        declared_dims(dense)


def test_every_weight_of_a_shared_stack_has_declared_dims():
    variables = backbone_variables(LlamaBackbone, TINY)
    by_path = {v.path: v.dim_names for v in variables}
    assert by_path["transformer_layer_0/self_attention/key/kernel"] == (
        "hidden",
        "kv_heads",
        "head_dim",
    )
    assert by_path["token_embedding/reverse_embeddings"] == ("hidden", "vocab")
    undeclared = [
        v.path for v in variables if len(v.shape) >= 2 and v.dim_names is None
    ]
    assert undeclared == []


def test_fallback_reasons_use_the_layers_names():
    plan = LlamaBackbone.plan_layout(
        {"batch": 1, "model": 8}, config=dict(TINY, num_key_value_heads=2)
    )
    weight = plan.weight("transformer_layer_0/self_attention/key/kernel")
    assert weight.decision == "fallback"
    assert "dim 1 (kv_heads, size 2)" in weight.reason


def test_a_transposed_rule_is_an_orientation_error_even_if_sizes_divide():
    mesh = make_mesh((2, 4))
    distribution = keras.distribution.ModelParallel(
        layout_map=TransposedQueryLlama.get_layout_map(mesh),
        batch_dim_name="batch",
    )
    with distribution.scope():
        with pytest.raises(LayoutError) as error:
            TransposedQueryLlama(**TINY)
    message = str(error.value)
    assert "self_attention/query/kernel" in message
    assert "transformer_layer_0/self_attention/query/kernel" in message
    assert "('heads', 'hidden', 'head_dim')" in message
    assert "('hidden', 'heads', 'head_dim')" in message
    assert "transposed" in message


@pytest.mark.parametrize(
    "runs, shards, whole",
    [
        (None, 3, True),  # no heads declared: any split
        (((16, 72),), 16, True),  # one head each
        (((16, 72),), 32, False),  # 36 columns: half a head
        (((4, 8), (2, 16)), 4, True),  # cuts at 16, 32 (the runs meet), 48
        (((4, 8), (2, 16)), 8, False),  # the cut at 40 is inside a value head
        (((32, 128), (48, 128)), 16, True),  # Qwen 3.5 27B's fused projection
        (((32, 128), (48, 128)), 32, False),
    ],
)
def test_cuts_between_heads(runs, shards, whole):
    assert cuts_between_heads(runs, shards) is whole


def test_flat_head_declarations_are_checked():
    with pytest.raises(ValueError, match=r"\(count, size\) pairs"):
        declare_flat_heads(keras.layers.Dense(8), "kernel", heads=((2, 0),))
    dense = declare_dims(keras.layers.Dense(24, name="d"), kernel=DIMS)
    declare_flat_heads(dense, "kernel", heads=((4, 8),))
    dense.build((None, 8))
    with pytest.raises(ValueError, match=r"heads \(\(4, 8\),\) .* size 24"):
        declared_flat_heads(dense)
    declare_flat_heads(dense, "kernel", ffw=((3, 8),))
    with pytest.raises(ValueError, match=r"dimensions \['ffw'\] of d/kernel"):
        declared_flat_heads(dense)


DIMS = ("hidden", "heads")


def _linear_attention_plan(model):
    # One key head of 8 (queries and keys: 2 heads), 4 value heads of 8: a
    # fused width of 48, which 4 divides with cuts inside heads (at 12, 24,
    # 36) and 2 divides between them (at 24, where a value head starts).
    config = dict(
        qwen3_5_config(vocabulary_size=96, hidden_dim=32, intermediate_dim=48),
        linear_num_key_heads=1,
    )
    plan = Qwen3_5Backbone.plan_layout(
        {"batch": 1, "model": model}, config=config
    )
    return {
        name: plan.weight(f"transformer_layer_0/linear_attn/{name}")
        for name in ("in_proj_qkv/kernel", "conv1d_kernel", "in_proj_z/kernel")
    }


def test_a_fused_projection_is_split_only_between_heads():
    weights = _linear_attention_plan(model=4)
    qkv = weights["in_proj_qkv/kernel"]
    assert qkv.spec == (("batch", "model"), None)
    assert qkv.decision == "alternative"
    assert (
        "dim 1 (linear_qkv, size 48 = 2 heads of 8 + 4 heads of 8) split by "
        "'model' (size 4) would cut a head" in qkv.reason
    )
    # The convolution's channels stay with the projection's columns; the
    # z projection's 4 value heads split 4 ways.
    assert weights["conv1d_kernel"].spec == (None, None)
    assert weights["in_proj_z/kernel"].spec == ("batch", "model")
    weights = _linear_attention_plan(model=2)
    assert weights["in_proj_qkv/kernel"].spec == ("batch", "model")
    assert weights["conv1d_kernel"].spec == ("model", None)
