"""How `CausalLM.generate` picks each next token from the logits.

A `Sampler` is a small immutable description (greedy, or sampling with a
temperature, top-k and top-p); `next_tokens` applies it inside the
compiled generation loop with `keras.ops`. Random draws take a per-step
seed built from the user's seed and the step, so a seeded `generate` is
reproducible and the loop stays one compiled function.
"""

import dataclasses

import keras
from keras import ops

SAMPLER_NAMES = ("greedy", "random", "top_k", "top_p")


@dataclasses.dataclass(frozen=True)
class Sampler:
    """Greedy decoding, or sampling from the tempered, truncated softmax.

    Args:
        greedy: bool. Take the most likely token (then the other options
            must keep their defaults).
        temperature: float > 0. Logits are divided by it before sampling.
        top_k: int or `None`. Sample among the `top_k` most likely tokens.
        top_p: float in (0, 1] or `None`. Sample among the fewest most
            likely tokens whose probabilities add up to at least `top_p`
            (nucleus sampling); the most likely token always stays.
        seed: int (an int32) or `None`. Seed of the draws; `None` draws a
            fresh seed per `generate` call.

    Example:

    ```python
    from keras_nlp.models.sampling import Sampler, get_sampler

    get_sampler("greedy")  # Sampler(greedy=True, ...)
    get_sampler({"top_k": 5, "temperature": 0.7, "seed": 1})
    Sampler(greedy=False, top_p=0.9)
    ```
    """

    greedy: bool = False
    temperature: float = 1.0
    top_k: int = None
    top_p: float = None
    seed: int = None

    def __post_init__(self):
        if not isinstance(self.temperature, (int, float)) or not (
            self.temperature > 0
        ):
            raise ValueError(
                "`temperature` must be a number > 0. Received: "
                f"temperature={self.temperature!r}."
            )
        if self.top_k is not None and (
            not isinstance(self.top_k, int)
            or isinstance(self.top_k, bool)
            or self.top_k < 1
        ):
            raise ValueError(
                "`top_k` must be a positive integer or None. Received: "
                f"top_k={self.top_k!r}."
            )
        if self.top_p is not None and not (
            isinstance(self.top_p, (int, float)) and 0 < self.top_p <= 1
        ):
            raise ValueError(
                "`top_p` must be in (0, 1] or None. Received: "
                f"top_p={self.top_p!r}."
            )
        if self.seed is not None and (
            not isinstance(self.seed, int)
            or isinstance(self.seed, bool)
            or not -(2**31) <= self.seed < 2**31
        ):
            # The loop takes the seed as an int32.
            raise ValueError(
                "`seed` must be an int from -2**31 to 2**31 - 1, or None. "
                f"Received: seed={self.seed!r}."
            )
        if self.greedy and (
            self.temperature != 1.0
            or self.top_k is not None
            or self.top_p is not None
        ):
            raise ValueError(
                "A greedy sampler takes the most likely token, so it takes "
                "no `temperature`, `top_k` or `top_p`. Received: "
                f"temperature={self.temperature!r}, top_k={self.top_k!r}, "
                f"top_p={self.top_p!r}; use greedy=False to sample."
            )


def get_sampler(identifier):
    """A `Sampler` from a name, a dict of `Sampler` arguments or a `Sampler`.

    Names: `"greedy"`; `"random"` (plain sampling); `"top_k"` (`top_k=5`);
    `"top_p"` (`top_p=0.9`).
    """
    if isinstance(identifier, Sampler):
        return identifier
    if isinstance(identifier, dict):
        return Sampler(**identifier)
    if identifier == "greedy":
        return Sampler(greedy=True)
    if identifier == "random":
        return Sampler()
    if identifier == "top_k":
        return Sampler(top_k=5)
    if identifier == "top_p":
        return Sampler(top_p=0.9)
    raise ValueError(
        f"Unknown sampler {identifier!r}. Use one of {SAMPLER_NAMES}, a dict "
        "of `Sampler` arguments or a `keras_nlp.models.sampling.Sampler`."
    )


def next_tokens(logits, sampler, seed, step):
    """The next token of each row, `(batch,)` int32.

    Args:
        logits: `(batch, vocabulary)` logits of the last position.
        sampler: a `Sampler`.
        seed: int32 scalar tensor, the generation's seed.
        step: int32 scalar tensor, the position being generated; the draw
            of each step uses its own seed.
    """
    logits = ops.cast(logits, "float32")
    if sampler.greedy:
        return ops.cast(ops.argmax(logits, axis=-1), "int32")
    logits = logits / sampler.temperature
    vocabulary = logits.shape[-1]
    if sampler.top_k is not None and sampler.top_k < vocabulary:
        kth_largest = ops.top_k(logits, sampler.top_k, sorted=True)[0][:, -1:]
        logits = ops.where(logits < kth_largest, -float("inf"), logits)
    if sampler.top_p is not None and sampler.top_p < 1:
        sorted_logits = ops.flip(ops.sort(logits, axis=-1), axis=-1)
        probabilities = ops.softmax(sorted_logits, axis=-1)
        # Keep a token when the tokens more likely than it add up to less
        # than top_p: the smallest set reaching top_p, never empty.
        before = ops.cumsum(probabilities, axis=-1) - probabilities
        kept = ops.where(before < sampler.top_p, sorted_logits, float("inf"))
        threshold = ops.min(kept, axis=-1, keepdims=True)
        logits = ops.where(logits < threshold, -float("inf"), logits)
    return ops.cast(_categorical(logits, seed, step), "int32")


def _categorical(logits, seed, step):
    """One draw per row of `softmax(logits)`, seeded by `(seed, step)`.

    Keras's random ops take a seed generator (a variable), which a compiled
    loop could not advance per step; both backends accept a seed pair
    tensor through their own stateless ops, so the pair is built here.
    """
    pair = ops.stack([ops.cast(seed, "int32"), ops.cast(step, "int32")])
    if keras.backend.backend() == "jax":
        return keras.random.categorical(
            logits, 1, seed=ops.cast(pair, "uint32")
        )[:, 0]
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return tf.random.stateless_categorical(logits, 1, seed=pair)[:, 0]
    raise NotImplementedError(
        "Sampling in `generate` supports the JAX and TensorFlow backends; "
        f"the active backend is {keras.backend.backend()!r}. Greedy "
        "decoding works on every backend."
    )
