"""Reusable layers shared by keras_nlp backbones.

Decoder blocks share one naming scheme: `DecoderBlock` is the block of the
decoder-only backbones, and a specialised block is `<What>DecoderBlock`
(`CrossAttentionDecoderBlock` for encoder-decoders, `GemmaDecoderBlock` in
`keras_nlp.models.gemma`), each in a module of the same name.
"""

from keras_nlp.layers.cached_attention import CachedGroupedQueryAttention
from keras_nlp.layers.cached_attention import alibi_slopes
from keras_nlp.layers.cached_attention import decoder_attention_mask
from keras_nlp.layers.cross_attention_decoder_block import (
    CrossAttentionDecoderBlock,
)
from keras_nlp.layers.decoder_block import DecoderBlock
from keras_nlp.layers.dense import named_dense
from keras_nlp.layers.expert_bank import ExpertBank
from keras_nlp.layers.gated_feedforward import GatedFeedForward
from keras_nlp.layers.grouped_query_attention import grouped_query_attention
from keras_nlp.layers.rotary_embedding import RotaryEmbedding
from keras_nlp.layers.shared_expert_moe import SharedExpertSparseMoE
from keras_nlp.layers.sparse_moe import SparseMoE
from keras_nlp.layers.sparse_moe import configure_experts
from keras_nlp.layers.token_and_position_embedding import PositionEmbedding
from keras_nlp.layers.token_and_position_embedding import (
    TokenAndPositionEmbedding,
)
from keras_nlp.layers.token_and_position_embedding import segment_embedding
from keras_nlp.layers.token_and_position_embedding import token_embedding
from keras_nlp.layers.transformer_encoder import TransformerEncoderBlock
from keras_nlp.layers.transformer_encoder import encoder_attention_mask
from keras_nlp.layers.vit_encoder import VisionTransformerBlock
from keras_nlp.layers.vit_encoder import VisionTransformerEncoder
from keras_nlp.layers.zero_centered_rms_normalization import (
    ZeroCenteredRMSNormalization,
)

__all__ = [
    "CachedGroupedQueryAttention",
    "DecoderBlock",
    "ExpertBank",
    "GatedFeedForward",
    "PositionEmbedding",
    "RotaryEmbedding",
    "SharedExpertSparseMoE",
    "SparseMoE",
    "TokenAndPositionEmbedding",
    "CrossAttentionDecoderBlock",
    "TransformerEncoderBlock",
    "VisionTransformerBlock",
    "VisionTransformerEncoder",
    "ZeroCenteredRMSNormalization",
    "alibi_slopes",
    "configure_experts",
    "decoder_attention_mask",
    "encoder_attention_mask",
    "grouped_query_attention",
    "named_dense",
    "segment_embedding",
    "token_embedding",
]
