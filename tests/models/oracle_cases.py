"""The backbone oracle table: our backbones against keras-hub's, as rows.

Each `OracleCase` is one tiny config of one class. `python -m tests.oracles
backbones` builds keras-hub's class of the same name for every row, gives it
`assign_unit_scale` weights, and stores its inputs and outputs under
`tests/oracle_data/backbone-<row id>.npz`. `test_backbone_oracles.py` gives
our class the same weights (drawn by path, so creation order does not
matter) and compares with the stored outputs; rows marked `live` also
rebuild keras-hub's model on every run and compare it with the stored data,
so a new keras-hub version that changes the numbers is caught. `MISTAKES`
rows inject a mistake into our model and require the comparison to fail.

A family's row holds what is that family's: its config, its inputs, the
options that must be exercised, its keras-hub workarounds. Rows live in two
sections (encoders and encoder-decoders; decoders).
"""

import dataclasses
import functools

import keras
import numpy as np

from tests.models.backbone_checks import random_inputs
from tests.models.backbone_checks import unit_scale_value
from tests.models.backbone_checks import vocabulary_of
from tests.models.tiny_configs import GEMMA4_MOE_OPTIONS
from tests.models.tiny_configs import QWEN3_5_MOE_OPTIONS
from tests.models.tiny_configs import gemma4_config
from tests.models.tiny_configs import qwen3_5_config
from tests.models.tiny_configs import smollm3_config
from tests.models.tiny_configs import t5gemma_config


@dataclasses.dataclass(frozen=True)
class OracleCase:
    """One comparison of our backbone with keras-hub's.

    Attributes:
        id: unique row id, e.g. `"llama-gqa_8_2"`: the data file's name.
        backbone: our class name; keras-hub's has the same name unless
            `oracle_class` says otherwise.
        config: constructor arguments both accept.
        inputs: optional `config -> {name: NumPy array}`; by default token
            ids with a left-padded first row (and segment ids where the
            class takes them), `random_inputs(vocabulary_size)`.
        positions: `"real"` compares real tokens only (a decoder's padded
            query attends to no key, so its output is undefined); `"all"`
            compares every position of every output (encoders).
        scales: `((path prefix, standard deviation), ...)` for
            `assign_unit_scale`.
        auto_named: keras-hub layer names with session-unique suffixes
            (`mixtral_sparse_moe_block_3`), dropped to match our paths.
        oracle_fix: optional `oracle -> None`, a keras-hub workaround
            applied before it runs (say why in the row).
        extras: named extra outputs stored and compared besides the
            forward outputs: `"logits"` (the token embedding reversed on
            the sequence output), `"aux_losses"` (the losses a
            `training=True` call adds, for MoE routers without noise).
        atol: tolerance (fp32).
        live: also compare keras-hub's live outputs with the stored ones.
        oracle_class: keras-hub's class name, if not `backbone`.
        oracle_config: keras-hub's arguments, if not `config`; or a
            function returning them (keras-hub objects among them, built
            only with the oracle).
        oracle_rows: run keras-hub's model one batch row at a time (its
            XLNet mixes the rows of a batch); ours runs the whole batch.
        oracle_inputs: optional `inputs -> keras-hub's inputs`, where
            keras-hub's class takes more inputs than ours (Gemma 4's
            `position_ids`); only ours are stored.
    """

    id: str
    backbone: str
    config: dict
    inputs: object = None
    positions: str = "real"
    scales: tuple = ()
    auto_named: tuple = ()
    oracle_fix: object = None
    extras: tuple = ()
    atol: float = 1e-5
    live: bool = False
    oracle_class: str = None
    oracle_config: dict = None
    oracle_rows: bool = False
    oracle_inputs: object = None

    def make_inputs(self):
        if self.inputs is not None:
            return self.inputs(self.config)
        return random_inputs(self.config["vocabulary_size"], batch=3)


@dataclasses.dataclass(frozen=True)
class Mistake:
    """A mistake injected into our model of row `case`: the comparison
    with the stored oracle outputs must fail.

    Attributes:
        case: the `OracleCase.id`.
        name: what the mistake is, e.g. `"exact_gelu"` (the test id).
        inject: `model -> None`, applied after the weights are assigned
            (or `(model, monkeypatch) -> None`, to patch a module's
            function for the test's duration); or None with `config` set.
        config: optional config overrides that make the mistake (a wrong
            window, top-k) instead of `inject`.
    """

    case: str
    name: str
    inject: object = None
    config: dict = None


# === Encoders and encoder-decoders ===
#
# Inputs are small batches with a padded first row (and random segments in
# the second), compared at every position: an encoder's padded query still
# attends to the real keys, and encoder-decoders are padded on the right,
# where a causal decoder's padded query still sees real keys.


def _token_inputs(num_segments=None, batch=3, length=12, padding_mask=True):
    """`random_inputs` for an encoder (ELECTRA's `vocab_size` too)."""

    def make(config):
        return random_inputs(
            vocabulary_of(config),
            batch=batch,
            length=length,
            num_segments=num_segments,
            padding_mask=padding_mask,
        )

    return make


def _enrolled(name, batch=3, length=12):
    """The enrolment's own inputs (encoder-decoders, Whisper's frames)."""

    def make(config):
        from tests.models.tiny_configs import TINY_CONFIGS

        return TINY_CONFIGS[name].make_inputs(
            config, batch=batch, length=length
        )

    return make


def _encoder(vocabulary_size, num_heads, hidden_dim, intermediate_dim, **kw):
    return dict(
        vocabulary_size=vocabulary_size,
        num_layers=2,
        num_heads=num_heads,
        hidden_dim=hidden_dim,
        intermediate_dim=intermediate_dim,
        **kw,
    )


def _albert(num_layers, num_groups, inner, num_heads, hidden_dim):
    return dict(
        _encoder(96, num_heads, hidden_dim, 64, max_sequence_length=16),
        num_layers=num_layers,
        embedding_dim=16,
        num_groups=num_groups,
        num_inner_repetitions=inner,
    )


def _bert(num_heads, hidden_dim, intermediate_dim, num_segments):
    return _encoder(
        98,
        num_heads,
        hidden_dim,
        intermediate_dim,
        max_sequence_length=16,
        num_segments=num_segments,
    )


def _deberta(num_heads, hidden_dim, max_sequence_length, bucket_size):
    return _encoder(
        100,
        num_heads,
        hidden_dim,
        64,
        max_sequence_length=max_sequence_length,
        bucket_size=bucket_size,
    )


def _electra(num_heads, hidden_dim, embedding_dim, num_segments):
    config = _bert(num_heads, hidden_dim, 64, num_segments)
    config["vocab_size"] = config.pop("vocabulary_size")
    return dict(config, embedding_dim=embedding_dim)


def _f_net(hidden_dim, intermediate_dim, num_segments):
    return dict(
        vocabulary_size=96,
        num_layers=2,
        hidden_dim=hidden_dim,
        intermediate_dim=intermediate_dim,
        max_sequence_length=16,
        num_segments=num_segments,
    )


def _whisper(num_heads, hidden_dim, intermediate_dim, num_mels):
    return _encoder(
        96,
        num_heads,
        hidden_dim,
        intermediate_dim,
        num_mels=num_mels,
        dropout=0.0,
        max_encoder_sequence_length=32,
        max_decoder_sequence_length=16,
    )


def _whisper_scales(num_mels, hidden_dim):
    """The convolutions' kernels by their fan-in (window x channels)."""
    conv = "encoder_token_embedding_conv_layer_"
    return (
        (conv + "1/kernel", (3 * num_mels) ** -0.5),
        (conv + "2/kernel", (3 * hidden_dim) ** -0.5),
    )


def _t5(num_heads, intermediate_dim, gated, **kw):
    return dict(
        _encoder(96, num_heads, 32, intermediate_dim, dropout=0.1),
        activation="gelu" if gated else "relu",
        use_gated_activation=gated,
        tie_embedding_weights=not gated,
        **kw,
    )


def _encoder_row(id, backbone, config, inputs, **kw):
    """An encoder row: every position of every output compared."""
    return OracleCase(
        id=id,
        backbone=backbone,
        config=config,
        inputs=inputs,
        positions="all",
        **kw,
    )


# Embedding tables shrunk so far that the embeddings' LayerNorm epsilon
# matters (DistilBERT's 1e-12 against RoBERTa's 1e-5).
_SMALL_EMBEDDINGS = (("embeddings/", 1e-3),)
_TINY_TABLES = (("token_and_position_embedding/", 1e-5),)
_LENGTH_16 = dict(max_sequence_length=16)


def _t5gemma_inputs(config, batch=3, length=12):
    """Both sides padded on the right by one token (row 0), so that even a
    window of 3 centered on a padded encoder query holds a real key (with
    none, keras-hub's additive mask attends outside its window)."""
    rng = np.random.default_rng(0)
    inputs = {}
    for side in ("encoder", "decoder"):
        ids = rng.integers(1, config["vocabulary_size"], (batch, length))
        mask = np.ones((batch, length), "int32")
        mask[0, -1:] = 0
        ids[0, -1:] = 0
        inputs[f"{side}_token_ids"] = ids.astype("int32")
        inputs[f"{side}_padding_mask"] = mask
    return inputs


def _t5gemma_row(id, backbone, config, **kw):
    return _encoder_row(
        id,
        backbone,
        config,
        _t5gemma_inputs,
        # The final norms, which keras-hub leaves unnamed.
        auto_named=("rms_normalization",),
        **kw,
    )


_T5GEMMA_SIDE = (32, 48, 4, 2, 8)
_SLIDING_FULL = ("sliding_attention", "full_attention")

