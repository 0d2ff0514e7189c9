"""The causal LM of each decoder family that needs no code of its own.

Such a class only names its backbone: its head, `fit`, `generate`, presets
and sharding are `CausalLM`'s. Each is declared here in a few lines rather
than in a file of its own per family (they were 17 files of ~42 lines, all
but two of them docstring). `_family_causal_lm` writes each class's
docstring from one template (its backbone, what its head is, and a tiny
config for a runnable example), so `help(keras_nlp.models.LlamaCausalLM)`
still documents Llama's, and registers it for Keras serialization under
the name it always had (`keras_nlp.models>LlamaCausalLM`).

A family whose causal LM has code of its own keeps it in its folder
(`pali_gemma/pali_gemma_causal_lm.py`).
"""

import textwrap

import keras

from keras_nlp.models.bloom.bloom_backbone import BloomBackbone
from keras_nlp.models.causal_lm import CausalLM
from keras_nlp.models.causal_lm import PreprocessorFirstCausalLM
from keras_nlp.models.deepseek_v3.deepseek_v3_backbone import DeepSeekV3Backbone
from keras_nlp.models.falcon.falcon_backbone import FalconBackbone
from keras_nlp.models.gemma.gemma_backbone import GemmaBackbone
from keras_nlp.models.gemma3.gemma3_backbone import Gemma3Backbone
from keras_nlp.models.gpt2.gpt2_backbone import GPT2Backbone
from keras_nlp.models.gpt_neo_x.gpt_neo_x_backbone import GPTNeoXBackbone
from keras_nlp.models.gpt_oss.gpt_oss_backbone import GptOssBackbone
from keras_nlp.models.llama.llama_backbone import LlamaBackbone
from keras_nlp.models.llama3.llama3_backbone import Llama3Backbone
from keras_nlp.models.llama4.llama4_backbone import Llama4Backbone
from keras_nlp.models.mistral.mistral_backbone import MistralBackbone
from keras_nlp.models.mixtral.mixtral_backbone import MixtralBackbone
from keras_nlp.models.opt.opt_backbone import OPTBackbone
from keras_nlp.models.phi3.phi3_backbone import Phi3Backbone
from keras_nlp.models.qwen.qwen_backbone import QwenBackbone
from keras_nlp.models.qwen3.qwen3_backbone import Qwen3Backbone
from keras_nlp.models.qwen3_moe.qwen3_moe_backbone import Qwen3MoeBackbone
from keras_nlp.models.qwen_moe.qwen_moe_backbone import QwenMoeBackbone
from keras_nlp.models.smollm3.smollm3_backbone import SmolLM3Backbone

_DOCSTRING = """\
A `{backbone}` and its head: next-token logits and `generate`.

{head}

Args:
{args}

Example:

```python
import keras_nlp

# From a preset directory (ours, keras-hub's or a Hugging Face
# checkpoint, with its tokenizer):
# causal_lm = keras_nlp.models.{name}.from_preset("./model_dir")
# causal_lm.generate("The capital of France is", max_new_tokens=8)
backbone = keras_nlp.models.{backbone}(
{config}
)
causal_lm = keras_nlp.models.{name}(backbone)
causal_lm.generate([[1, 2, 3]], max_new_tokens=4)["token_ids"]
```
"""

_BACKBONE_FIRST_ARGS = """\
    backbone: a `{backbone}`.
    preprocessor: optional `TextPreprocessor` or `Tokenizer`, or
        keras-hub's preprocessor of the family (see `CausalLM`).
    tokenizer: optional `Tokenizer` (keyword only).
    compile: bool, compile with the defaults (keyword only).
    **kwargs: forwarded to `keras.Model`."""

_PREPROCESSOR_FIRST_ARGS = """\
    preprocessor: optional `TextPreprocessor` or `Tokenizer`, first
        as in keras-hub (or the backbone, given alone).
    backbone: a `{backbone}`.
    tokenizer: optional `keras_nlp.tokenizers.Tokenizer` (keyword
        only).
    compile: bool, compile with the defaults (keyword only).
    **kwargs: forwarded to `keras.Model`."""

