"""The layout rules the shared layers declare for their weights."""

import re

from keras_nlp.distribution import DATA
from keras_nlp.distribution import MODEL
from keras_nlp.distribution import normalize_rules
from keras_nlp.layers.layout_rules import attention_rules
from keras_nlp.layers.layout_rules import feedforward_rules
from keras_nlp.layers.layout_rules import token_embedding_rules


def as_dict(rules):
    return {pattern: spec for pattern, spec, _ in rules}


def test_token_embedding_rules_tied_and_untied():
    assert as_dict(token_embedding_rules("emb/", tied=True)) == {
        "emb/embeddings": [(MODEL, DATA), (DATA, MODEL), (None, (DATA, MODEL))]
    }
    untied = as_dict(token_embedding_rules("emb/", tied=False))
    assert untied["emb/reverse_embeddings"] == [
        (DATA, MODEL),
        (MODEL, DATA),
        ((DATA, MODEL), None),
    ]


def test_attention_rules_match_the_layer_paths_once():
    rules = normalize_rules(
        attention_rules(
            r"block_\d+/attention/",
            sublayer_names={"query": "query_dense", "output": "output_dense"},
            use_bias=True,
            flat_output_kernel=True,
        ),
        "Toy",
    )
    paths = {
        "block_3/attention/query_dense/kernel": ((DATA, MODEL, None), "heads"),
        "block_3/attention/key/kernel": ((DATA, MODEL, None), "kv_heads"),
        "block_3/attention/value/kernel": ((DATA, MODEL, None), "kv_heads"),
        "block_3/attention/output_dense/kernel": ((MODEL, DATA), "heads"),
        "block_3/attention/query_dense/bias": ((MODEL, None), "heads"),
        "block_3/attention/value/bias": ((MODEL, None), "kv_heads"),
    }
    for path, (spec, heads_name) in paths.items():
        (rule,) = [r for r in rules if r.matches(path)]
        assert rule.alternatives == (spec,)
        assert rule.dim_names[rule.alternatives[0].index(MODEL)] == heads_name
    assert not any(r.matches("block_3/attention/query/kernel") for r in rules)


def test_feedforward_rules_gated_and_plain():
    gated = as_dict(feedforward_rules(r"b/"))
    assert gated == {
        "b/(feedforward_intermediate_dense|feedforward_gate_dense)/kernel": (
            DATA,
            MODEL,
        ),
        "b/feedforward_output_dense/kernel": (MODEL, DATA),
    }
    plain = as_dict(
        feedforward_rules(r"b/", {"intermediate": "fc1"}, gated=False)
    )
    assert plain == {
        "b/fc1/kernel": (DATA, MODEL),
        "b/feedforward_output_dense/kernel": (MODEL, DATA),
    }
    assert re.fullmatch(next(iter(gated)), "b/feedforward_gate_dense/kernel")