ENCODER_CASES = [
    # ALBERT: the presets' one shared block with 12 heads (base), and
    # groups of several blocks, each group run more than once.
    *(
        _encoder_row(
            f"albert-{name}",
            "AlbertBackbone",
            _albert(*shape),
            _token_inputs(num_segments=2),
            live=name == "shared_heads12",
        )
        for name, shape in (
            ("shared_heads12", (3, 1, 1, 12, 48)),
            ("groups2_inner2", (4, 2, 2, 4, 32)),
            ("groups3_inner1", (6, 3, 1, 2, 32)),
        )
    ),
    # BART: the presets' 12 (base) and 16 (large) heads, and 4.
    *(
        _encoder_row(
            f"bart-heads{heads}",
            "BartBackbone",
            _encoder(97, heads, hidden, 2 * hidden, dropout=0.1, **_LENGTH_16),
            _enrolled("BartBackbone"),
            live=heads == 4,
        )
        for heads, hidden in ((4, 32), (12, 48), (16, 64))
    ),
    # BERT: the presets' 2 (tiny), 8 (small, medium) and 12 (base) heads.
    *(
        _encoder_row(
            f"bert-heads{heads}{suffix}",
            "BertBackbone",
            _bert(heads, hidden, intermediate, segments),
            _token_inputs(num_segments=segments),
            live=heads == 2,
        )
        for heads, hidden, intermediate, segments, suffix in (
            (2, 32, 64, 2, ""),
            (8, 64, 96, 3, "_segments3"),
            (12, 48, 96, 2, ""),
        )
    ),
    # DeBERTaV3: the presets' 6 (extra_small) and 12 (base) heads. 40
    # tokens, well past bucket_size: most offsets land in log buckets, and
    # past max_sequence_length in "heads6" the farthest are clipped.
    *(
        _encoder_row(
            f"deberta_v3-heads{shape[0]}",
            "DebertaV3Backbone",
            _deberta(*shape),
            _token_inputs(length=40),
            live=shape[0] == 6,
        )
        for shape in ((6, 48, 16, 4), (12, 96, 64, 8))
    ),
    # DistilBERT: the preset's 12 heads (and 4 x hidden feed-forward), and
    # 2; the tables shrunk where the epsilon matters.
    *(
        _encoder_row(
            f"distil_bert-heads{heads}{suffix}",
            "DistilBertBackbone",
            _encoder(98, heads, hidden, intermediate, **_LENGTH_16),
            _token_inputs(),
            scales=scales,
            live=heads == 2,
        )
        for heads, hidden, intermediate, suffix, scales in (
            (2, 32, 64, "", ()),
            (12, 48, 192, "", ()),
            (12, 48, 192, "_small_embeddings", _TINY_TABLES),
        )
    ),
    # ELECTRA: small's 4 heads over embeddings projected up, base's 12
    # heads without a projection.
    *(
        _encoder_row(
            f"electra-heads{heads}_{name}",
            "ElectraBackbone",
            _electra(heads, hidden, embedding, segments),
            _token_inputs(num_segments=segments),
            live=heads == 4,
        )
        for heads, hidden, embedding, segments, name in (
            (4, 32, 16, 2, "projected"),
            (12, 48, 48, 3, "unprojected_segments3"),
        )
    ),
    # F-Net: the Fourier transform's two axes, powers of two, and 3 x 2^k
    # like f_net_base_en's hidden 768 with an odd (prime) length. No
    # padding mask.
    *(
        _encoder_row(
            f"f_net-hidden{hidden}_length{length}{suffix}",
            "FNetBackbone",
            _f_net(hidden, 2 * hidden, segments),
            _token_inputs(segments, length=length, padding_mask=False),
            live=hidden == 32,
        )
        for hidden, length, segments, suffix in (
            (32, 12, 4, ""),
            (48, 13, 2, "_segments2"),
        )
    ),
    # RoBERTa: the presets' 12 (base) and 16 (large) heads, and 2; an odd
    # vocabulary like 50265; the tables shrunk where the epsilon matters.
    # XLM-RoBERTa: the same architecture with keras-hub's own class, and a
    # vocabulary that divides only by 2 like 250002.
    *(
        _encoder_row(
            f"{family}-heads{heads}{'_small_embeddings' if small else ''}",
            backbone,
            _encoder(vocabulary, heads, hidden, 2 * hidden, **_LENGTH_16),
            _token_inputs(),
            scales=_SMALL_EMBEDDINGS if small else (),
            live=live,
        )
        for family, backbone, vocabulary, heads, hidden, small, live in (
            ("roberta", "RobertaBackbone", 97, 2, 32, False, True),
            ("roberta", "RobertaBackbone", 97, 12, 48, False, False),
            ("roberta", "RobertaBackbone", 97, 16, 64, False, False),
            ("roberta", "RobertaBackbone", 97, 12, 48, True, False),
            ("xlm_roberta", "XLMRobertaBackbone", 98, 12, 48, False, True),
            ("xlm_roberta", "XLMRobertaBackbone", 98, 16, 64, True, False),
        )
    ),
    # T5: t5_*_multi's ReLU, tied, key_value_dim from the heads; flan / T5
    # 1.1's gated GELU, untied, 6 heads of an explicit width. 40 tokens,
    # past the 8 exact buckets. Both relative bias tables share a path
    # (numbered in order); the norms are auto-named in keras-hub.
    *(
        _encoder_row(
            f"t5-{name}",
            "T5Backbone",
            config,
            _enrolled("T5Backbone", length=40),
            auto_named=("t5_layer_norm",),
            live=name == "relu_tied",
        )
        for name, config in (
            ("relu_tied", _t5(4, 64, gated=False)),
            ("flan_gated_untied", _t5(6, 48, gated=True, key_value_dim=8)),
        )
    ),
    # Whisper: the presets' 6 (tiny), 8 (base) and 20 (large) heads; odd
    # and even frames.
    *(
        _encoder_row(
            f"whisper-heads{heads}{suffix}",
            "WhisperBackbone",
            _whisper(heads, hidden, intermediate, mels),
            _enrolled("WhisperBackbone", length=frames),
            scales=_whisper_scales(mels, hidden),
            live=heads == 6,
        )
        for heads, hidden, intermediate, mels, frames, suffix in (
            (6, 48, 96, 8, 12, ""),
            (8, 64, 128, 16, 11, "_odd_frames"),
            (20, 80, 96, 8, 12, ""),
        )
    ),
    # XLNet: the tiny configs' 4 heads and xlnet_base_like's 12. keras-hub
    # 0.32.0 reshapes where it means to transpose (its relative encoding
    # and padding mask), so a row's outputs depend on the other rows of its
    # batch: it runs one row at a time, where its layout is right.
    *(
        _encoder_row(
            f"xlnet-heads{heads}",
            "XLNetBackbone",
            _encoder(96, heads, hidden, 64, dropout=0.0),
            _token_inputs(num_segments=2),
            live=heads == 4,
            oracle_rows=True,
        )
        for heads, hidden in ((4, 32), (12, 96))
    ),
    # T5Gemma: windows of 4 (keras-hub's decoder keeps 5 keys) with soft
    # caps; an encoder wider than the decoder (t5gemma_9b_2b) with biases,
    # an untied output and another RoPE base; 8:1 heads and a full layer
    # first.
    _t5gemma_row(
        "t5gemma-gqa_4_2-window4-softcaps",
        "T5GemmaBackbone",
        t5gemma_config(
            _T5GEMMA_SIDE,
            _T5GEMMA_SIDE,
            _SLIDING_FULL,
            sliding_window=4,
            query_pre_attn_scalar=8.0,
            attn_logit_softcapping=5.0,
            final_logit_softcapping=30.0,
        ),
        live=True,
    ),
    _t5gemma_row(
        "t5gemma-wide_encoder-bias-untied",
        "T5GemmaBackbone",
        t5gemma_config(
            (48, 64, 8, 4, 8),
            (32, 48, 4, 1, 8),
            _SLIDING_FULL,
            sliding_window=3,
            query_pre_attn_scalar=16.0,
            attention_bias=True,
            tie_word_embeddings=False,
            rope_max_wavelength=500.0,
            cross_attention_hidden_size=48,
        ),
    ),
    _t5gemma_row(
        "t5gemma-mqa_8_1-full_first",
        "T5GemmaBackbone",
        t5gemma_config(
            (32, 48, 8, 1, 4),
            (32, 48, 8, 1, 4),
            ("full_attention", "sliding_attention", "sliding_attention"),
            sliding_window=2,
            query_pre_attn_scalar=4.0,
        ),
    ),
    # T5Gemma 2: q/k norms, merged self- and cross-attention; windows of 4
    # and 3 (the encoder's centered); the 4B's scaled global RoPE, the
    # encoder's own RoPE options, biases, untied, soft caps; no q/k norms.
    _t5gemma_row(
        "t5gemma2-gqa_4_2-window4",
        "T5Gemma2Backbone",
        t5gemma_config(
            _T5GEMMA_SIDE,
            _T5GEMMA_SIDE,
            _SLIDING_FULL,
            sliding_window=4,
            query_pre_attn_scalar=8.0,
        ),
        live=True,
    ),
    _t5gemma_row(
        "t5gemma2-mqa_4_1-window3-options",
        "T5Gemma2Backbone",
        t5gemma_config(
            (32, 48, 4, 1, 8),
            (32, 48, 4, 1, 8),
            _SLIDING_FULL + ("sliding_attention",),
            sliding_window=3,
            query_pre_attn_scalar=16.0,
            global_rope_scaling_factor=8.0,
            rope_max_wavelength=300.0,
            encoder_rope_max_wavelength=500.0,
            encoder_global_rope_scaling_factor=2.0,
            attention_bias=True,
            tie_word_embeddings=False,
            attn_logit_softcapping=5.0,
            final_logit_softcapping=30.0,
        ),
    ),
    _t5gemma_row(
        "t5gemma2-no_qk_norm",
        "T5Gemma2Backbone",
        t5gemma_config(
            _T5GEMMA_SIDE,
            _T5GEMMA_SIDE,
            ("full_attention",),
            query_pre_attn_scalar=8.0,
            use_query_key_norm=False,
        ),
    ),
]


def _set_in_blocks(stack="transformer_layers", of=None, **attributes):
    """Sets `attributes` on every block of `stack` (or each block's `of`)."""

    def inject(model):
        for block in getattr(model, stack):
            target = getattr(block, of) if of else block
            for name, value in attributes.items():
                setattr(target, name, value)

    return inject


def _activation_gelu(approximate):
    """`approximate=True` is BERT's tanh GELU, `False` the exact one."""
    gelu = functools.partial(keras.activations.gelu, approximate=approximate)
    return _set_in_blocks(of="intermediate_dense", activation=gelu)


