"""Hugging Face `paligemma` checkpoints (PaliGemma 1 and 2).

They load as a `PaliGemmaBackbone`: the nested `text_config` is a Gemma
(`gemma`, PaliGemma 1) or Gemma 2 (`gemma2`, PaliGemma 2) decoder, read by
the Gemma family's translation; the nested `vision_config` is a SigLIP tower
(`siglip_vision_model`), read as Gemma 3's; `multi_modal_projector.linear`
is our `image_classifier`.

Facts the translation rests on (from `transformers`' PaliGemma config and
model, and keras-hub's converter):

- Nested configs hold only the fields that differ from their classes'
  defaults (`GemmaConfig`, `Gemma2Config`, `SiglipVisionConfig`), which are
  applied; PaliGemma 2's configs omit Gemma 2's soft caps (50 and 30),
  window (4096) and query scalar (256). A `text_config` without
  `model_type` is a Gemma one.
- The text embedding has `image_token_index` rows of text vocabulary, then
  the `<image>` placeholder's row and padding up to `text_config.vocab_size`
  (257152 and 257216 in Google's checkpoints). The placeholder's embedding
  is replaced by the image features, so, like keras-hub, we keep the first
  `image_token_index` rows (`vocabulary_size`). Export writes the 64 rows
  after them as zeros, as Google's layout has them; a checkpoint with
  another number of rows there is refused (it names both fields).
- The projector is one biased linear layer to the text's hidden size
  (`projection_dim`); `projector_hidden_act` is not applied. Image features
  are divided by `sqrt(text_config.hidden_size)` before the decoder's
  `sqrt(hidden_size)` embedding scale: net, unscaled, as ours.
- The top-level `hidden_size` is a stale copy (2048 in PaliGemma 2 3B,
  whose text is 2304 wide): current `transformers` scales by the text
  config's; export writes the text's width there.
- `num_image_tokens` (both nested configs) is derived,
  `(image_size // patch_size) ** 2`; a different value is refused.
- Image and prompt tokens attend to each other (the prefix-LM mask our
  backbone builds); `transformers` 5 records it as the text config's
  `use_bidirectional_attention: true` (absent before).
- Tensors: the published checkpoints (and `transformers` before 4.52)
  name them `language_model.model.*`, `vision_tower.vision_model.*` and
  `multi_modal_projector.*`, which export writes: every `transformers`
  version (4.52 on map them to the new names when loading) and keras-hub
  read them. Current `transformers` saves `model.language_model.*`,
  `model.vision_tower.vision_model.*` and `model.multi_modal_projector.*`
  (and a bare `PaliGemmaModel` `language_model.*`); those load too. The
  output projection is the tied embedding.
"""

from keras_nlp.models.gemma.gemma_huggingface import GEMMA
from keras_nlp.models.gemma.gemma_huggingface import gemma_weights
from keras_nlp.models.gemma3.gemma3_huggingface import VISION_DEFAULTS
from keras_nlp.models.gemma3.gemma3_huggingface import nested_config
from keras_nlp.models.gemma3.gemma3_huggingface import read_siglip
from keras_nlp.models.gemma3.gemma3_huggingface import siglip_weights
from keras_nlp.models.gemma3.gemma3_huggingface import write_siglip
from keras_nlp.saving.huggingface import KERNEL
from keras_nlp.saving.huggingface import HuggingFaceFamily
from keras_nlp.saving.huggingface import Pad
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface import register_family

