"""Planning leaves no variables behind for Keras to initialize later."""

import keras
from keras.src.backend.common import global_state

import keras_nlp

# A config no other test plans (plans are cached per config).
CONFIG = dict(
    vocabulary_size=88,
    num_layers=1,
    num_query_heads=4,
    num_key_value_heads=1,
    hidden_dim=32,
    intermediate_dim=64,
    head_dim=8,
)


def pending_paths():
    pending = global_state.get_global_attribute("uninitialized_variables")
    return [variable.path for variable in pending or ()]


def test_planning_inside_a_stateless_scope_defers_nothing():
    # Loaders build backbones in a stateless scope, and binding the layout
    # map plans there: the abstract model's variables must not stay queued,
    # or the next scope to exit (`generate`'s, keras-hub's) would allocate
    # the whole abstract model under the active distribution.
    assert pending_paths() == []
    with keras.StatelessScope(initialize_variables=False):
        plan = keras_nlp.models.GemmaBackbone.plan_layout(
            {"batch": 1, "model": 2}, config=CONFIG
        )
    assert plan.weight("token_embedding/embeddings").shape == (88, 32)
    assert pending_paths() == []