def _epsilon(epsilon):
    def inject(model):
        for layer in model._flatten_layers():
            if isinstance(layer, keras.layers.LayerNormalization):
                layer.epsilon = epsilon

    return inject


def _changed(variables, change):
    """Assigns `change(value)` to each variable `variables(model)` lists."""

    def inject(model):
        for variable in variables(model):
            value = keras.ops.convert_to_numpy(variable)
            variable.assign(np.asarray(change(value), "float32"))

    return inject


def _reversed_rows(variables):
    return _changed(variables, lambda value: value[::-1])


def _zeroed(variables):
    return _changed(variables, np.zeros_like)


def _swapped(pairs):
    """Exchanges the values of each `(a, b)` of variables `pairs(model)`."""

    def inject(model):
        for first, second in pairs(model):
            value = keras.ops.convert_to_numpy(first)
            first.assign(keras.ops.convert_to_numpy(second))
            second.assign(value)

    return inject


def _albert_blocks(*pairs):
    """ALBERT's blocks `(group, inner)` exchanged pairwise, weights and
    all: the order the blocks run in is what matters."""

    def pairs_of(model):
        blocks = {b.name: b for b in model.transformer_layers}
        name = "group_{}_inner_layer_{}".format
        for first, second in pairs:
            yield from zip(
                blocks[name(*first)].weights,
                blocks[name(*second)].weights,
                strict=True,
            )

    return _swapped(pairs_of)


def _segment_table(model):
    return [model.segment_embedding.embeddings]


def _deberta_offsets_reversed(model, monkeypatch):
    # Key minus query instead of query minus key.
    from keras_nlp.models.deberta_v3 import disentangled_self_attention as m

    index = m.relative_position_index
    monkeypatch.setattr(
        m,
        "relative_position_index",
        lambda *args: keras.ops.transpose(index(*args)),
    )


def _xlnet_offsets_reversed(model, monkeypatch):
    # Key minus query instead of query minus key: the sines change sign.
    from keras_nlp.models.xlnet import xlnet_layers

    encoding = xlnet_layers.relative_encoding

    def reversed_encoding(length, hidden_dim, dtype):
        rows = encoding(length, hidden_dim, dtype)
        half = hidden_dim // 2
        return keras.ops.concatenate([-rows[:, :half], rows[:, half:]], -1)

    monkeypatch.setattr(xlnet_layers, "relative_encoding", reversed_encoding)


def _xlnet_padded_queries_see_real_keys_only(model):
    # BERT's mask instead of XLNet's (a padded query also sees itself).
    def real_keys(padding_mask):
        batch, length = keras.ops.shape(padding_mask)
        keys = keras.ops.cast(padding_mask, "bool")[:, None, :]
        return keras.ops.broadcast_to(keys, (batch, length, length))

    model.attn_mask_layer.call = real_keys


def _f_net_mixing(transform):
    """Every block's Fourier mixing replaced by `transform(x)`."""

    class Mixing(keras.layers.Layer):
        def call(self, inputs, attention_mask=None, training=None):
            return transform(inputs)

    def inject(model):
        for block in model.transformer_layers:
            # Past Keras's tracking, which locks a built layer.
            object.__setattr__(block, "mixing", Mixing())

    return inject


def _hidden_axis_only(x):
    """A 1-D transform over the hidden axis: tokens never mix."""
    return keras.ops.fft((x, keras.ops.zeros_like(x)))[0]


def _orthonormal(x):
    """NumPy's `norm="ortho"`: the 2-D transform over 1/sqrt(seq hidden)."""
    real = keras.ops.fft2((x, keras.ops.zeros_like(x)))[0]
    return real / float(np.sqrt(x.shape[1] * x.shape[2]))


def _t5_bias_tables(model):
    stacks = (
        model.encoder_transformer_layers,
        model.decoder_transformer_layers,
    )
    return [tuple(s[0].self_attention.relative_attention_bias for s in stacks)]