TEXT_PREFIX = "language_model.model."
VISION_PREFIX = "vision_tower.vision_model."
PROJECTOR_PREFIX = "multi_modal_projector."
# Rows of the text embedding after the text vocabulary: the `<image>`
# placeholder's and padding (257216 - 257152 in Google's checkpoints).
IMAGE_TOKEN_ROWS = 64
# `PaliGemmaConfig`'s default `projection_dim`.
DEFAULT_PROJECTION_DIM = 2048
# The omitted fields' values: `GemmaConfig`'s and `Gemma2Config`'s defaults
# (the fields our translation reads; the Gemma family defaults the rest).
TEXT_DEFAULTS = {
    "gemma": {
        "vocab_size": 256_000,
        "hidden_size": 3072,
        "intermediate_size": 24_576,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "head_dim": 256,
    },
    "gemma2": {
        "vocab_size": 256_000,
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "query_pre_attn_scalar": 256,
        "sliding_window": 4096,
        "attn_logit_softcapping": 50.0,
        "final_logit_softcapping": 30.0,
    },
}
VISION_IGNORED_FIELDS = (
    # Inference only.
    "attention_dropout",
    # Overwritten by the top-level `projection_dim` (which is read).
    "projection_dim",
    # Not applied: the projector is one linear layer.
    "projector_hidden_act",
    # Passed to `SiglipVisionConfig` by PaliGemma's default config; the
    # vision tower has no vocabulary.
    "vocab_size",
)
MULTIMODAL_IGNORED_FIELDS = (
    # A stale copy of the text's width (see the module docstring).
    "hidden_size",
    # The deprecated top-level copy of the text vocabulary size.
    "vocab_size",
    "_vocab_size",
    # The label value the training loss skips.
    "ignore_index",
)


def _text_config(hf):
    """The nested Gemma or Gemma 2 config, defaults applied."""
    raw = hf.data.get("text_config")
    model_type = (
        raw.get("model_type", "gemma") if isinstance(raw, dict) else None
    )
    if isinstance(raw, dict) and model_type not in TEXT_DEFAULTS:
        hf.unsupported(
            "text_config.model_type", model_type, sorted(TEXT_DEFAULTS)
        )
    defaults = {"model_type": "gemma", **TEXT_DEFAULTS.get(model_type, {})}
    text = nested_config(hf, "text_config", defaults)
    # Prefix-LM attention, which our backbone always builds; the Gemma
    # family's reader would refuse the flag, so it is settled here.
    bidirectional = text.get("use_bidirectional_attention")
    if bidirectional not in (None, True):
        text.unsupported(
            "use_bidirectional_attention",
            bidirectional,
            [True],
            why=" (PaliGemma's image and prompt tokens attend to each other)",
        )
    text.data.pop("use_bidirectional_attention", None)
    return text


def _image_token_index(hf):
    index = hf.get("image_token_index")
    alias = hf.get("image_token_id")
    if index is None:
        index = alias
    elif alias is not None and alias != index:
        hf.unsupported(
            "image_token_id",
            alias,
            [index],
            why=" (it disagrees with image_token_index)",
        )
    if index is None:
        return hf.require("image_token_index")
    return index