# What every example's tiny backbone starts with.
_SMALL = dict(vocabulary_size=96, num_layers=2, hidden_dim=32)
_WIDTH = 72


def _family_causal_lm(head, example):
    """Documents and registers a family's `CausalLM` subclass.

    Args:
        head: what the head is, completing "The head is ...".
        example: the keyword arguments of a tiny backbone of the class's
            `backbone_cls`, for the runnable example.
    """

    def declare(cls):
        backbone = cls.backbone_cls.__name__
        args = (
            _PREPROCESSOR_FIRST_ARGS
            if issubclass(cls, PreprocessorFirstCausalLM)
            else _BACKBONE_FIRST_ARGS
        )
        config = ", ".join(f"{key}={value!r}" for key, value in example.items())
        cls.__doc__ = _DOCSTRING.format(
            name=cls.__name__,
            backbone=backbone,
            head=textwrap.fill(
                f"The head is {head}. Everything else (`fit`, `generate`, "
                "presets, sharding) is `keras_nlp.models.CausalLM`'s.",
                _WIDTH,
                break_on_hyphens=False,
            ),
            args=args.format(backbone=backbone),
            config=textwrap.fill(
                config + ",",
                _WIDTH,
                initial_indent="    ",
                subsequent_indent="    ",
            ),
        )
        return keras.saving.register_keras_serializable(
            package="keras_nlp.models"
        )(cls)

    return declare


_TIED = "the tied token embedding"
_UNTIED = "the untied output embedding"
_UNTIED_OR_TIED = "the untied output embedding, or the tied table"


@_family_causal_lm(_TIED, dict(_SMALL, num_heads=4, intermediate_dim=64))
class BloomCausalLM(CausalLM):
    backbone_cls = BloomBackbone


@_family_causal_lm(
    _TIED, dict(_SMALL, num_attention_heads=4, intermediate_dim=64)
)
class FalconCausalLM(CausalLM):
    backbone_cls = FalconBackbone


@_family_causal_lm(
    _TIED + ", with Gemma 2's final logit soft cap",
    dict(
        _SMALL,
        num_query_heads=4,
        num_key_value_heads=1,
        intermediate_dim=64,
        head_dim=8,
    ),
)
class GemmaCausalLM(CausalLM):
    backbone_cls = GemmaBackbone


@_family_causal_lm(
    _TIED + "; prompts are text (a vision encoder, if any, is not run)",
    dict(
        _SMALL,
        num_query_heads=4,
        num_key_value_heads=2,
        image_size=16,
        intermediate_dim=64,
        head_dim=8,
    ),
)
class Gemma3CausalLM(PreprocessorFirstCausalLM):
    backbone_cls = Gemma3Backbone


# Its example's odd vocabulary size is kept as it was.
@_family_causal_lm(
    _TIED,
    dict(
        _SMALL,
        vocabulary_size=97,
        num_heads=4,
        intermediate_dim=64,
        max_sequence_length=32,
    ),
)
class GPT2CausalLM(CausalLM):
    backbone_cls = GPT2Backbone


@_family_causal_lm(
    "the untied output embedding (`embed_out`), or the tied table",
    dict(_SMALL, num_heads=4, intermediate_dim=64, max_sequence_length=32),
)
class GPTNeoXCausalLM(CausalLM):
    backbone_cls = GPTNeoXBackbone


@_family_causal_lm(
    _UNTIED,
    dict(
        _SMALL,
        num_query_heads=4,
        num_key_value_heads=2,
        intermediate_dim=16,
        num_experts=4,
        top_k=2,
        sliding_window=4,
    ),
)
class GptOssCausalLM(CausalLM):
    backbone_cls = GptOssBackbone


@_family_causal_lm(
    _UNTIED_OR_TIED,
    dict(_SMALL, num_query_heads=4, num_key_value_heads=4, intermediate_dim=48),
)
class LlamaCausalLM(CausalLM):
    backbone_cls = LlamaBackbone


@_family_causal_lm(
    _UNTIED_OR_TIED,
    dict(_SMALL, num_query_heads=8, num_key_value_heads=2, intermediate_dim=48),
)
class Llama3CausalLM(CausalLM):
    backbone_cls = Llama3Backbone


