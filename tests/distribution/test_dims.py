"""Layers declare their variables' dimension names; rules are checked
against them."""

import keras
import pytest

from keras_nlp.distribution import DATA
from keras_nlp.distribution import MODEL
from keras_nlp.distribution import LayoutError
from keras_nlp.distribution import declare_dims
from keras_nlp.distribution import declare_einsum_dims
from keras_nlp.distribution.backbone_planner import backbone_variables
from keras_nlp.distribution.dims import declared_dims
from keras_nlp.distribution.dims import einsum_dims
from keras_nlp.layers.layout_rules import attention_rules
from keras_nlp.layers.layout_rules import feedforward_rules
from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.models import LlamaBackbone
from tests.models.backbone_checks import make_mesh

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
