"""Will it fit: the memory model, its check against XLA, the recommender."""

import math

import jax
import keras
import numpy as np
import pytest

from keras_nlp.distribution import ModelParallel
from keras_nlp.distribution.kv_cache import cache_bytes_per_device
from keras_nlp.distribution.memory import GATHERED_COPIES
from keras_nlp.distribution.memory import Workload
from keras_nlp.distribution.memory import block_widths
from keras_nlp.distribution.memory import estimate_memory
from keras_nlp.distribution.recommend import candidate_meshes
from keras_nlp.distribution.recommend import recommend
from keras_nlp.models import Llama3Backbone
from keras_nlp.models import Llama3CausalLM

# Llama 3's 4:1 query:key/value heads, small enough to compile in seconds.
CONFIG = dict(
    vocabulary_size=2048,
    num_layers=2,
    num_query_heads=8,
    num_key_value_heads=2,
    hidden_dim=256,
    intermediate_dim=512,
)
TRAIN = Workload("train", batch_size=8, sequence_length=256)


def plan_on(mesh, **arguments):
    return Llama3Backbone.plan_layout(mesh, config=CONFIG, **arguments)


def shard_bytes(weights):
    return sum(w.shard_params * 4 for w in weights)


def test_categories_follow_optimizer_lora_remat_dtype_and_cache():
    plan = plan_on({"batch": 2, "model": 4})
    base = estimate_memory(plan, TRAIN).categories
    assert base["weights"] == plan.bytes_per_device
    assert base["gradients"] == shard_bytes(plan.weights)
    assert base["optimizer_state"] == 2 * base["gradients"]
    # LoRA: only the adapters have gradients and optimizer state.
    lora_plan = plan_on({"batch": 2, "model": 4}, lora_rank=4)
    lora = estimate_memory(
        lora_plan, Workload("train", 8, 256, lora_rank=4)
    ).categories
    adapters = [w for w in lora_plan.weights if "lora_kernel" in w.path]
    assert len(adapters) == 2 * 2 * CONFIG["num_layers"]
    assert lora["gradients"] == shard_bytes(adapters)
    assert lora["optimizer_state"] == 2 * lora["gradients"]
    assert lora["gradients"] < base["gradients"] / 20

    # Remat: each block keeps its input (4 x 256 tokens per device).
    remat = estimate_memory(
        plan, Workload("train", 8, 256, remat="full")
    ).categories
    assert remat["activations"] == 2 * (4 * 256) * 256 * 4
    assert remat["recomputed_block"] == base["activations"] / 2
    # bfloat16 halves what is computed; mixed keeps float32 weights.
    half = estimate_memory(
        plan, Workload("train", 8, 256, dtype="bfloat16")
    ).categories
    mixed = estimate_memory(
        plan, Workload("train", 8, 256, dtype="mixed_bfloat16")
    ).categories
    assert half["activations"] == base["activations"] / 2
    assert half["weights"] == base["weights"] / 2
    assert mixed["weights"] == base["weights"]
    assert mixed["activations"] == half["activations"]

    # Generation: the caches as the plan lays them out, per context.
    sizes = plan.mesh.axis_sizes
    caches = [
        estimate_memory(plan, Workload("generate", 8, length)).categories
        for length in (256, 512)
    ]
    expected = sum(
        cache_bytes_per_device(c, 8, 256, sizes, ("batch",), 4)[0]
        for c in plan.kv_caches
    )
    assert caches[0]["kv_cache"] == expected > 0
    assert caches[1]["kv_cache"] == 2 * expected
    # Weights split over the batch axis are gathered for the whole loop.
    assert caches[0]["gathered_weights"] == GATHERED_COPIES * sum(
        w.params * 4 / (sizes["model"] if "model" in w.spec else 1)
        - w.shard_params * 4
        for w in plan.weights
    )
    one_axis = estimate_memory(
        plan_on({"batch": 1, "model": 8}), Workload("generate", 8, 256)
    )
    assert one_axis.categories["gathered_weights"] == 0


