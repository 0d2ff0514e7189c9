"""Every backbone equals keras-hub's class of the same name: the oracle
table (`tests/models/oracle_cases.py`) against stored oracle outputs.

Our model gets `assign_unit_scale` weights (drawn by variable path) and
runs the stored inputs; its outputs must equal keras-hub's, stored by
`python -m tests.oracles backbones` with the same weights. Rows marked
`live` rebuild keras-hub's model and check that the stored data is still
what the installed keras-hub gives. Every `Mistake` row must make the
comparison fail: that is what makes the stored data a sharp check.
"""

import inspect
import re

import keras
import numpy as np
import pytest

import keras_nlp.models
from tests import oracles
from tests.models.backbone_checks import assert_close_to_stored
from tests.models.backbone_checks import assign_unit_scale
from tests.models.backbone_checks import jit_forward
from tests.models.oracle_cases import CASES
from tests.models.oracle_cases import MISTAKES

DATA_PREFIX = "backbone-"


def _rename(case):
    if not case.auto_named:
        return None
    pattern = re.compile(rf"({'|'.join(map(re.escape, case.auto_named))})_\d+/")
    return lambda path: pattern.sub(r"\1/", path)


def _outputs(case, model, inputs):
    """The forward outputs and the row's extras, as `{name: array}`."""
    outputs = jit_forward(model, inputs)
    if "logits" in case.extras:
        sequence = keras.ops.convert_to_tensor(outputs["sequence_output"])
        outputs["logits"] = keras.ops.convert_to_numpy(
            model.token_embedding(sequence, reverse=True)
        )
    if "aux_losses" in case.extras:
        outputs["aux_losses"] = np.array(
            [
                float(keras.ops.convert_to_numpy(x))
                for x in _losses(model, inputs)
            ],
            "float32",
        )
    return outputs


def _losses(model, inputs):
    """The losses a `training=True` call adds; on JAX compiled as one
    program (an eager call compiles op by op: several times slower)."""
    if keras.backend.backend() != "jax":
        model(inputs, training=True)
        return model.losses
    import jax

    training = jax.jit(
        lambda t, n, x: model.stateless_call(
            t, n, x, training=True, return_losses=True
        )[2]
    )
    return training(
        [v.value for v in model.trainable_variables],
        [v.value for v in model.non_trainable_variables],
        inputs,
    )


def build_ours(case, config=None):
    model = getattr(keras_nlp.models, case.backbone)(**(config or case.config))
    # Ours may number its layers as keras-hub does in a fresh session (T5's
    # `t5_layer_norm_3`): both drop the suffixes, so both draw alike.
    assign_unit_scale(model, scales=dict(case.scales), rename=_rename(case))
    return model


def build_oracle(case):
    import keras_hub

    keras.utils.set_random_seed(0)
    cls = getattr(keras_hub.models, case.oracle_class or case.backbone)
    config = case.oracle_config or case.config
    oracle = cls(**(config() if callable(config) else config))
    assign_unit_scale(oracle, scales=dict(case.scales), rename=_rename(case))
    if case.oracle_fix is not None:
        case.oracle_fix(oracle)
    return oracle


def oracle_arrays(case):
    """keras-hub's inputs and outputs for `case`, as stored."""
    inputs = case.make_inputs()
    oracle_inputs = inputs
    if case.oracle_inputs is not None:
        oracle_inputs = case.oracle_inputs(inputs)
    oracle = build_oracle(case)
    if case.oracle_rows:
        rows = [
            _outputs(case, oracle, {k: v[b : b + 1] for k, v in inputs.items()})
            for b in range(len(next(iter(inputs.values()))))
        ]
        outputs = {k: np.concatenate([r[k] for r in rows]) for k in rows[0]}
    else:
        outputs = _outputs(case, oracle, oracle_inputs)
    arrays = {f"input/{k}": np.asarray(v) for k, v in inputs.items()}
    arrays.update({f"output/{k}": v for k, v in outputs.items()})
    return arrays


def generate_oracle_data():
    return {
        DATA_PREFIX + case.id: oracle_arrays(case) for case in CASES.values()
    }


def stored(case):
    arrays = oracles.load(DATA_PREFIX + case.id)
    inputs = {k[6:]: v for k, v in arrays.items() if k.startswith("input/")}
    outputs = {k[7:]: v for k, v in arrays.items() if k.startswith("output/")}
    return inputs, outputs


def compare(case, actual, expected, inputs):
    """`actual` within the row's tolerance of the stored `expected`."""
    return assert_close_to_stored(
        actual, expected, inputs, case.atol, case.positions == "real"
    )


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_equals_the_stored_oracle(case_id):
    case = CASES[case_id]
    inputs, expected = stored(case)
    actual = _outputs(case, build_ours(case), inputs)
    compare(case, actual, expected, inputs)


LIVE = sorted(case.id for case in CASES.values() if case.live)


@pytest.mark.parametrize("case_id", LIVE)
def test_the_live_oracle_still_gives_the_stored_outputs(case_id):
    case = CASES[case_id]
    # The row's own tolerance: float32 rounding differs by CPU (see
    # `assert_oracle_unchanged`).
    oracles.assert_oracle_unchanged(
        DATA_PREFIX + case.id, oracle_arrays(case), atol=case.atol
    )


@pytest.mark.parametrize(
    "mistake", MISTAKES, ids=[f"{m.case}-{m.name}" for m in MISTAKES]
)
def test_the_comparison_catches_the_mistake(mistake, monkeypatch):
    case = CASES[mistake.case]
    inputs, expected = stored(case)
    model = build_ours(case, dict(case.config, **(mistake.config or {})))
    if mistake.inject is not None:
        if len(inspect.signature(mistake.inject).parameters) == 2:
            mistake.inject(model, monkeypatch)
        else:
            mistake.inject(model)
    actual = _outputs(case, model, inputs)
    with pytest.raises(AssertionError):
        compare(case, actual, expected, inputs)


def test_every_family_has_a_live_row():
    families = {case.backbone for case in CASES.values()}
    live = {case.backbone for case in CASES.values() if case.live}
    assert families == live, sorted(families - live)