def _from_hf(hf):
    text = _text_config(hf)
    config = GEMMA.config_from_hf(text)
    # Gemma 2's other query scalars: GemmaBackbone's option only.
    scalar = config.pop("query_pre_attn_scalar", None)
    if scalar is not None:
        text.unsupported(
            "query_pre_attn_scalar",
            scalar,
            [
                config["head_dim"],
                config["hidden_dim"] // config["num_query_heads"],
            ],
        )
    hidden_dim = config["hidden_dim"]
    vision = nested_config(hf, "vision_config", VISION_DEFAULTS)
    tower = read_siglip(vision)
    patches = (tower["image_size"] // tower["patch_size"]) ** 2
    for nested in (text, vision):
        tokens = nested.get("num_image_tokens", patches)
        if tokens != patches:
            nested.unsupported(
                "num_image_tokens",
                tokens,
                [patches],
                why=" (it is (image_size // patch_size) ** 2)",
            )
    text.check_all_read(GEMMA.ignored_fields)
    vision.check_all_read(VISION_IGNORED_FIELDS)
    projection = hf.get("projection_dim", DEFAULT_PROJECTION_DIM)
    if projection != hidden_dim:
        hf.unsupported(
            "projection_dim",
            projection,
            [hidden_dim],
            why=" (the projector maps image tokens into the text's "
            "hidden_size)",
        )
    index = _image_token_index(hf)
    rows = config["vocabulary_size"]
    if rows != index + IMAGE_TOKEN_ROWS:
        hf.unsupported(
            "image_token_index",
            index,
            [rows - IMAGE_TOKEN_ROWS],
            why=(
                f" (with text_config.vocab_size={rows}: the embedding's "
                "first image_token_index rows are the text vocabulary, and "
                f"exactly {IMAGE_TOKEN_ROWS} rows, the <image> token's and "
                "padding as in Google's checkpoints, must follow them)"
            ),
        )
    config.update(
        vocabulary_size=index,
        image_size=tower["image_size"],
        vit_patch_size=tower["patch_size"],
        vit_num_heads=tower["num_heads"],
        vit_hidden_dim=tower["hidden_dim"],
        vit_num_layers=tower["num_layers"],
        vit_intermediate_dim=tower["intermediate_dim"],
    )
    return config


def _to_hf(config):
    activation = config.get("vit_classifier_activation")
    if activation is not None:
        raise ValueError(
            "Hugging Face's PaliGemma projects image tokens with a plain "
            "linear layer; this backbone has vit_classifier_activation="
            f"{activation!r}."
        )
    text = GEMMA.config_to_hf(config)
    text.pop("architectures", None)
    text.setdefault("model_type", "gemma")
    vocabulary_size = config["vocabulary_size"]
    image_size, patch_size = config["image_size"], config["vit_patch_size"]
    patches = (image_size // patch_size) ** 2
    text.update(
        vocab_size=vocabulary_size + IMAGE_TOKEN_ROWS,
        num_image_tokens=patches,
    )
    vision = write_siglip(
        {
            "image_size": image_size,
            "patch_size": patch_size,
            "num_heads": config["vit_num_heads"],
            "hidden_dim": config["vit_hidden_dim"],
            "num_layers": config["vit_num_layers"],
            # The backbone's default (SigLIP So400m's).
            "intermediate_dim": config["vit_intermediate_dim"] or 4304,
        }
    )
    hidden_dim = config["hidden_dim"]
    vision.update(num_image_tokens=patches, projection_dim=hidden_dim)
    return {
        "image_token_index": vocabulary_size,
        "projection_dim": hidden_dim,
        "hidden_size": hidden_dim,
        "text_config": text,
        "vision_config": vision,
    }


def _weights(config):
    embedding = "token_embedding/embeddings"
    return [
        # Theirs: ours, then the `<image>` token's and padding rows.
        Weight(
            embedding,
            TEXT_PREFIX + "embed_tokens.weight",
            (Pad(0, 0, IMAGE_TOKEN_ROWS),),
        ),
        *(
            row
            for row in gemma_weights(
                TEXT_PREFIX,
                gemma2_norms=config.get("use_post_ffw_norm", False),
            )
            if row.ours != embedding
        ),
        *siglip_weights(VISION_PREFIX),
        Weight(
            "image_classifier/kernel",
            PROJECTOR_PREFIX + "linear.weight",
            KERNEL,
        ),
        Weight("image_classifier/bias", PROJECTOR_PREFIX + "linear.bias"),
    ]


PALI_GEMMA = register_family(
    HuggingFaceFamily(
        model_type="paligemma",
        backbone="PaliGemmaBackbone",
        architectures=("PaliGemmaForConditionalGeneration",),
        config_from_hf=_from_hf,
        config_to_hf=_to_hf,
        weights=_weights,
        ignored_fields=MULTIMODAL_IGNORED_FIELDS,
        ignorable_tensors=(
            r"(model\.)?(language_model\.)?(model\.)?layers\.\d+\."
            r"self_attn\.rotary_emb\.inv_freq",
            # The tied output projection, when a checkpoint stores it.
            r"(language_model\.)?lm_head\.weight",
        ),
        # The table has the published names (no base prefix); current
        # `transformers`' spellings, then a bare `PaliGemmaModel`'s.
        base_prefix="",
        old_names=(
            (r"^language_model\.model\.", "model.language_model."),
            (r"^(vision_tower|multi_modal_projector)\.", r"model.\1."),
            (r"^language_model\.model\.", "language_model."),
        ),
    )
)