def test_sequence_and_context_parallel_split_the_activations():
    from keras_nlp.distribution import MeshShape
    from keras_nlp.distribution.memory import ACTIVATION_FACTORS

    plain = plan_on({"batch": 1, "model": 8})
    split = plan_on({"batch": 1, "model": 8}, sequence_parallel=True)
    before = estimate_memory(plain, TRAIN).categories
    after = estimate_memory(split, TRAIN).categories
    # Only the residual-stream term changes: 8 x 256 tokens of width 256
    # per block, 7/8 of it gone.
    residual = 2 * ACTIVATION_FACTORS.residual * 8 * 256 * 256 * 4
    assert math.isclose(
        before["activations"] - after["activations"], residual * 7 / 8
    )
    assert after["logits_and_loss"] == before["logits_and_loss"]
    # A sequence the model axis does not divide stays whole.
    odd = Workload("train", batch_size=8, sequence_length=252)
    assert (
        estimate_memory(split, odd).categories
        == estimate_memory(plain, odd).categories
    )
    # A context axis of 2 halves each device's tokens: activations (scores
    # over half the queries against every key) and logits.
    context = plan_on(MeshShape((1, 2, 4), ("batch", "context", "model")))
    halved = estimate_memory(context, TRAIN).categories
    whole = estimate_memory(plan_on({"batch": 1, "model": 4}), TRAIN)
    for name in ("activations", "logits_and_loss"):
        assert math.isclose(halved[name], whole.categories[name] / 2)


def test_query_chunks_keep_one_chunk_of_scores():
    from keras_nlp.distribution.activations import query_chunk_scope
    from keras_nlp.distribution.memory import ACTIVATION_FACTORS

    plan = plan_on({"batch": 1, "model": 8})
    long = Workload("train", batch_size=1, sequence_length=2048)
    chunked = estimate_memory(plan, long).categories
    with query_chunk_scope(None):
        whole = estimate_memory(plan, long).categories
    # 8 query heads, one per device: the scores of 2 blocks kept whole,
    # or one chunk of 1,024 queries at a time.
    scores = ACTIVATION_FACTORS.scores * 2048 * 2048 * 4
    assert math.isclose(
        whole["activations"] - chunked["activations"], 2 * scores
    )
    assert math.isclose(chunked["attention_chunk"], scores / 2)
    assert "attention_chunk" not in whole
    # 256 tokens are attended whole.
    assert "attention_chunk" not in estimate_memory(plan, TRAIN).categories


OPTIMIZERS = {
    "adamw": keras.optimizers.AdamW,
    "sgd": keras.optimizers.SGD,
    "momentum": lambda: keras.optimizers.SGD(momentum=0.9),
    "lion": keras.optimizers.Lion,
    "adafactor": keras.optimizers.Adafactor,
}


def test_optimizer_state_counts_the_variables_keras_creates():
    plan = plan_on({"batch": 1, "model": 1})
    backbone = Llama3Backbone(**CONFIG)
    for name, make in OPTIMIZERS.items():
        optimizer = make()
        optimizer.build(backbone.trainable_variables)
        # Without the step counter and learning rate (scalars).
        elements = sum(
            math.prod(v.shape) for v in optimizer.variables if len(v.shape)
        )
        predicted = estimate_memory(
            plan, Workload("train", 8, 256, optimizer=name)
        )
        assert predicted.categories["optimizer_state"] == 4 * elements, name


def test_block_widths_come_from_the_plan():
    # (1, 8): 8 query heads split, 2 key/value heads fall back.
    block = block_widths(plan_on({"batch": 1, "model": 8}))[0]
    assert (block.hidden, block.query_heads) == (256, 1)
    assert block.feedforward == 2 * 512 / 8
    assert block.query_width == 32


