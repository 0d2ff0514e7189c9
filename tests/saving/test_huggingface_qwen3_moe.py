"""Hugging Face `qwen3_moe` checkpoints against keras-hub's loader.

keras-hub has no Qwen 3 MoE exporter: the checkpoint is written from the
keras-hub backbone under the names its `convert_qwen3_moe` reads. keras-hub
cannot load a checkpoint with dense blocks; those are checked against our
own model.
"""

from safetensors import safe_open

from keras_nlp.models import Backbone
from keras_nlp.models.qwen3_moe import Qwen3MoeBackbone
from tests.saving.huggingface_checkpoints import HFCase
from tests.saving.huggingface_checkpoints import HuggingFaceFamilyTests
from tests.saving.huggingface_checkpoints import assert_same_weights
from tests.saving.huggingface_checkpoints import randomize
from tests.saving.huggingface_checkpoints import tensor_writer
from tests.saving.huggingface_moe_writers import llama_style_tensors
from tests.saving.huggingface_moe_writers import qwen_mlp_tensors


def _config(oracle):
    return {
        "model_type": "qwen3_moe",
        "architectures": ["Qwen3MoeForCausalLM"],
        "vocab_size": oracle.vocabulary_size,
        "num_hidden_layers": oracle.num_layers,
        "num_attention_heads": oracle.num_query_heads,
        "num_key_value_heads": oracle.num_key_value_heads,
        "head_dim": oracle.head_dim,
        "hidden_size": oracle.hidden_dim,
        "intermediate_size": oracle.intermediate_dim,
        "moe_intermediate_size": oracle.moe_intermediate_dim,
        "num_experts": oracle.num_experts,
        "num_experts_per_tok": oracle.top_k,
        "norm_topk_prob": oracle.norm_top_k_prob,
        "decoder_sparse_step": oracle.decoder_sparse_step,
        "mlp_only_layers": [],
        "rms_norm_eps": oracle.layer_norm_epsilon,
        "rope_theta": oracle.rope_max_wavelength,
        "use_sliding_window": False,
        "sliding_window": None,
        "max_window_layers": oracle.num_layers,
        "output_router_logits": False,
        "router_aux_loss_coef": 0.001,
        "attention_bias": False,
        "hidden_act": "silu",
        "tie_word_embeddings": oracle.tie_word_embeddings,
        "torch_dtype": "float32",
    }


def _tensors(oracle):
    return {
        **llama_style_tensors(oracle, query_key_norm=True),
        **qwen_mlp_tensors(oracle, shared_expert=False),
    }


class TestQwen3MoeCheckpoints(HuggingFaceFamilyTests):
    # (2, 4) runs for Qwen MoE only (suite time).
    meshes = ((1, 8),)
    cases = [
        # Every block sparse (keras-hub's loader cannot read a dense block:
        # it looks for the dense kernels on the block, not its `mlp`);
        # a tied output embedding.
        HFCase(
            "qwen3_moe_tied",
            "Qwen3MoeBackbone",
            dict(
                vocabulary_size=96,
                num_layers=2,
                num_query_heads=4,
                num_key_value_heads=2,
                head_dim=16,
                hidden_dim=32,
                intermediate_dim=40,
                moe_intermediate_dim=12,
                num_experts=4,
                top_k=2,
                norm_top_k_prob=True,
                tie_word_embeddings=True,
                sliding_window_size=None,
            ),
            writer=tensor_writer(_config, _tensors),
        )
    ]


def test_dense_blocks_round_trip(tmp_path):
    ours = randomize(
        Qwen3MoeBackbone(
            vocabulary_size=64,
            num_layers=3,
            num_query_heads=4,
            num_key_value_heads=2,
            head_dim=8,
            hidden_dim=16,
            intermediate_dim=24,
            moe_intermediate_dim=8,
            num_experts=4,
            top_k=2,
            mlp_only_layers=[2],
            sliding_window_size=None,
        )
    )
    ours.save_to_preset(str(tmp_path), format="huggingface")
    again = Backbone.from_preset(str(tmp_path))
    assert again.get_config()["mlp_only_layers"] == [2]
    assert_same_weights(again, ours)
    with safe_open(str(tmp_path / "model.safetensors"), "np") as file:
        names = set(file.keys())
        down = file.get_tensor("model.layers.2.mlp.down_proj.weight")
    assert "model.layers.1.mlp.experts.3.up_proj.weight" in names
    assert not any(n.startswith("model.layers.2.mlp.experts") for n in names)
    (kernel,) = [
        w.numpy()
        for w in ours.weights
        if w.path == "transformer_layer_2/qwen3_moe_mlp/"
        "feedforward_output_dense/kernel"
    ]
    assert (down == kernel.T).all()
