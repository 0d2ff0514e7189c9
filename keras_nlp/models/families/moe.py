"""Decoders whose blocks mix dense and mixture-of-experts feed-forwards.

Qwen MoE and Qwen 3 MoE put a mixture of experts in every
`decoder_sparse_step`-th block except those in `mlp_only_layers`, and a
dense SwiGLU (a `GatedFeedForward` with a name of its own) in the others.
These helpers give `build_llama_style` the feed-forward of each block and
`_layout_rules` the rules of the kinds of block a config has.
"""

import keras

from keras_nlp.layers.gated_feedforward import GatedFeedForward
from keras_nlp.layers.layout_rules import feedforward_rules


def sparse_blocks(num_layers, decoder_sparse_step=1, mlp_only_layers=None):
    """Which blocks have a mixture of experts (the others a dense SwiGLU).

    Block `i` is sparse unless it is listed in `mlp_only_layers` or
    `i + 1` is not a multiple of `decoder_sparse_step`, as in the Hugging
    Face Qwen MoE configs.

    Returns:
        A list of `num_layers` bools.
    """
    if (
        not isinstance(decoder_sparse_step, int)
        or isinstance(decoder_sparse_step, bool)
        or decoder_sparse_step < 1
    ):
        raise ValueError(
            "`decoder_sparse_step` must be a positive integer (every "
            "`decoder_sparse_step`-th block is sparse). Received: "
            f"decoder_sparse_step={decoder_sparse_step!r}."
        )
    mlp_only_layers = list(mlp_only_layers or [])
    invalid = [
        index
        for index in mlp_only_layers
        if not isinstance(index, int)
        or isinstance(index, bool)
        or not 0 <= index < num_layers
    ]
    if invalid:
        raise ValueError(
            "`mlp_only_layers` lists block indices, each in "
            f"[0, num_layers) = [0, {num_layers}). Received: "
            f"mlp_only_layers={mlp_only_layers!r}."
        )
    return [
        index not in mlp_only_layers and (index + 1) % decoder_sparse_step == 0
        for index in range(num_layers)
    ]


def sparse_blocks_of(config):
    """`sparse_blocks` of a (possibly partial) backbone config."""
    return sparse_blocks(
        config["num_layers"],
        config.get("decoder_sparse_step", 1),
        config.get("mlp_only_layers"),
    )


def mixed_feedforward(sparse, sparse_block, dense_block):
    """A `build_llama_style` `feedforward`: block index -> a new layer.

    Args:
        sparse: `sparse_blocks(...)`, one bool per block.
        sparse_block: callable returning a new mixture of experts.
        dense_block: callable returning a new dense feed-forward.
    """
    return lambda index: sparse_block() if sparse[index] else dense_block()


def qwen_moe_feedforward(arguments, moe_layer, moe_name, dense_name, **options):
    """`mixed_feedforward` of a Qwen MoE-style constructor's arguments.

    Sparse blocks get a `moe_layer` (`SparseMoE` or `SharedExpertSparseMoE`)
    named `moe_name`, with a fused gate/intermediate kernel, the others a
    `dense_feedforward` named `dense_name`; both share one initializer.

    Args:
        arguments: dict, the constructor's `locals()`: its `num_layers`,
            `decoder_sparse_step`, `mlp_only_layers`, `num_experts`,
            `moe_intermediate_dim`, `top_k`, `norm_top_k_prob`,
            `router_aux_loss_coefficient`, `intermediate_dim` and `dtype`.
        moe_layer, moe_name, dense_name: as above.
        **options: further arguments of `moe_layer`.
    """
    kernel_initializer = keras.initializers.RandomNormal(stddev=0.02)
    sparse = sparse_blocks(
        arguments["num_layers"],
        arguments["decoder_sparse_step"],
        arguments["mlp_only_layers"],
    )
    dtype = arguments["dtype"]
    return mixed_feedforward(
        sparse,
        sparse_block=lambda: moe_layer(
            num_experts=arguments["num_experts"],
            intermediate_dim=arguments["moe_intermediate_dim"],
            top_k=arguments["top_k"],
            normalize_top_k=arguments["norm_top_k_prob"],
            fused_gate_intermediate=True,
            router_aux_loss_coef=arguments["router_aux_loss_coefficient"],
            kernel_initializer=kernel_initializer,
            dtype=dtype,
            name=moe_name,
            **options,
        ),
        dense_block=lambda: dense_feedforward(
            arguments["intermediate_dim"], dense_name, kernel_initializer, dtype
        ),
    )


def dense_feedforward(intermediate_dim, name, kernel_initializer, dtype):
    """The dense SwiGLU of a mixed decoder's dense blocks, named `name`."""
    return GatedFeedForward(
        intermediate_dim,
        kernel_initializer=kernel_initializer,
        dtype=dtype,
        name=name,
    )


def mixed_feedforward_rules(config, block, sparse_rules, dense_name):
    """The rules of the kinds of feed-forward block `config` has.

    A rule that matches no variable is an error, so the mixture's rules
    (`sparse_rules`) come only with a sparse block and the dense SwiGLU's
    (under `block + dense_name`) only with a dense one.
    """
    sparse = sparse_blocks_of(config)
    rules = list(sparse_rules) if any(sparse) else []
    if not all(sparse):
        rules += feedforward_rules(block + dense_name + "/")
    return rules
