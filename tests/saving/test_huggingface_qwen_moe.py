"""Hugging Face `qwen2_moe` checkpoints against keras-hub's loader.

keras-hub has no Qwen MoE exporter: the checkpoint is written from the
keras-hub backbone under the names its `convert_qwen_moe` reads. keras-hub
decides every block's kind as if it were block 0, so the case keeps every
block sparse; mixed blocks are checked against our own model (the round
trip and the names of the dense blocks' tensors).
"""

import types

import numpy as np
import pytest

from keras_nlp.models import Backbone
from keras_nlp.models.qwen_moe import QwenMoeBackbone
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface import bind
from keras_nlp.saving.huggingface.conversions import KERNEL
from keras_nlp.saving.huggingface.loading import _reader
from keras_nlp.saving.huggingface.loading import _Source
from tests.saving.huggingface_checkpoints import HFCase
from tests.saving.huggingface_checkpoints import HuggingFaceFamilyTests
from tests.saving.huggingface_checkpoints import assert_same_weights
from tests.saving.huggingface_checkpoints import randomize
from tests.saving.huggingface_checkpoints import tensor_writer
from tests.saving.huggingface_moe_writers import llama_style_tensors
from tests.saving.huggingface_moe_writers import qwen_mlp_tensors

_CONFIG = dict(
    vocabulary_size=96,
    num_layers=2,
    num_query_heads=4,
    num_key_value_heads=2,
    hidden_dim=32,
    intermediate_dim=40,
    moe_intermediate_dim=12,
    shared_expert_intermediate_dim=20,
    num_experts=4,
    top_k=2,
)


def _config(oracle):
    return {
        "model_type": "qwen2_moe",
        "architectures": ["Qwen2MoeForCausalLM"],
        "vocab_size": oracle.vocabulary_size,
        "num_hidden_layers": oracle.num_layers,
        "num_attention_heads": oracle.num_query_heads,
        "num_key_value_heads": oracle.num_key_value_heads,
        "hidden_size": oracle.hidden_dim,
        "intermediate_size": oracle.intermediate_dim,
        "moe_intermediate_size": oracle.moe_intermediate_dim,
        "shared_expert_intermediate_size": (
            oracle.shared_expert_intermediate_dim
        ),
        "num_experts": oracle.num_experts,
        "num_experts_per_tok": oracle.top_k,
        "norm_topk_prob": oracle.norm_top_k_prob,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "rms_norm_eps": oracle.layer_norm_epsilon,
        "rope_theta": oracle.rope_max_wavelength,
        "use_sliding_window": False,
        "sliding_window": 32768,
        "max_window_layers": oracle.num_layers,
        "output_router_logits": False,
        "router_aux_loss_coef": 0.001,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
    }


def _tensors(oracle):
    return {
        **llama_style_tensors(oracle, attention_bias=True),
        **qwen_mlp_tensors(oracle, shared_expert=True),
    }


class TestQwenMoeCheckpoints(HuggingFaceFamilyTests):
    cases = [
        HFCase(
            "qwen2_moe",
            "QwenMoeBackbone",
            dict(_CONFIG, norm_top_k_prob=True),
            writer=tensor_writer(_config, _tensors),
        )
    ]


def test_mixed_blocks_round_trip(tmp_path):
    ours = randomize(
        QwenMoeBackbone(**_CONFIG, decoder_sparse_step=2, mlp_only_layers=[])
    )
    ours.save_to_preset(str(tmp_path), format="huggingface")
    again = Backbone.from_preset(str(tmp_path))
    assert again.get_config()["decoder_sparse_step"] == 2
    assert_same_weights(again, ours)
    from safetensors import safe_open

    with safe_open(str(tmp_path / "model.safetensors"), "np") as file:
        names = set(file.keys())
        gate = file.get_tensor("model.layers.1.mlp.experts.3.gate_proj.weight")
        up = file.get_tensor("model.layers.1.mlp.experts.3.up_proj.weight")
    # Block 0 is dense, block 1 sparse (every second block).
    assert "model.layers.0.mlp.gate_proj.weight" in names
    assert "model.layers.0.mlp.gate.weight" not in names
    assert "model.layers.1.mlp.shared_expert_gate.weight" in names
    (fused,) = [
        w.numpy()
        for w in ours.weights
        if w.path == "transformer_layer_1/qwen_sparse_moe_block/experts/"
        "expert_feedforward_gate_dense"
    ]
    np.testing.assert_array_equal(gate, fused[3, :, :12].T)
    np.testing.assert_array_equal(up, fused[3, :, 12:].T)


def test_ours_part_rows_must_tile_the_variable():
    table = [
        Weight("e", "t.{j}.gate", ours_part=(2, 0, 3), stack_axis=0),
        Weight("e", "t.{j}.up", ours_part=(2, 4, 6), stack_axis=0),
    ]
    with pytest.raises(ValueError, match=r"do not tile it"):
        bind(table, [("e", (2, 5, 6))])
    table[1] = Weight("e", "t.{j}.up", ours_part=(2, 3, 5), stack_axis=0)
    with pytest.raises(ValueError, match=r"cover 5 of its 6 entries"):
        bind(table, [("e", (2, 5, 6))])


def test_ours_part_rows_read_any_box_exactly():
    # A fused (experts, hidden, 2 * width) kernel of per-expert gate and up
    # tensors; boxes that straddle the gate/up boundary read from both.
    rng = np.random.default_rng(0)
    experts, hidden, width = 3, 4, 5
    ours = rng.normal(size=(experts, hidden, 2 * width)).astype("float32")
    table = [
        Weight("e", "x.{j}.gate", KERNEL, ours_part=(2, 0, width)),
        Weight("e", "x.{j}.up", KERNEL, ours_part=(2, width, 2 * width)),
    ]
    bindings, unmatched = bind(table, [("e", ours.shape)])
    assert unmatched == [] and [b.within for b in bindings] == [
        (2, 0, width),
        (2, width, 2 * width),
    ]
    tensors = dict(
        pair for binding in bindings for pair in binding.to_theirs(ours)
    )
    np.testing.assert_array_equal(tensors["x.2.up"], ours[2, :, width:].T)
    variable = types.SimpleNamespace(dtype="float32", shape=ours.shape)
    source = None
    for binding in bindings:
        infos = [
            types.SimpleNamespace(name=name, dtype="F32")
            for name in binding.names
        ]
        if source is None:
            source = _Source(variable, binding, infos)
        else:
            source.add(binding, infos)

    def read(name, box):
        return tensors[name][tuple(slice(a, b) for a, b in box)]

    read_box = _reader(source, read, allow_nonfinite=True)
    for box in [
        (slice(0, 3), slice(0, 4), slice(0, 10)),
        (slice(1, 2), slice(1, 3), slice(3, 7)),
        (slice(2, 3), slice(0, 4), slice(5, 6)),
        (slice(0, 2), slice(2, 4), slice(0, 2)),
    ]:
        np.testing.assert_array_equal(read_box(box), ours[box])
