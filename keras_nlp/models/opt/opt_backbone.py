"""OPT decoder backbone."""

import keras

from keras_nlp.distribution.rules import DATA
from keras_nlp.distribution.rules import MODEL
from keras_nlp.layers.dense import named_dense
from keras_nlp.layers.layout_rules import named_rule
from keras_nlp.layers.layout_rules import position_embedding_rules
from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.families.gpt import build_gpt_style_from
from keras_nlp.models.families.gpt import gpt_block_rules
from keras_nlp.models.opt.opt_embedding import PROJECT_IN_DIMS
from keras_nlp.models.opt.opt_embedding import PROJECT_OUT_DIMS
from keras_nlp.models.opt.opt_embedding import OPTProjectedEmbedding
from keras_nlp.models.opt.opt_presets import OPT_PRESETS

# The embedding projections: their hidden side on the model axis, like
# ALBERT's (the other way round if it won't divide).
_PROJECTION_ROLES = (
    {"hidden": MODEL, "embedding": DATA},
    {"hidden": DATA, "embedding": MODEL},
)


def _projects(token_embedding_dim, hidden_dim):
    """Whether the token table's width needs the embedding projections."""
    return token_embedding_dim is not None and token_embedding_dim != hidden_dim


class OPTBackbone(Backbone):
    """OPT decoder that maps token ids to final-normalized hidden states.

    GPT-2's architecture with a ReLU MLP: token embeddings plus learned
    absolute position embeddings (under one `embeddings` layer), then
    `num_layers` pre-LayerNorm blocks of multi-head causal self-attention
    and a ReLU MLP, all projections with biases, and a final LayerNorm.
    Positions count from 0 at the first token of every row, padding
    included: keras-hub checkpoints store the position table without the
    two-row offset of the original fairseq/Hugging Face weights. The token
    embedding is tied: `token_embedding(x, reverse=True)` gives the
    vocabulary logits.

    Two options build OPT-350M: `normalize_first=False` makes the blocks
    post-LayerNorm (each norm applied to its residual sum), and then there
    is no final LayerNorm (`layer_norm` is `None`); a `token_embedding_dim`
    other than `hidden_dim` makes the token table that wide, with
    bias-free projections `embeddings/project_in` (token embeddings to
    `hidden_dim`, before the positions are added) and `project_out` (the
    last hidden states back to `token_embedding_dim`, so the outputs and
    the tied logits are `token_embedding_dim` wide).

    Args:
        vocabulary_size: int. Rows of the token embedding.
        num_layers: int. Number of decoder blocks.
        num_heads: int. Attention heads; must divide `hidden_dim`.
        hidden_dim: int. Width of the residual stream and embeddings.
        intermediate_dim: int. Width of each MLP's hidden layer.
        dropout: float. Dropout rate in training: on the attention
            probabilities and both residual branches. Defaults to `0.1`,
            as OPT was trained.
        max_sequence_length: int. Rows of the position embedding, the
            longest input the model takes. Defaults to `2048`.
        normalize_first: bool. Pre-LayerNorm blocks and a final LayerNorm
            (`True`, the default and keras-hub's), or post-LayerNorm blocks
            and no final LayerNorm (`False`, OPT-350M). Keyword-only.
        token_embedding_dim: int or `None`. Width of the token table (and
            of the outputs); `None` (the default) means `hidden_dim`, no
            projections. OPT-350M has 512 for a `hidden_dim` of 1024.
            Keyword-only.
        dtype: string or `keras.DTypePolicy`. Variable and compute dtype.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.opt.opt_backbone import OPTBackbone

    model = OPTBackbone(
        vocabulary_size=101,
        num_layers=2,
        num_heads=4,
        hidden_dim=32,
        intermediate_dim=64,
        max_sequence_length=16,
    )
    inputs = {
        "token_ids": np.array([[5, 9, 2, 7], [0, 0, 3, 4]], dtype="int32"),
        "padding_mask": np.array([[1, 1, 1, 1], [0, 0, 1, 1]], dtype="int32"),
    }
    hidden_states = model(inputs)  # shape (2, 4, 32)
    logits = model.token_embedding(hidden_states, reverse=True)  # (2, 4, 101)
    ```
    """

    presets = OPT_PRESETS

    @staticmethod
    def _layout_rules(config):
        tables = "embeddings/"
        rules = [
            *token_embedding_rules(tables + "token_embedding/", tied=True),
            *position_embedding_rules(tables + "position_embedding/"),
            *gpt_block_rules(),
        ]
        if _projects(config.get("token_embedding_dim"), config["hidden_dim"]):
            rules += [
                named_rule(
                    tables + "project_in/kernel",
                    PROJECT_IN_DIMS,
                    *_PROJECTION_ROLES,
                ),
                named_rule(
                    "project_out/kernel", PROJECT_OUT_DIMS, *_PROJECTION_ROLES
                ),
            ]
        return rules

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        dropout=0.1,
        max_sequence_length=2048,
        dtype=None,
        *,
        normalize_first=True,
        token_embedding_dim=None,
        **kwargs,
    ):
        initializer = keras.initializers.TruncatedNormal(stddev=0.02)
        embeddings = project_out = None
        if _projects(token_embedding_dim, hidden_dim):
            embeddings = OPTProjectedEmbedding(
                vocabulary_size=vocabulary_size,
                sequence_length=max_sequence_length,
                embedding_dim=token_embedding_dim,
                hidden_dim=hidden_dim,
                embeddings_initializer=initializer,
                dtype=dtype,
                name="embeddings",
            )
            project_out = named_dense(
                token_embedding_dim,
                PROJECT_OUT_DIMS,
                name="project_out",
                use_bias=False,
                kernel_initializer=initializer,
                dtype=dtype,
            )
        build_gpt_style_from(
            self,
            locals(),
            activation="relu",
            initializer=initializer,
            # Both tables in one layer, and no dropout on their sum.
            embeddings_layer="embeddings",
            embeddings_dropout=False,
            embeddings=embeddings,
            output_projection=project_out,
        )
        self.project_out = project_out
