"""Built-in Llama 4 (text) preset configs (configs only: no weights).

The text configs (`text_config` of the published `config.json`) of
`meta-llama/Llama-4-Scout-17B-16E` and `meta-llama/Llama-4-Maverick-17B-128E`
(the instruct versions share them). keras-hub has no Llama 4.

- Maverick: 128 experts on every other block (`interleave_moe_layer_step=2`:
  blocks 1, 3, 5, ...), dense SwiGLU blocks of width 16384 between them,
  no query/key norm, no RoPE scaling: 400,711,848,960 parameters, 17.2B
  active per token (one routed expert and the shared one).
- Scout: 16 experts on every block, query/key norm, Llama 3.1-style RoPE
  scaling (factor 16, both frequency factors 1, 8192 original positions):
  107,769,861,120 parameters (Meta's 109B counts the vision tower), 17.2B
  active.

Both: every fourth block (3, 7, 11, ...) is a global NoPE block with
attention temperature tuning; the others attend within chunks of 8192
tokens. The rope scaling values are from memory of the published configs.
"""

_NUM_LAYERS = 48
_NO_ROPE_EVERY = 4

_COMMON = {
    "vocabulary_size": 202048,
    "num_layers": _NUM_LAYERS,
    "num_query_heads": 40,
    "num_key_value_heads": 8,
    "hidden_dim": 5120,
    "intermediate_dim": 8192,
    "intermediate_dim_mlp": 16384,
    "head_dim": 128,
    "top_k": 1,
    "no_rope_layers": [
        int((index + 1) % _NO_ROPE_EVERY != 0) for index in range(_NUM_LAYERS)
    ],
    "attention_chunk_size": 8192,
    "attn_temperature_tuning": True,
    "floor_scale": 8192,
    "attn_scale": 0.1,
    "rope_max_wavelength": 500000.0,
    "layer_norm_epsilon": 1e-5,
    "tie_word_embeddings": False,
}

LLAMA4_PRESETS = {
    "llama4_scout_17b_16e": {
        **_COMMON,
        "num_experts": 16,
        "interleave_moe_layer_step": 1,
        "use_qk_norm": True,
        "rope_frequency_adjustment_factor": 16.0,
        "rope_low_freq_factor": 1.0,
        "rope_high_freq_factor": 1.0,
        "rope_pretraining_sequence_length": 8192,
        "max_position_embeddings": 10485760,
    },
    "llama4_maverick_17b_128e": {
        **_COMMON,
        "num_experts": 128,
        "interleave_moe_layer_step": 2,
        "use_qk_norm": False,
        "max_position_embeddings": 1048576,
    },
}