@_family_causal_lm(
    _UNTIED,
    dict(
        _SMALL,
        num_query_heads=8,
        num_key_value_heads=2,
        intermediate_dim=48,
        sliding_window=4,
    ),
)
class MistralCausalLM(CausalLM):
    backbone_cls = MistralBackbone


@_family_causal_lm(
    _UNTIED,
    dict(
        _SMALL,
        num_query_heads=8,
        num_key_value_heads=2,
        intermediate_dim=48,
        num_experts=4,
        top_k=2,
    ),
)
class MixtralCausalLM(CausalLM):
    backbone_cls = MixtralBackbone


@_family_causal_lm(
    _TIED + " (after OPT-350M's `project_out`)",
    dict(_SMALL, num_heads=4, intermediate_dim=64, max_sequence_length=32),
)
class OPTCausalLM(CausalLM):
    backbone_cls = OPTBackbone


@_family_causal_lm(
    _UNTIED,
    dict(_SMALL, num_query_heads=4, num_key_value_heads=4, intermediate_dim=48),
)
class Phi3CausalLM(CausalLM):
    backbone_cls = Phi3Backbone


@_family_causal_lm(
    _UNTIED_OR_TIED,
    dict(
        _SMALL,
        num_query_heads=8,
        num_key_value_heads=2,
        intermediate_dim=48,
        tie_word_embeddings=True,
    ),
)
class QwenCausalLM(CausalLM):
    backbone_cls = QwenBackbone


@_family_causal_lm(
    _UNTIED_OR_TIED,
    dict(
        _SMALL,
        num_query_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        intermediate_dim=48,
    ),
)
class Qwen3CausalLM(CausalLM):
    backbone_cls = Qwen3Backbone


@_family_causal_lm(
    _UNTIED_OR_TIED,
    dict(
        _SMALL,
        num_query_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        intermediate_dim=48,
        moe_intermediate_dim=16,
        num_experts=4,
        top_k=2,
    ),
)
class Qwen3MoeCausalLM(CausalLM):
    backbone_cls = Qwen3MoeBackbone


@_family_causal_lm(
    _UNTIED_OR_TIED,
    dict(
        _SMALL,
        num_query_heads=4,
        num_key_value_heads=2,
        intermediate_dim=48,
        moe_intermediate_dim=16,
        shared_expert_intermediate_dim=24,
        num_experts=4,
        top_k=2,
    ),
)
class QwenMoeCausalLM(CausalLM):
    backbone_cls = QwenMoeBackbone


@_family_causal_lm(
    _TIED,
    dict(
        _SMALL,
        intermediate_dim=48,
        num_attention_heads=4,
        num_key_value_heads=2,
        attention_bias=False,
        attention_dropout=0.0,
        rope_layer_enabled_list=[True, False],
        layer_types=["full_attention"] * 2,
        mlp_bias=False,
        layer_norm_epsilon=1e-6,
        max_position_embeddings=128,
        rope_theta=10000.0,
        partial_rotary_factor=1.0,
    ),
)
class SmolLM3CausalLM(CausalLM):
    backbone_cls = SmolLM3Backbone


@_family_causal_lm(
    _UNTIED,
    dict(
        _SMALL,
        num_layers=4,
        num_query_heads=4,
        num_key_value_heads=2,
        intermediate_dim=16,
        intermediate_dim_mlp=48,
        num_experts=4,
        interleave_moe_layer_step=2,
        attention_chunk_size=2,
        floor_scale=2,
    ),
)
class Llama4CausalLM(CausalLM):
    backbone_cls = Llama4Backbone


@_family_causal_lm(
    _UNTIED_OR_TIED,
    dict(
        _SMALL,
        num_query_heads=4,
        intermediate_dim=48,
        moe_intermediate_dim=16,
        n_routed_experts=8,
        n_shared_experts=1,
        num_experts_per_tok=2,
        n_group=4,
        topk_group=2,
        first_k_dense_replace=1,
        q_lora_rank=24,
        kv_lora_rank=16,
        qk_nope_head_dim=8,
        qk_rope_head_dim=4,
        v_head_dim=8,
    ),
)
class DeepSeekV3CausalLM(CausalLM):
    backbone_cls = DeepSeekV3Backbone
