"""Hugging Face tensors of keras-hub's mixture-of-experts decoders.

keras-hub has no exporter for Mixtral, Qwen MoE, Qwen 3 MoE or GPT-OSS:
these functions name a keras-hub backbone's weights as its converters
(`keras_hub/src/utils/transformers/convert_*.py`) read them, in PyTorch
layouts, for `tensor_writer`.
"""

import keras
import numpy as np


def numpy(value):
    return np.asarray(keras.ops.convert_to_numpy(value))


def _sublayer(layer, *names):
    for name in names:
        if hasattr(layer, name):
            return getattr(layer, name)
    raise AttributeError(f"{type(layer).__name__} has none of {names}")


def llama_style_tensors(oracle, attention_bias=False, query_key_norm=False):
    """Embeddings, final norm and each block's attention and norms."""
    hidden = oracle.hidden_dim
    tensors = {
        "model.embed_tokens.weight": numpy(oracle.token_embedding.embeddings),
        "model.norm.weight": numpy(
            oracle.get_layer("sequence_output_layernorm").scale
        ),
    }
    if not getattr(oracle, "tie_word_embeddings", False):
        tensors["lm_head.weight"] = numpy(
            oracle.token_embedding.reverse_embeddings
        ).T
    for i, layer in enumerate(oracle.transformer_layers):
        prefix = f"model.layers.{i}."
        attention = _sublayer(
            layer, "_self_attention_layer", "self_attention_layer"
        )
        norms = (
            ("input_layernorm", "_self_attention_layernorm"),
            ("post_attention_layernorm", "_feedforward_layernorm"),
        )
        for theirs, ours in norms:
            norm = _sublayer(layer, ours, theirs)
            tensors[prefix + theirs + ".weight"] = numpy(norm.scale)
        for name in ("query", "key", "value"):
            dense = _sublayer(attention, f"_{name}_dense", f"{name}_dense")
            their = f"{prefix}self_attn.{name[0]}_proj."
            tensors[their + "weight"] = (
                numpy(dense.kernel).reshape(hidden, -1).T
            )
            if attention_bias:
                tensors[their + "bias"] = numpy(dense.bias).reshape(-1)
        output = _sublayer(attention, "_output_dense", "output_dense")
        tensors[prefix + "self_attn.o_proj.weight"] = (
            numpy(output.kernel).reshape(-1, hidden).T
        )
        if attention_bias and getattr(output, "bias", None) is not None:
            tensors[prefix + "self_attn.o_proj.bias"] = numpy(output.bias)
        if query_key_norm:
            for name in ("query", "key"):
                norm = getattr(attention, f"_{name}_dense_layer_norm")
                tensors[f"{prefix}self_attn.{name[0]}_norm.weight"] = numpy(
                    norm.scale
                )
    return tensors


def swiglu_tensors(prefix, mlp):
    """A dense SwiGLU's `{gate,up,down}_proj` under `prefix`."""
    return {
        prefix + "gate_proj.weight": numpy(
            mlp._feedforward_gate_dense.kernel
        ).T,
        prefix + "up_proj.weight": numpy(
            mlp._feedforward_intermediate_dense.kernel
        ).T,
        prefix + "down_proj.weight": numpy(
            mlp._feedforward_output_dense.kernel
        ).T,
    }


def qwen_mlp_tensors(oracle, shared_expert):
    """Each block's `mlp.*`: router, per-expert projections (the fused
    gate/up kernel split in halves), shared expert; or a dense SwiGLU."""
    tensors = {}
    for i, layer in enumerate(oracle.transformer_layers):
        prefix = f"model.layers.{i}.mlp."
        mlp = layer.mlp
        if not hasattr(mlp, "expert_bank"):
            tensors.update(swiglu_tensors(prefix, mlp))
            continue
        tensors[prefix + "gate.weight"] = numpy(
            mlp._sparse_feedforward_gate_dense.kernel
        ).T
        fused = numpy(mlp.expert_bank._expert_feedforward_gate_dense)
        down = numpy(mlp.expert_bank._expert_feedforward_output_dense)
        width = fused.shape[-1] // 2
        for e in range(fused.shape[0]):
            expert = f"{prefix}experts.{e}."
            tensors[expert + "gate_proj.weight"] = fused[e, :, :width].T
            tensors[expert + "up_proj.weight"] = fused[e, :, width:].T
            tensors[expert + "down_proj.weight"] = down[e].T
        if shared_expert:
            tensors.update(
                swiglu_tensors(
                    prefix + "shared_expert.", mlp.shared_expert_dense
                )
            )
            tensors[prefix + "shared_expert_gate.weight"] = numpy(
                mlp.shared_expert_gate_dense.kernel
            ).T
    return tensors