BAD_WORKLOADS = {
    "mode": (dict(mode="serve"), "mode is one of ('train', 'generate')"),
    "batch": (dict(batch_size=0), "batch_size must be a positive int"),
    "optimizer": (dict(optimizer="rmsprop"), "Known: sgd, momentum, adam"),
    "remat": (dict(remat="half"), "Unknown remat mode 'half'"),
    "prompt": (
        dict(mode="generate", prompt_length=300),
        "prompt_length must be an int from 1 to sequence_length (256)",
    ),
    "dtype": (dict(dtype="int8"), "Unknown dtype policy 'int8'"),
}


@pytest.mark.parametrize("name", BAD_WORKLOADS)
def test_bad_workloads_name_the_value(name):
    changes, message = BAD_WORKLOADS[name]
    arguments = dict(mode="train", batch_size=8, sequence_length=256)
    with pytest.raises(
        ValueError, match=message.replace("(", r"\(").replace(")", r"\)")
    ):
        Workload(**{**arguments, **changes})


def test_lora_workload_needs_a_plan_with_adapters():
    with pytest.raises(ValueError, match="plan it with lora_rank=4"):
        estimate_memory(
            plan_on({"batch": 1, "model": 2}),
            Workload("train", 8, 256, lora_rank=4),
        )


@pytest.mark.multi_device
def test_prediction_is_within_fifteen_percent_of_the_compiled_step():
    devices = keras.distribution.list_devices()
    mesh = keras.distribution.DeviceMesh((2, 4), ("batch", "model"), devices)
    layout_map = Llama3Backbone.get_layout_map(mesh, config=CONFIG)
    distribution = ModelParallel(layout_map=layout_map, batch_dim_name="batch")
    with distribution.scope():
        task = Llama3CausalLM(Llama3Backbone(**CONFIG), compile=False)
        task.compile(optimizer=keras.optimizers.AdamW())
        task.optimizer.build(task.trainable_variables)
        task.built = True
        state = [
            [v.value for v in variables]
            for variables in (
                task.trainable_variables,
                task.non_trainable_variables,
                task.optimizer.variables,
                task.metrics_variables,
            )
        ]
        layout = distribution.get_data_layout((8, 256)).backend_layout
        ids = jax.ShapeDtypeStruct((8, 256), "int32", sharding=layout)
        data = ({"token_ids": ids, "padding_mask": ids}, None, None)
        step = jax.jit(task.train_step, donate_argnums=0)
        analysis = step.lower(state, data).compile().memory_analysis()
    compiled = (
        analysis.argument_size_in_bytes
        + analysis.output_size_in_bytes
        - analysis.alias_size_in_bytes
        + analysis.temp_size_in_bytes
    )
    predicted = estimate_memory(plan_on({"batch": 2, "model": 4}), TRAIN)
    assert 0.85 <= predicted.total / compiled <= 1.15, (
        predicted.categories,
        compiled,
    )


def test_candidate_meshes_multiply_to_the_devices():
    meshes = candidate_meshes(8)
    assert len(meshes) == 10
    assert all(math.prod(m.values()) == 8 for m in meshes)
    assert {"data": 2, "fsdp": 2, "model": 2} in meshes
    with_experts = candidate_meshes(8, experts=True)
    assert len(with_experts) == 20 and "expert" in with_experts[0]
    with pytest.raises(ValueError, match="devices must be a positive int"):
        candidate_meshes(0)


def test_recommend_keeps_what_fits_fastest_first():
    workload = Workload("train", 8, 4096, dtype="bfloat16")
    best, considered = recommend(
        Llama3Backbone,
        workload,
        devices=8,
        device="l4-24gb",
        preset="llama3_8b_en",
    )
    usable = 0.9 * 24 * 10**9
    assert best and all(c.memory.total <= usable for c in best)
    times = [c.step_seconds for c in best]
    assert times == sorted(times)
    # Every unsharded candidate keeps 8B weights whole: never fits.
    whole = [c for c in considered if c.mesh["data"] == 8]
    assert whole and not any(c.fits for c in whole)
    assert np.isclose(
        best[0].step_seconds,
        best[0].compute_seconds + best[0].communication_seconds,
    )
    assert "per device" in best[0].why(usable)
