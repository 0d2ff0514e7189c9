"""Built-in GPT-OSS preset configs (configs only: no weights are bundled).

keras-hub ships these presets' configs on Kaggle only; these are the
published `openai/gpt-oss-20b` and `openai/gpt-oss-120b` `config.json`
values mapped to keras-hub's argument names by its converter
(`keras_hub/src/utils/transformers/convert_gpt_oss.py`). They reproduce
keras-hub's `metadata.params` exactly. The safeguard models fine-tune the
same architectures.
"""

_GPT_OSS = {
    "vocabulary_size": 201088,
    "num_query_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "hidden_dim": 2880,
    "intermediate_dim": 2880,
    "top_k": 4,
    "rope_max_wavelength": 150000,
    # YaRN: 32 times the 4096 positions of pretraining.
    "rope_scaling_factor": 32.0,
    "layer_norm_epsilon": 1e-5,
    "sliding_window": 128,
}
_GPT_OSS_20B = {**_GPT_OSS, "num_layers": 24, "num_experts": 32}
_GPT_OSS_120B = {**_GPT_OSS, "num_layers": 36, "num_experts": 128}

GPT_OSS_PRESETS = {
    "gpt_oss_20b_en": dict(_GPT_OSS_20B),
    "gpt_oss_120b_en": dict(_GPT_OSS_120B),
    "gpt_oss_safeguard_20b_en": dict(_GPT_OSS_20B),
    "gpt_oss_safeguard_120b_en": dict(_GPT_OSS_120B),
}
