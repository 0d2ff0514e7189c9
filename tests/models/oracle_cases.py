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

from tests.models.backbone_checks import random_inputs


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
        oracle_config: keras-hub's arguments, if not `config`.
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
        inject: `model -> None`, applied after the weights are assigned;
            or None with `config` set.
        config: optional config overrides that make the mistake (a wrong
            window, top-k) instead of `inject`.
    """

    case: str
    name: str
    inject: object = None
    config: dict = None


# === Encoders and encoder-decoders ===

ENCODER_CASES = []
ENCODER_MISTAKES = []


# === Decoders ===

DECODER_CASES = [
    OracleCase(
        id="llama-gqa_8_2",
        backbone="LlamaBackbone",
        config=dict(
            vocabulary_size=100,
            num_layers=2,
            num_query_heads=8,
            num_key_value_heads=2,
            hidden_dim=64,
            intermediate_dim=96,
        ),
        live=True,
    ),
]
DECODER_MISTAKES = [
    # RoPE's wavelength is what positions the queries and keys.
    Mistake(
        "llama-gqa_8_2", "rope_wavelength", config=dict(rope_max_wavelength=100)
    ),
]


CASES = {case.id: case for case in ENCODER_CASES + DECODER_CASES}
MISTAKES = ENCODER_MISTAKES + DECODER_MISTAKES