ENCODER_MISTAKES = [
    # keras-hub's T5Gemma decoder window keeps `sliding_window + 1` keys
    # (its encoder none): one key fewer must show.
    Mistake(
        "t5gemma-gqa_4_2-window4-softcaps",
        "decoder_window_one_key_short",
        config=dict(sliding_window=3),
    ),
    # Full layers of T5Gemma 2 scale their RoPE positions.
    Mistake(
        "t5gemma2-mqa_4_1-window3-options",
        "global_rope_unscaled",
        config=dict(global_rope_scaling_factor=1.0),
    ),
    Mistake(
        "albert-groups2_inner2",
        "swap_groups",
        _albert_blocks(((0, 0), (1, 0)), ((0, 1), (1, 1))),
    ),
    Mistake(
        "albert-groups2_inner2",
        "swap_inner_layers",
        _albert_blocks(((0, 0), (0, 1)), ((1, 0), (1, 1))),
    ),
    Mistake(
        "bart-heads4",
        "swap_position_tables",
        _swapped(
            lambda m: [
                (
                    m.encoder_position_embedding.embeddings,
                    m.decoder_position_embedding.embeddings,
                )
            ]
        ),
    ),
    Mistake(
        "bart-heads4",
        "pre_norm_decoder",
        _set_in_blocks("decoder_transformer_layers", normalize_first=True),
    ),
    Mistake(
        "bert-heads8_segments3", "swap_segments", _reversed_rows(_segment_table)
    ),
    Mistake(
        "bert-heads8_segments3",
        "exact_gelu",
        _activation_gelu(approximate=False),
    ),
    Mistake(
        "deberta_v3-heads6", "tanh_gelu", _activation_gelu(approximate=True)
    ),
    # 1 / sqrt(head_dim), as in BERT, instead of 1 / sqrt(3 * head_dim).
    Mistake(
        "deberta_v3-heads6",
        "plain_attention_scale",
        _set_in_blocks(of="mixing", scale=1 / np.sqrt(48 // 6)),
    ),
    Mistake("deberta_v3-heads6", "offsets_reversed", _deberta_offsets_reversed),
    # Log buckets reaching the last one at twice max_sequence_length.
    Mistake(
        "deberta_v3-heads6",
        "far_buckets_span_twice_the_length",
        _set_in_blocks(of="mixing", max_sequence_length=32),
    ),
    Mistake(
        "distil_bert-heads12_small_embeddings",
        "tanh_gelu",
        _activation_gelu(approximate=True),
    ),
    Mistake(
        "distil_bert-heads12_small_embeddings",
        "roberta_epsilon",
        _epsilon(1e-5),
    ),
    Mistake(
        "electra-heads4_projected",
        "swap_segments",
        _reversed_rows(_segment_table),
    ),
    Mistake(
        "electra-heads4_projected",
        "exact_gelu",
        _activation_gelu(approximate=False),
    ),
    Mistake(
        "electra-heads4_projected",
        "skip_projection_bias",
        _zeroed(lambda m: [m.embeddings_projection.bias]),
    ),
    Mistake(
        "f_net-hidden48_length13_segments2",
        "hidden_axis_only",
        _f_net_mixing(_hidden_axis_only),
    ),
    Mistake(
        "f_net-hidden48_length13_segments2",
        "orthonormal_scaling",
        _f_net_mixing(_orthonormal),
    ),
    Mistake(
        "f_net-hidden48_length13_segments2",
        "swap_segments",
        _reversed_rows(_segment_table),
    ),
    Mistake(
        "f_net-hidden48_length13_segments2",
        "exact_gelu",
        _activation_gelu(approximate=False),
    ),
    Mistake(
        "roberta-heads12_small_embeddings", "tanh_gelu", _activation_gelu(True)
    ),
    Mistake(
        "roberta-heads12_small_embeddings", "bert_epsilon", _epsilon(1e-12)
    ),
    # Positions counted from 2 (Hugging Face's padding offset), not 0.
    Mistake(
        "roberta-heads12_small_embeddings",
        "hugging_face_positions",
        _changed(
            lambda m: [m.position_embedding.embeddings],
            lambda value: np.roll(value, -2, axis=0),
        ),
    ),
    # Both tables sit at `self_attention/embeddings`.
    Mistake(
        "t5-flan_gated_untied",
        "swap_bias_tables",
        _swapped(_t5_bias_tables),
    ),
    # The decoder with the encoder's bidirectional buckets.
    Mistake(
        "t5-flan_gated_untied",
        "bidirectional_decoder",
        _set_in_blocks(
            "decoder_transformer_layers", of="self_attention", is_decoder=False
        ),
    ),
    Mistake(
        "t5-flan_gated_untied",
        "ungated",
        _set_in_blocks(
            "decoder_transformer_layers", use_gated_activation=False
        ),
    ),
    Mistake(
        "whisper-heads6",
        "reversed_encoder_positions",
        _reversed_rows(lambda m: [m.encoder_position_embedding.embeddings]),
    ),
    Mistake(
        "whisper-heads6",
        "post_norm_decoder",
        _set_in_blocks("decoder_transformer_layers", normalize_first=False),
    ),
    Mistake(
        "xlm_roberta-heads16_small_embeddings", "bert_epsilon", _epsilon(1e-12)
    ),
    Mistake("xlnet-heads4", "tanh_gelu", _activation_gelu(approximate=True)),
    Mistake("xlnet-heads4", "offsets_reversed", _xlnet_offsets_reversed),
    # "Same segment" and "different segment" encodings exchanged.
    Mistake(
        "xlnet-heads4",
        "segments_swapped",
        _reversed_rows(
            lambda m: [b.segment_encoding for b in m.transformer_layers]
        ),
    ),
    Mistake(
        "xlnet-heads4",
        "padded_queries_see_real_keys_only",
        _xlnet_padded_queries_see_real_keys_only,
    ),
    Mistake(
        "xlnet-heads4",
        "positional_bias_ignored",
        _zeroed(
            lambda m: [
                b.positional_attention_bias for b in m.transformer_layers
            ]
        ),
    ),
]


# === Decoders ===
#
# Decoders compare real tokens (a padded query attends to no key). Inputs
# are 3 rows of 12 tokens, row 0 left-padded by 3, unless a row says
# otherwise: windows shorter than 12 cut the later tokens' view.


def _heads(num_query_heads, num_key_value_heads):
    return dict(
        num_query_heads=num_query_heads, num_key_value_heads=num_key_value_heads
    )


def _tokens(length):
    """`inputs`: 3 rows of `length` tokens, row 0 left-padded by 3."""
    return lambda config: random_inputs(
        config["vocabulary_size"], batch=3, length=length
    )


def _both_paddings(config):
    """Row 0 left-padded, row 1 right-padded (keras-hub's Falcon counts
    ALiBi positions over real tokens only: a constant per query)."""
    inputs = random_inputs(config["vocabulary_size"], batch=3)
    inputs["padding_mask"][1, -4:] = 0
    inputs["token_ids"][1, -4:] = 0
    return inputs


def _in_blocks(attribute, value):
    """An `inject`: sets `attribute` (dotted) of every block to `value`."""
    *parents, name = attribute.split(".")

    def inject(model):
        for block in model.transformer_layers:
            for parent in parents:
                block = getattr(block, parent)
            setattr(block, name, value)

    return inject


def _gelu(approximate):
    return _in_blocks(
        "_activation",
        lambda x: keras.activations.gelu(x, approximate=approximate),
    )


def _explicit_attention(module):
    """An `oracle_fix`: keras-hub's attention in `module` takes its explicit
    path. Its fused path (`ops.dot_product_attention`, taken on JAX) drops
    Qwen's sliding window, and averages the values of a query that sees no
    key where the explicit one gives zeros (GPT-NeoX)."""

    def fix(oracle):
        import importlib

        hub = importlib.import_module(f"keras_hub.src.models.{module}")
        fused = hub.fused_attention_op_available
        for layer in oracle._flatten_layers():
            if type(layer).__module__ != hub.__name__:
                continue

            def explicit(*args, compute=layer._compute_attention, **kwargs):
                hub.fused_attention_op_available = lambda: False
                try:
                    return compute(*args, **kwargs)
                finally:
                    hub.fused_attention_op_available = fused

            object.__setattr__(layer, "_compute_attention", explicit)

    return fix


def _gemma_query_scale(oracle):
    """keras-hub's Gemma blocks build their attention with
    `query_head_dim_normalize=True` whatever the backbone's argument (the
    27B checkpoints need False: queries scaled by (hidden / heads) ** -0.5,
    not head_dim ** -0.5). The flag is read at call time, so set it as the
    config asks; ours honours the argument."""
    for block in oracle.transformer_layers:
        block.attention.query_head_dim_normalize = (
            oracle.query_head_dim_normalize
        )


def _falcon_block_epsilon(oracle):
    """keras-hub's Falcon gives `layer_norm_epsilon` to its final norm only;
    its blocks keep 1e-5. Ours uses it everywhere."""
    for block in oracle.transformer_layers:
        block.input_layernorm.epsilon = oracle.layer_norm_epsilon
        block.post_attention_layernorm.epsilon = oracle.layer_norm_epsilon


def _reversed_alibi_slopes(model, monkeypatch):
    from keras_nlp.layers import cached_attention

    slopes = cached_attention.alibi_slopes
    monkeypatch.setattr(
        cached_attention, "alibi_slopes", lambda heads: slopes(heads)[::-1]
    )


def _shifted_positions(model):
    """OPT checkpoints' two-row offset: rows 2.. of the table for 0.."""
    for variable in model.weights:
        if variable.path.endswith("position_embedding/embeddings"):
            values = keras.ops.convert_to_numpy(variable)
            variable.assign(np.roll(values, -2, axis=0))


def _swapped_key_value(model):
    """GPT-NeoX's fused projection split as query, value, key."""
    for variable in model.weights:
        if "query_key_value" in variable.path:
            values = keras.ops.convert_to_numpy(variable)
            query, key, value = np.split(values, 3, axis=-1)
            variable.assign(np.concatenate([query, value, key], axis=-1))


def _swapped_gate_and_up(model):
    experts = model.transformer_layers[0].feedforward.experts
    gate = keras.ops.convert_to_numpy(experts.gate)
    experts.gate.assign(keras.ops.convert_to_numpy(experts.intermediate))
    experts.intermediate.assign(gate)


def _swapped_rope_wavelengths(model):
    """Gemma 3's local blocks with the global wavelength and back."""
    for block in model.transformer_layers:
        rope = block.attention.rotary_embedding
        rope.max_wavelength = 1e6 if rope.max_wavelength == 1e4 else 1e4


def _causal_everywhere(model):
    """Every block causal: Gemma 3's images and PaliGemma's prompt too."""
    for block in model.transformer_layers:

        def causal(inputs, attention_mask=None, call=block.call, **kwargs):
            length = keras.ops.shape(inputs)[1]
            lower = keras.ops.tril(keras.ops.ones((length, length), "bool"))
            mask = keras.ops.logical_and(attention_mask, lower[None])
            return call(inputs, attention_mask=mask, **kwargs)

        block.call = causal


def _reversed_image_tokens(model):
    """Each image's soft tokens written in reverse order."""
    layer = model.get_layer("interleave_embeddings")

    def reversed_call(image_tokens, text_embeddings, vision_indices):
        return call(image_tokens[:, ::-1], text_embeddings, vision_indices)

    call = layer.call
    layer.call = reversed_call


def _transposed_patches(model):
    """PaliGemma's patch positions read column-major, not row-major."""
    encoder = model.vit_encoder.get_layer("image_encoder")
    table = encoder.embeddings.position_embedding.embeddings
    side = int(table.shape[0] ** 0.5)
    values = keras.ops.convert_to_numpy(table).reshape(side, side, -1)
    table.assign(values.transpose(1, 0, 2).reshape(table.shape))


def _bidirectional_response(model):
    """PaliGemma's response attends both ways, like the prompt."""
    for name in ("global_mask", "local_mask"):
        try:
            layer = model.get_layer(name)
        except ValueError:
            continue

        def prefix_only(padding_mask, response_mask, call=layer.call):
            return call(padding_mask, keras.ops.zeros_like(response_mask))

        layer.call = prefix_only


def _rows(prefix, backbone, base, variants, live, logits=(), **common):
    """One row per `(name, config options[, row options])` of `variants`,
    `{prefix}-{name}`, with `base` and `common` row arguments; the row
    named `live` is the family's live one, those named in `logits` also
    store the logits (the reversed embedding: tied or not, soft-capped)."""
    rows = []
    for name, options, *more in variants:
        arguments = dict(common, **(more[0] if more else {}))
        if name in logits:
            arguments["extras"] = ("logits",)
        rows.append(
            OracleCase(
                id=f"{prefix}-{name}",
                backbone=backbone,
                config=dict(base, **options),
                live=name == live,
                **arguments,
            )
        )
    return rows


# Gemma 3 with its vision encoder: 16x16 images, 4x4 patches pooled 2x2, so
# 4 soft tokens per image; a window of 3, shorter than an image, so the
# bidirectional image mask meets the sliding window; 4:2 heads.
GEMMA3_VISION = dict(
    image_size=16,
    patch_size=4,
    num_heads=4,
    hidden_dim=16,
    num_layers=2,
    intermediate_dim=24,
    output_dim=32,
    pool_size=2,
)
GEMMA3_VISION_CONFIG = dict(
    vocabulary_size=64,
    image_size=16,
    num_layers=6,
    num_query_heads=4,
    num_key_value_heads=2,
    hidden_dim=32,
    intermediate_dim=64,
    head_dim=8,
    use_sliding_window_attention=True,
    sliding_window_size=3,
    use_post_ffw_norm=True,
    use_post_attention_norm=True,
)
# Where each row's images start: two apart, one (and an empty slot), two
# adjacent ones.
_IMAGE_STARTS = [(2, 7), (3,), (1, 5)]
_TOKENS_PER_IMAGE = 4


def gemma3_vision_inputs(config=None, length=14, seed=0):
    """Token ids (row 0 right-padded), two image slots per row, and where
    each image's soft tokens go."""
    rng = np.random.default_rng(seed)
    batch = len(_IMAGE_STARTS)
    token_ids = rng.integers(1, 64, (batch, length)).astype("int32")
    padding_mask = np.ones((batch, length), "int32")
    padding_mask[0, length - 3 :] = 0
    vision_mask = np.zeros((batch, length), "int32")
    vision_indices = np.zeros((batch, 2 * _TOKENS_PER_IMAGE), "int32")
    for row, starts in enumerate(_IMAGE_STARTS):
        positions = [s + i for s in starts for i in range(_TOKENS_PER_IMAGE)]
        vision_indices[row, : len(positions)] = positions
        vision_mask[row, positions] = 1
    return {
        "token_ids": token_ids,
        "padding_mask": padding_mask,
        "images": rng.uniform(-1, 1, (batch, 2, 16, 16, 3)).astype("float32"),
        "vision_indices": vision_indices,
        "vision_mask": vision_mask,
    }


def _gemma3_vision_oracle_config():
    from keras_hub.src.models.gemma3.gemma3_vision_encoder import (
        Gemma3VisionEncoder,
    )

    return dict(
        GEMMA3_VISION_CONFIG,
        vision_encoder=Gemma3VisionEncoder(**GEMMA3_VISION),
    )


def _pali_gemma_inputs(config):
    """Images, a prompt and a response (the second half), row 0 padded on
    the right: every query sees the image tokens, so all are compared."""
    from tests.models.tiny_configs import TINY_CONFIGS

    return TINY_CONFIGS["PaliGemmaBackbone"].make_inputs(config, batch=3)


def _no_local_window(model):
    """PaliGemma 2's local blocks attend globally."""
    model.get_layer("local_mask").sliding_window_size = None


_LLAMA = dict(
    vocabulary_size=100, num_layers=2, hidden_dim=64, intermediate_dim=96
)
_LLAMA3_1 = dict(
    rope_max_wavelength=500000,
    rope_frequency_adjustment_factor=32.0,
    rope_low_freq_factor=1.0,
    rope_high_freq_factor=4.0,
    # Small, so every band of the scaling is used by 8-dim heads.
    rope_pretraining_sequence_length=16,
    tie_word_embeddings=True,
)
_BLOOM_FALCON = dict(
    vocabulary_size=97, num_layers=2, hidden_dim=48, intermediate_dim=96
)


def _gpt2_opt(
    vocabulary_size, num_heads, hidden, intermediate, dropout, length
):
    return dict(
        vocabulary_size=vocabulary_size,
        num_layers=2,
        num_heads=num_heads,
        hidden_dim=hidden,
        intermediate_dim=intermediate,
        dropout=dropout,
        max_sequence_length=length,
    )


# keras-hub's GPT-2 and OPT attention takes its fused path with dropout 0
# and its own softmax otherwise: both are stored. GPT-2's odd vocabulary,
# OPT's multiple of 32; each family's own row has its presets' heads (GPT-2
# XL's odd 25 as 5, OPT-125m's 12).
_GPT2_OPT = [
    ("heads1", (1, 32, 64, 0.0, 16)),
    ("heads4_dropout", (4, 32, 48, 0.1, 16)),
    ("heads8_dropout", (8, 64, 128, 0.2, 12)),
]
_NEO_X = dict(
    vocabulary_size=97,
    num_layers=2,
    hidden_dim=64,
    intermediate_dim=96,
    max_sequence_length=32,
)
_GPT_OSS = dict(
    vocabulary_size=97, num_layers=2, hidden_dim=32, intermediate_dim=16
)
# The experts' weights at 3x unit scale: some gate and up values pass the
# clamp at 7 (the `no_clamp` mistake shows it).
_GPT_OSS_SCALES = tuple(
    (f"transformer_layer_{i}/sparse_moe_block/experts/", 3 * 32**-0.5)
    for i in range(2)
)
_MISTRAL = dict(
    vocabulary_size=97, num_layers=2, hidden_dim=32, intermediate_dim=48
)
_MIXTRAL = dict(
    vocabulary_size=97, num_layers=2, hidden_dim=32, intermediate_dim=24
)


def _phi3(num_query_heads, num_key_value_heads, **options):
    return dict(
        vocabulary_size=100,
        num_layers=2,
        hidden_dim=64,
        intermediate_dim=96,
        **_heads(num_query_heads, num_key_value_heads),
        **options,
    )


def _su(num_query_heads, max_sequence_length=64):
    """Su-scaled RoPE: 64 / heads / 2 frequency pairs, and a pretraining
    length of 10, below the 20-token inputs (long factors), above the
    6-token ones and equal to the 10-token ones (short factors)."""
    pairs = 64 // num_query_heads // 2
    return dict(
        max_sequence_length=max_sequence_length,
        pretraining_sequence_length=10,
        rope_scaling_type="su",
        rope_scaling_short_factor=[1.0 + 0.25 * k for k in range(pairs)],
        rope_scaling_long_factor=[1.0 + 3.0 * k for k in range(pairs)],
    )


def _qwen(num_query_heads, num_key_value_heads, hidden_dim, **options):
    return dict(
        vocabulary_size=100,
        num_layers=2,
        hidden_dim=hidden_dim,
        intermediate_dim=96,
        **_heads(num_query_heads, num_key_value_heads),
        **options,
    )


_QWEN_ROPE = dict(
    rope_max_wavelength=1000000,
    rope_scaling_factor=2.0,
    layer_norm_epsilon=1e-5,
)
_QWEN_MOE = dict(
    vocabulary_size=97,
    num_layers=2,
    hidden_dim=32,
    intermediate_dim=40,
    moe_intermediate_dim=12,
    router_aux_loss_coefficient=0.05,
)


# Gemma 4 oracle configs: the shared builder at these sizes.
_gemma4 = functools.partial(
    gemma4_config, vocabulary_size=64, hidden_dim=32, intermediate_dim=48
)


def _with_position_ids(inputs):
    """keras-hub's Gemma 4 inputs: ours and `position_ids`, each token's
    index (what our RoPE reads)."""
    batch, length = inputs["token_ids"].shape
    positions = np.broadcast_to(
        np.arange(length, dtype="int32"), (batch, length)
    )
    return dict(inputs, position_ids=np.array(positions))


def _strided_position_ids(config):
    """`_tokens(14)` with keras-hub's `position_ids` given to both: row b
    at positions `(b + 1) * index`, so RoPE must read them (a constant
    shift of a row would leave its outputs as they are)."""
    inputs = _tokens(14)(config)
    batch, length = inputs["token_ids"].shape
    strides = np.arange(1, batch + 1, dtype="int32")[:, None]
    positions = strides * np.arange(length, dtype="int32")[None, :]
    return dict(inputs, position_ids=positions)


def _ignore_position_ids(model, monkeypatch):
    call = type(model).call

    def without_positions(self, inputs, *args, **kwargs):
        inputs = {k: v for k, v in inputs.items() if k != "position_ids"}
        return call(self, inputs, *args, **kwargs)

    monkeypatch.setattr(type(model), "call", without_positions)


# Qwen 3.5 oracle configs: the shared builder at these sizes, three
# blocks (linear, full, linear).
_qwen3_5 = functools.partial(
    qwen3_5_config,
    vocabulary_size=64,
    hidden_dim=32,
    intermediate_dim=48,
    num_layers=3,
    layer_types=["linear_attention", "full_attention", "linear_attention"],
)


def _qwen3_5_moe():
    """The MoE's: Qwen 3.5's with experts for the dense feed-forward."""
    config = _qwen3_5(**QWEN3_5_MOE_OPTIONS)
    del config["intermediate_dim"]
    return config


def _qwen3_5_inputs(config):
    """14 tokens (more than the window of 5), row 0 left-padded, row 1
    right-padded: padding on either side leaves the real tokens alone."""
    inputs = random_inputs(config["vocabulary_size"], batch=3, length=14)
    inputs["padding_mask"][1, -4:] = 0
    inputs["token_ids"][1, -4:] = 0
    return inputs


# SmolLM3 oracle configs: the shared builder at these sizes.
_smollm3 = functools.partial(
    smollm3_config, vocabulary_size=100, hidden_dim=32, intermediate_dim=48
)


def _smollm3_weights_as_ours(oracle):
    """keras-hub's SmolLM3 given our weights: its query, key and value
    kernels (and biases) are ours with the heads flattened; its output
    projections are created outside their blocks' name scopes (every
    block's path is `o_proj/kernel`), so each is drawn by our path; its
    RoPE frequencies (`rotary_emb/inv_freq`, a variable that
    `assign_unit_scale` overwrote) are set back to RoPE's."""
    for index, block in enumerate(oracle.transformer_layers):
        attention = block.self_attn
        head_dim = attention.head_dim
        prefix = f"transformer_layer_{index}/self_attn/"
        for name, count in (
            ("q_proj", attention.num_attention_heads),
            ("k_proj", attention.num_key_value_heads),
            ("v_proj", attention.num_key_value_heads),
        ):
            dense = getattr(attention, name)
            shapes = {"kernel": (dense.kernel.shape[0], count, head_dim)}
            if dense.bias is not None:
                shapes["bias"] = (count, head_dim)
            for weight, shape in shapes.items():
                value = unit_scale_value(f"{prefix}{name}/{weight}", shape)
                variable = getattr(dense, weight)
                variable.assign(value.reshape(variable.shape))
        output = attention.o_proj.kernel
        output.assign(
            unit_scale_value(f"{prefix}o_proj/kernel", tuple(output.shape))
        )
        rope = attention.rotary_embedding
        exponents = np.arange(0, head_dim, 2, dtype="float32") / head_dim
        rope.inv_freq.assign(1.0 / rope.rope_theta**exponents)


_GEMMA = dict(
    vocabulary_size=64,
    num_layers=2,
    hidden_dim=32,
    head_dim=8,
    intermediate_dim=96,
)
_GEMMA_2 = dict(
    use_post_ffw_norm=True,
    use_post_attention_norm=True,
    # Small caps, so tanh is far from linear on these tiny models.
    attention_logit_soft_cap=1.0,
    final_logit_soft_cap=0.5,
    use_sliding_window_attention=True,
    sliding_window_size=3,
    query_head_dim_normalize=False,
)
# 7 layers: with sliding windows on, blocks 0-4 and 6 are local and block 5
# global, so both kinds (and both RoPE wavelengths) run.
_GEMMA3 = dict(
    vocabulary_size=64,
    image_size=None,
    num_layers=7,
    hidden_dim=32,
    intermediate_dim=48,
    head_dim=8,
)
_GEMMA3_NORMS = dict(
    use_query_key_norm=True,
    use_post_ffw_norm=True,
    use_post_attention_norm=True,
)
_PALI_GEMMA = dict(
    image_size=16,
    vit_patch_size=4,
    vit_hidden_dim=32,
    vit_num_layers=2,
    vit_intermediate_dim=48,
    vocabulary_size=96,
    hidden_dim=64,
    intermediate_dim=128,
)

DECODER_CASES = [
    *_rows(
        "llama",
        "LlamaBackbone",
        _LLAMA,
        [
            ("gqa_8_2", _heads(8, 2)),
            ("mqa_8_1", _heads(8, 1)),
            ("mha_4_4", _heads(4, 4)),
        ],
        live="gqa_8_2",
    ),
    *_rows(
        "llama3",
        "Llama3Backbone",
        _LLAMA,
        [
            ("gqa_8_2-llama3_1_tied", dict(_heads(8, 2), **_LLAMA3_1)),
            ("mqa_8_1-llama3_1_tied", dict(_heads(8, 1), **_LLAMA3_1)),
            # keras-hub 0.32 ignores `rope_position_scaling_factor` in
            # Llama's RoPE; ours divides positions by it as documented, so
            # it stays 1 here (tests/layers covers the scaling).
            (
                "mha_4_4-untied",
                dict(
                    _heads(4, 4),
                    rope_max_wavelength=500000,
                    layer_norm_epsilon=1e-5,
                ),
            ),
        ],
        live="mha_4_4-untied",
        logits=("gqa_8_2-llama3_1_tied", "mha_4_4-untied"),
    ),
    # 1, 2, 4 and 8 heads take ALiBi's power-of-two slopes; 3 and 6 heads
    # the interleaved ones. The tied embedding gives the logits.
    *_rows(
        "bloom",
        "BloomBackbone",
        _BLOOM_FALCON,
        [(f"heads{n}", dict(num_heads=n)) for n in (1, 2, 3, 4, 8)]
        + [
            (
                "heads6_options",
                dict(num_heads=6, dropout=0.1, layer_norm_epsilon=1e-3),
            )
        ],
        live="heads1",
        logits=("heads6_options",),
    ),
    *_rows(
        "falcon",
        "FalconBackbone",
        _BLOOM_FALCON,
        [(f"heads{n}", dict(num_attention_heads=n)) for n in (1, 2, 3, 8)]
        + [
            (
                "heads6_dropout_both_paddings",
                dict(
                    num_attention_heads=6,
                    attention_dropout_rate=0.1,
                    feedforward_dropout_rate=0.2,
                ),
                dict(inputs=_both_paddings),
            ),
            (
                "heads4_epsilon_0.5",
                dict(num_attention_heads=4, layer_norm_epsilon=0.5),
                dict(oracle_fix=_falcon_block_epsilon),
            ),
        ],
        live="heads1",
        logits=("heads4_epsilon_0.5",),
    ),
    *_rows(
        "gpt2",
        "GPT2Backbone",
        {},
        [
            (name, _gpt2_opt(97, *shape))
            for name, shape in _GPT2_OPT + [("heads5", (5, 40, 96, 0.1, 32))]
        ],
        live="heads1",
        logits=("heads4_dropout",),
    ),
    *_rows(
        "opt",
        "OPTBackbone",
        {},
        [
            (name, _gpt2_opt(96, *shape))
            for name, shape in _GPT2_OPT + [("heads12", (12, 48, 96, 0.1, 32))]
        ],
        live="heads1",
        logits=("heads4_dropout",),
    ),
    # head_dim is 64 / heads; every config rotates an even number of
    # features. keras-hub's attention takes its fused path where Keras has
    # one (JAX) and dropout is 0, its explicit one otherwise: stored both.
    *_rows(
        "gpt_neo_x",
        "GPTNeoXBackbone",
        _NEO_X,
        [
            # The fused path averages the values of a query that sees no
            # key, as ours does: every position compares.
            (
                "heads4_rot0.25",
                dict(num_heads=4, rotary_percentage=0.25),
                dict(positions="all"),
            ),
            ("heads1_rot1.0", dict(num_heads=1, rotary_percentage=1.0)),
            ("heads4_rot0.5", dict(num_heads=4, rotary_percentage=0.5)),
            ("heads8_rot0.25", dict(num_heads=8, rotary_percentage=0.25)),
            (
                "heads8_rot1.0-explicit",
                dict(num_heads=8, rotary_percentage=1.0),
                dict(
                    oracle_fix=_explicit_attention(
                        "gpt_neo_x.gpt_neo_x_attention"
                    )
                ),
            ),
            # Dropout > 0: keras-hub's explicit path; off at inference.
            (
                "heads2_rot0.25-dropout",
                dict(num_heads=2, rotary_percentage=0.25, dropout=0.1),
            ),
            (
                "heads4_options",
                dict(
                    num_heads=4,
                    rotary_percentage=0.25,
                    rotary_max_wavelength=100,
                    layer_norm_epsilon=1e-3,
                ),
            ),
        ],
        live="heads1_rot1.0",
    ),
    # Block 0 attends to the whole prefix, block 1 through the window.
    # Every position compares: with sinks a query that sees no key has a
    # defined output (its weight all goes to the sinks).
    *_rows(
        "gpt_oss",
        "GptOssBackbone",
        _GPT_OSS,
        [
            # YaRN (32x), heads * head_dim (64) wider than hidden, window 3.
            (
                "e4_top2_gqa_4_2_yarn_window_3",
                dict(
                    _heads(4, 2),
                    head_dim=16,
                    num_experts=4,
                    top_k=2,
                    sliding_window=3,
                    rope_max_wavelength=150000,
                    rope_scaling_factor=32.0,
                    layer_norm_epsilon=1e-5,
                ),
            ),
            # Multi-query, one expert per token, plain RoPE, no window.
            (
                "e3_top1_mqa_4_1_no_window",
                dict(_heads(4, 1), num_experts=3, top_k=1, sliding_window=None),
            ),
        ],
        live="e3_top1_mqa_4_1_no_window",
        positions="all",
        scales=_GPT_OSS_SCALES,
    ),
    # keras-hub 0.32 applies `rope_scaling_factor` in Mistral's RoPE.
    *_rows(
        "mistral",
        "MistralBackbone",
        _MISTRAL,
        [
            ("gqa_4_2_window_5", dict(_heads(4, 2), sliding_window=5)),
            ("mqa_4_1_window_3", dict(_heads(4, 1), sliding_window=3)),
            ("mha_4_4_window_1", dict(_heads(4, 4), sliding_window=1)),
            # As long as the inputs: no token's view is cut.
            ("gqa_8_2_window_12", dict(_heads(8, 2), sliding_window=12)),
            (
                "gqa_4_2_head_dim_16_no_window",
                dict(_heads(4, 2), sliding_window=None, head_dim=16),
            ),
            (
                "gqa_4_2_rope_options",
                dict(
                    _heads(4, 2),
                    sliding_window=6,
                    rope_max_wavelength=100,
                    rope_scaling_factor=4.0,
                    layer_norm_epsilon=1e-3,
                    dropout=0.1,
                ),
            ),
        ],
        live="gqa_4_2_window_5",
    ),
    # The load-balancing losses (no dropout or jitter: training differs
    # from inference by them only), one per block, padding excluded.
    *_rows(
        "mixtral",
        "MixtralBackbone",
        _MIXTRAL,
        [
            (
                "e4_top2_gqa_4_2_window_5",
                dict(
                    _heads(4, 2),
                    num_experts=4,
                    top_k=2,
                    sliding_window=5,
                    router_aux_loss_coef=0.05,
                ),
                dict(extras=("aux_losses",)),
            ),
            (
                "e3_top1_mqa_4_1_window_3",
                dict(
                    _heads(4, 1),
                    num_experts=3,
                    top_k=1,
                    sliding_window=3,
                    router_aux_loss_coef=0.05,
                ),
                dict(extras=("aux_losses",)),
            ),
            (
                "e8_top2_mha_4_4_no_window",
                dict(_heads(4, 4), num_experts=8, top_k=2, sliding_window=None),
            ),
            # Every expert kept: renormalizing gives back the full softmax.
            (
                "e4_top4_gqa_8_2",
                dict(_heads(8, 2), num_experts=4, top_k=4, sliding_window=6),
            ),
            (
                "e4_top2_options",
                dict(
                    _heads(4, 2),
                    num_experts=4,
                    top_k=2,
                    sliding_window=4,
                    rope_max_wavelength=100,
                    rope_scaling_factor=2.0,
                    layer_norm_epsilon=1e-3,
                    router_aux_loss_coef=0.1,
                    router_jitter_noise=0.1,
                    dropout=0.1,
                ),
            ),
        ],
        live="e3_top1_mqa_4_1_window_3",
        # keras-hub's MoE blocks take Keras auto names.
        auto_named=("mixtral_sparse_moe_block",),
    ),
    # Plain RoPE on every head layout; su-scaled RoPE at, below and above
    # its pretraining length, which picks the short or long factors (in a
    # compiled call too: the forward is jitted).
    *_rows(
        "phi3",
        "Phi3Backbone",
        {},
        [
            ("mha_4_4", _phi3(4, 4)),
            ("gqa_8_2", _phi3(8, 2)),
            (
                "mqa_8_1-options",
                _phi3(
                    8,
                    1,
                    layer_norm_epsilon=1e-5,
                    rope_max_wavelength=500,
                    dropout=0.1,
                ),
            ),
            *[
                (
                    f"gqa_8_2-su-len{n}",
                    _phi3(8, 2, **_su(8)),
                    dict(inputs=_tokens(n)),
                )
                for n in (6, 10, 20)
            ],
            # max_sequence_length <= the pretraining length: amplitude 1.
            *[
                (
                    f"mha_4_4-su_amplitude_1-len{n}",
                    _phi3(4, 4, **_su(4, max_sequence_length=10)),
                    dict(inputs=_tokens(n)),
                )
                for n in (6, 20)
            ],
            # "longrope" is the same as keras-hub's "su".
            (
                "gqa_8_2-longrope-len20",
                _phi3(8, 2, **dict(_su(8), rope_scaling_type="longrope")),
                dict(inputs=_tokens(20), oracle_config=_phi3(8, 2, **_su(8))),
            ),
        ],
        live="mha_4_4",
    ),
    # keras-hub's Qwen attention drops the sliding window on its fused path
    # (JAX): window rows pin its explicit path. qwen2.5_0.5b's 7 query heads
    # per key/value head; tied and untied logits.
    *_rows(
        "qwen",
        "QwenBackbone",
        {},
        [
            ("gqa_6_2", _qwen(6, 2, 48)),
            ("gqa_14_2-untied", _qwen(14, 2, 56, tie_word_embeddings=False)),
            ("mqa_4_1-rope_scaled", _qwen(4, 1, 48, **_QWEN_ROPE)),
            ("mha_4_4", _qwen(4, 4, 48)),
            *[
                (
                    f"{name}-window_{window}{'-untied' * (not tied)}",
                    _qwen(
                        *heads,
                        use_sliding_window_attention=True,
                        sliding_window_size=window,
                        tie_word_embeddings=tied,
                    ),
                    dict(oracle_fix=_explicit_attention("qwen.qwen_attention")),
                )
                for name, heads, window, tied in [
                    ("gqa_14_2", (14, 2, 56), 5, False),
                    ("mqa_4_1", (4, 1, 48), 5, True),
                    ("mha_4_4", (4, 4, 48), 1, True),
                    # Wider than the inputs: no effect.
                    ("gqa_6_2", (6, 2, 48), 32768, False),
                ]
            ],
        ],
        live="gqa_6_2",
        logits=("gqa_6_2", "gqa_14_2-untied"),
    ),
    # As Qwen's; qwen3_0.6b's 2 query heads per key/value head, and
    # head_dim * heads (128) twice hidden_dim. The default window (32768)
    # is wider than the inputs; `None` turns it off.
    *_rows(
        "qwen3",
        "Qwen3Backbone",
        {},
        [
            ("gqa_8_4", _qwen(8, 4, 64, head_dim=16)),
            (
                "mqa_4_1-no_window",
                _qwen(4, 1, 48, head_dim=16, sliding_window_size=None),
            ),
            ("mha_4_4-rope_scaled", _qwen(4, 4, 32, head_dim=8, **_QWEN_ROPE)),
            ("gqa_6_2-head_dim_none", _qwen(6, 2, 48, head_dim=None)),
            *[
                (
                    f"{name}-window_{window}{'-untied' * (not tied)}",
                    _qwen(
                        *heads,
                        head_dim=head_dim,
                        sliding_window_size=window,
                        tie_word_embeddings=tied,
                    ),
                    dict(
                        oracle_fix=_explicit_attention("qwen3.qwen3_attention")
                    ),
                )
                for name, heads, head_dim, window, tied in [
                    ("gqa_8_4", (8, 4, 64), 16, 5, True),
                    ("gqa_6_2", (6, 2, 48), 8, 5, False),
                    ("mqa_4_1", (4, 1, 48), 16, 1, True),
                    ("gqa_8_4", (8, 4, 64), 16, 32768, False),
                ]
            ],
        ],
        live="gqa_8_4",
        logits=("gqa_8_4", "gqa_6_2-window_5-untied"),
    ),
    # keras-hub's Qwen 3 MoE attention on its explicit path (see Qwen 3).
    *_rows(
        "qwen3_moe",
        "Qwen3MoeBackbone",
        _QWEN_MOE,
        [
            # Probabilities kept as routed (keras-hub's default);
            # head_dim * heads (64) twice hidden_dim.
            (
                "e4_top2_gqa_4_2",
                dict(_heads(4, 2), head_dim=16, num_experts=4, top_k=2),
            ),
            # Renormalized routing (the presets'), head_dim from hidden_dim,
            # a window shorter than the 12 tokens, tied embeddings, and a
            # norm epsilon that the query/key norms must not take.
            (
                "e6_top3_gqa_8_2_normalized_window_4",
                dict(
                    _heads(8, 2),
                    num_experts=6,
                    top_k=3,
                    norm_top_k_prob=True,
                    sliding_window_size=4,
                    tie_word_embeddings=True,
                    rope_max_wavelength=100,
                    rope_scaling_factor=2.0,
                    layer_norm_epsilon=1e-3,
                ),
            ),
            # Block 0 dense, block 1 sparse.
            (
                "dense_then_sparse",
                dict(
                    _heads(4, 1),
                    head_dim=8,
                    num_experts=4,
                    top_k=2,
                    norm_top_k_prob=True,
                    decoder_sparse_step=2,
                    sliding_window_size=None,
                ),
            ),
        ],
        live="dense_then_sparse",
        extras=("aux_losses",),
        oracle_fix=_explicit_attention("qwen3_moe.qwen3_moe_attention"),
        auto_named=("qwen3_sparse_moe_block", "qwen3_moe_mlp"),
    ),
    # keras-hub builds every Qwen MoE block as if it were block 0 (it never
    # passes the index), so `mlp_only_layers=[0]` makes all its blocks
    # dense; ours follow each block's index, as Hugging Face's does. The
    # dense-block row therefore has one block.
    *_rows(
        "qwen_moe",
        "QwenMoeBackbone",
        dict(_QWEN_MOE, shared_expert_intermediate_dim=24),
        [
            (
                "e4_top2_gqa_4_2",
                dict(_heads(4, 2), num_experts=4, top_k=2),
            ),
            (
                "e6_top3_mha_4_4_normalized_window_4",
                dict(
                    _heads(4, 4),
                    num_experts=6,
                    top_k=3,
                    norm_top_k_prob=True,
                    use_sliding_window_attention=True,
                    sliding_window_size=4,
                    tie_word_embeddings=True,
                    rope_max_wavelength=100,
                    rope_scaling_factor=2.0,
                    layer_norm_epsilon=1e-3,
                ),
            ),
            (
                "dense_block",
                dict(
                    _heads(8, 1),
                    num_layers=1,
                    num_experts=4,
                    top_k=2,
                    mlp_only_layers=[0],
                ),
            ),
        ],
        live="dense_block",
        extras=("aux_losses",),
        auto_named=("qwen_sparse_moe_block", "qwen_moe_mlp"),
    ),
    # Gemma 1 and Gemma 2 (post-norms, soft caps, a window of 3, queries
    # scaled by hidden / heads); the logits are soft-capped.
    *_rows(
        "gemma",
        "GemmaBackbone",
        _GEMMA,
        [
            ("mqa_8_1", _heads(8, 1)),
            ("mha_4_4", _heads(4, 4)),
            ("gemma2-gqa_8_4", dict(_heads(8, 4), **_GEMMA_2)),
            ("gemma2-mqa_8_1", dict(_heads(8, 1), **_GEMMA_2)),
        ],
        live="mqa_8_1",
        logits=("mqa_8_1", "gemma2-gqa_8_4", "gemma2-mqa_8_1"),
        oracle_fix=_gemma_query_scale,
    ),
    *_rows(
        "gemma3",
        "Gemma3Backbone",
        _GEMMA3,
        [
            # gemma3_270m / 1b-like: multi-query, q/k norms, post-norms, a
            # small window and RoPE scaling on both kinds of layer.
            (
                "mqa_4_1_qk_norm_window",
                dict(
                    _heads(4, 1),
                    **_GEMMA3_NORMS,
                    use_sliding_window_attention=True,
                    sliding_window_size=3,
                    local_rope_scaling_factor=2.0,
                    global_rope_scaling_factor=8.0,
                ),
            ),
            # gemma3_27b-like: grouped, queries scaled by hidden / heads
            # (4) rather than head_dim (8), small soft caps.
            (
                "gqa_8_4_qk_norm_caps",
                dict(
                    _heads(8, 4),
                    **_GEMMA3_NORMS,
                    query_head_dim_normalize=False,
                    attention_logit_soft_cap=1.0,
                    final_logit_soft_cap=0.5,
                    use_sliding_window_attention=True,
                    sliding_window_size=2,
                    global_rope_scaling_factor=4.0,
                ),
            ),
            # Every layer global.
            (
                "mha_4_4_no_qk_norm",
                dict(_heads(4, 4), use_query_key_norm=False),
            ),
            # Windowed, bidirectional (embedding-style), with the pooling
            # head's outputs.
            (
                "gqa_4_2_bidirectional_window_embedding",
                dict(
                    _heads(4, 2),
                    use_query_key_norm=False,
                    use_post_attention_norm=True,
                    use_sliding_window_attention=True,
                    sliding_window_size=4,
                    use_bidirectional_attention=True,
                    is_embedding_model=True,
                    pooling_intermediate_dim=40,
                    embedding_dim=24,
                ),
            ),
        ],
        live="mha_4_4_no_qk_norm",
        logits=("mqa_4_1_qk_norm_window", "gqa_8_4_qk_norm_caps"),
        oracle_fix=_gemma_query_scale,
    ),
    # With its vision encoder (every position: row 0 is right-padded).
    OracleCase(
        id="gemma3-vision",
        backbone="Gemma3Backbone",
        config=dict(GEMMA3_VISION_CONFIG, vision_encoder=GEMMA3_VISION),
        oracle_config=_gemma3_vision_oracle_config,
        inputs=gemma3_vision_inputs,
        positions="all",
    ),
    # PaliGemma 1 (Gemma 1, 8:1 heads) and PaliGemma 2 (Gemma 2's options,
    # 8:4 heads, queries scaled by (64 / 8) ** -0.5 rather than 16 ** -0.5
    # as 28b's, a window shorter than the 16 patches + 12 tokens). Every
    # position: with the prefix-LM mask every query sees the image tokens.
    *_rows(
        "pali_gemma",
        "PaliGemmaBackbone",
        _PALI_GEMMA,
        [
            (
                "gemma1_8_1",
                dict(_heads(8, 1), num_layers=2, head_dim=8, vit_num_heads=4),
            ),
            (
                "gemma2_8_4_window",
                dict(
                    _heads(8, 4),
                    num_layers=3,
                    head_dim=16,
                    vit_num_heads=16,
                    query_head_dim_normalize=False,
                    use_post_ffw_norm=True,
                    use_post_attention_norm=True,
                    attention_logit_soft_cap=5.0,
                    final_logit_soft_cap=30.0,
                    use_sliding_window_attention=True,
                    sliding_window_size=6,
                ),
            ),
        ],
        live="gemma1_8_1",
        inputs=_pali_gemma_inputs,
        positions="all",
        oracle_fix=_gemma_query_scale,
    ),
    # Gemma 4: every text option (local and global blocks with their own
    # kv heads and head dims, keys as values, shared keys and values,
    # per-layer inputs, double-wide feed-forwards, partial RoPE, soft caps);
    # the mixture of experts beside the dense feed-forward; 31B's shape
    # (no sharing, no per-layer inputs) with explicit layer types, an
    # attention soft cap and other RoPE settings.
    *_rows(
        "gemma4",
        "Gemma4Backbone",
        {},
        [
            ("every_option", _gemma4()),
            ("moe_e4_top2", _gemma4(**GEMMA4_MOE_OPTIONS)),
            (
                "dense_layer_types_caps",
                _gemma4(
                    num_layers=3,
                    num_kv_shared_layers=0,
                    hidden_size_per_layer_input=0,
                    use_double_wide_mlp=False,
                    layer_types=[
                        "sliding_attention",
                        "full_attention",
                        "full_attention",
                    ],
                    num_query_heads=8,
                    num_global_key_value_heads=2,
                    attention_logit_soft_cap=20.0,
                    global_rope_partial_rotary_factor=0.25,
                    local_rope_wavelength=100.0,
                    global_rope_wavelength=5000.0,
                    global_rope_scaling_factor=2.0,
                    layer_norm_epsilon=1e-4,
                ),
            ),
            # keras-hub's `position_ids` other than the token indices.
            (
                "strided_positions",
                _gemma4(),
                dict(inputs=_strided_position_ids, oracle_inputs=None),
            ),
        ],
        live="every_option",
        logits=("every_option", "moe_e4_top2"),
        inputs=_tokens(14),
        oracle_inputs=_with_position_ids,
    ),
    # Qwen 3.5: linear attention blocks (4 value heads reading 2 key
    # heads, a convolution of 3) around a full attention block (4:2
    # heads, half of each head rotated, a window of 5), untied; keras-hub's
    # defaults (every fourth block full, a quarter of each head rotated,
    # convolution of 4, no window), tied; the MoE's 4 experts, 2 per token,
    # beside the shared one. keras-hub's fused attention path (taken on
    # JAX) drops the window: its explicit path is used.
    *_rows(
        "qwen3_5",
        "Qwen3_5Backbone",
        {},
        [
            ("every_option", _qwen3_5()),
            (
                "defaults_tied",
                _qwen3_5(
                    num_layers=4,
                    layer_types=None,
                    head_dim=16,
                    partial_rotary_factor=0.25,
                    rope_max_wavelength=10000,
                    sliding_window_size=None,
                    linear_num_value_heads=2,
                    linear_conv_kernel_dim=4,
                    tie_word_embeddings=True,
                    layer_norm_epsilon=1e-5,
                ),
                # Four blocks and tied logits up to ~8: float32 rounding
                # reaches 1.05e-5 on one logit.
                dict(atol=2e-5),
            ),
        ],
        live="every_option",
        logits=("every_option", "defaults_tied"),
        inputs=_qwen3_5_inputs,
        oracle_fix=_explicit_attention("qwen3_5.qwen3_5_attention"),
    ),
    *_rows(
        "qwen3_5_moe",
        "Qwen3_5MoeBackbone",
        {},
        [("e4_top2", _qwen3_5_moe())],
        live="e4_top2",
        logits=("e4_top2",),
        inputs=_qwen3_5_inputs,
        oracle_fix=_explicit_attention("qwen3_5.qwen3_5_attention"),
    ),
    # Layers without RoPE: the second of two, every fourth as in
    # smollm3_3b_en (with biases and another base), or none at all.
    *_rows(
        "smollm3",
        "SmolLM3Backbone",
        {},
        [
            ("gqa_4_2-rope_off_1", _smollm3(4, 2, (True, False))),
            (
                "gqa_16_4-rope_off_3-biases",
                _smollm3(
                    16,
                    4,
                    (True, True, True, False),
                    hidden_dim=64,
                    attention_bias=True,
                    mlp_bias=True,
                    rope_theta=500.0,
                    layer_norm_epsilon=1e-4,
                ),
            ),
            ("mqa_4_1-no_rope", _smollm3(4, 1, (False, False))),
        ],
        live="gqa_4_2-rope_off_1",
        logits=("gqa_4_2-rope_off_1",),
        inputs=_tokens(14),
        oracle_fix=_smollm3_weights_as_ours,
    ),
]
DECODER_MISTAKES = [
    # Global heads rotate only part of each head; shared blocks read the
    # keys of the last earlier block of their kind.
    Mistake(
        "gemma4-every_option",
        "full_rope_on_global_heads",
        config=dict(global_rope_partial_rotary_factor=1.0),
    ),
    Mistake(
        "gemma4-moe_e4_top2",
        "three_experts_per_token",
        config=dict(num_experts_per_token=3),
    ),
    Mistake(
        "gemma4-strided_positions",
        "position_ids_ignored",
        inject=_ignore_position_ids,
    ),
    # RoPE turns half of each full attention head; the MoE picks 2 of 4.
    Mistake(
        "qwen3_5-every_option",
        "full_rope",
        config=dict(partial_rotary_factor=1.0),
    ),
    Mistake(
        "qwen3_5_moe-e4_top2",
        "three_experts_per_token",
        config=dict(top_k=3),
    ),
    # A layer without RoPE must not rotate.
    Mistake(
        "smollm3-gqa_4_2-rope_off_1",
        "rope_in_every_layer",
        config=dict(rope_layer_enabled_list=[True, True]),
    ),
    # RoPE's wavelength is what positions the queries and keys.
    Mistake(
        "llama-gqa_8_2", "rope_wavelength", config=dict(rope_max_wavelength=100)
    ),
    Mistake(
        "llama3-gqa_8_2-llama3_1_tied",
        "no_llama3_1_scaling",
        config=dict(
            rope_frequency_adjustment_factor=None,
            rope_low_freq_factor=None,
            rope_high_freq_factor=None,
            rope_pretraining_sequence_length=None,
        ),
    ),
    Mistake("bloom-heads4", "exact_gelu", _gelu(approximate=False)),
    Mistake(
        "bloom-heads6_options",
        "no_alibi",
        _in_blocks("attention.use_alibi", False),
    ),
    Mistake(
        "bloom-heads6_options", "reversed_alibi_slopes", _reversed_alibi_slopes
    ),
    # Falcon adds ALiBi before the 1 / sqrt(head_dim) scaling.
    Mistake(
        "falcon-heads6_dropout_both_paddings",
        "unscaled_alibi",
        _in_blocks("attention.scale_alibi", False),
    ),
    Mistake("falcon-heads4_epsilon_0.5", "tanh_gelu", _gelu(approximate=True)),
    Mistake(
        "falcon-heads4_epsilon_0.5",
        "parallel_residual",
        _in_blocks("parallel_residual", True),
    ),
    # GPT-2 uses tanh GELU and OPT ReLU: exact GELU is wrong for both.
    *[
        Mistake(f"{family}-heads4_dropout", name, inject)
        for family in ("gpt2", "opt")
        for name, inject in [
            ("exact_gelu", _in_blocks("_activation", keras.activations.gelu)),
            ("shifted_positions", _shifted_positions),
        ]
    ],
    Mistake(
        "gpt_neo_x-heads4_rot0.25",
        "rotary_1.0",
        config=dict(rotary_percentage=1.0),
    ),
    Mistake(
        "gpt_neo_x-heads4_rot0.25",
        "rotary_0.5",
        config=dict(rotary_percentage=0.5),
    ),
    Mistake(
        "gpt_neo_x-heads4_options",
        "rotary_wavelength",
        config=dict(rotary_max_wavelength=10000),
    ),
    Mistake(
        "gpt_neo_x-heads1_rot1.0", "query_value_key_split", _swapped_key_value
    ),
    Mistake(
        "gpt_oss-e4_top2_gqa_4_2_yarn_window_3",
        "no_clamp",
        _in_blocks("feedforward.experts.clamp_limit", None),
    ),
    Mistake(
        "mistral-gqa_4_2_window_5", "window_4", config=dict(sliding_window=4)
    ),
    Mistake(
        "mistral-gqa_4_2_rope_options",
        "no_window",
        config=dict(sliding_window=None),
    ),
    Mistake(
        "mistral-gqa_4_2_rope_options",
        "rope_unscaled",
        config=dict(rope_scaling_factor=1.0),
    ),
    Mistake("mixtral-e4_top2_gqa_4_2_window_5", "top_1", config=dict(top_k=1)),
    Mistake(
        "mixtral-e4_top2_gqa_4_2_window_5",
        "window_4",
        config=dict(sliding_window=4),
    ),
    Mistake(
        "mixtral-e4_top2_gqa_4_2_window_5",
        "swapped_gate_and_up",
        _swapped_gate_and_up,
    ),
    # Only the factors the length uses: short below the pretraining
    # length, long above it.
    Mistake(
        "phi3-gqa_8_2-su-len6",
        "short_factors",
        config=dict(rope_scaling_short_factor=[1.0] * 4),
    ),
    Mistake(
        "phi3-gqa_8_2-su-len20",
        "long_factors",
        config=dict(rope_scaling_long_factor=[1.0] * 4),
    ),
    # The windows are exercised.
    Mistake(
        "qwen-gqa_14_2-window_5-untied",
        "no_window",
        config=dict(use_sliding_window_attention=False),
    ),
    Mistake(
        "qwen-mha_4_4-window_1",
        "no_window",
        config=dict(use_sliding_window_attention=False),
    ),
    Mistake(
        "qwen3-gqa_8_4-window_5",
        "no_window",
        config=dict(sliding_window_size=None),
    ),
    Mistake(
        "qwen3-mqa_4_1-window_1",
        "no_window",
        config=dict(sliding_window_size=None),
    ),
    Mistake(
        "qwen3_moe-e6_top3_gqa_8_2_normalized_window_4",
        "unnormalized_routing",
        config=dict(norm_top_k_prob=False),
    ),
    Mistake(
        "qwen_moe-e6_top3_mha_4_4_normalized_window_4",
        "unnormalized_routing",
        config=dict(norm_top_k_prob=False),
    ),
    # Gemma 2's caps, window and query scale are each exercised.
    *[
        Mistake("gemma-gemma2-gqa_8_4", name, config=config)
        for name, config in [
            ("no_final_cap", dict(final_logit_soft_cap=None)),
            ("no_attention_cap", dict(attention_logit_soft_cap=None)),
            ("no_window", dict(use_sliding_window_attention=False)),
            ("query_scale_head_dim", dict(query_head_dim_normalize=True)),
        ]
    ],
    # Each Gemma 3 feature changes the output.
    *[
        Mistake("gemma3-mqa_4_1_qk_norm_window", name, inject)
        for name, inject in [
            ("swapped_rope_wavelengths", _swapped_rope_wavelengths),
            (
                "no_rope_scaling",
                _in_blocks("attention.rotary_embedding.scaling_factor", 1.0),
            ),
            ("no_window", _in_blocks("attention.sliding_window_size", None)),
            ("no_qk_norm", _in_blocks("attention.use_query_key_norm", False)),
        ]
    ],
    Mistake(
        "gemma3-gqa_8_4_qk_norm_caps",
        "no_final_cap",
        config=dict(final_logit_soft_cap=None),
    ),
    Mistake("gemma3-vision", "causal_images", _causal_everywhere),
    Mistake("gemma3-vision", "reversed_image_tokens", _reversed_image_tokens),
    Mistake("pali_gemma-gemma1_8_1", "transposed_patches", _transposed_patches),
    Mistake("pali_gemma-gemma1_8_1", "causal_prompt", _causal_everywhere),
    Mistake(
        "pali_gemma-gemma1_8_1",
        "bidirectional_response",
        _bidirectional_response,
    ),
    Mistake("pali_gemma-gemma2_8_4_window", "no_window", _no_local_window),
]


CASES = {case.id: case for case in ENCODER_CASES + DECODER_CASES}
MISTAKES = ENCODER_MISTAKES + DECODER_MISTAKES
