"""A generation loop compiled once for the backend, over the model's weights.

`CausalLM.generate` and `Seq2SeqLM.generate` each run their whole decoding
(prefill, then one token per step) as one compiled program. On JAX the
program takes the weights' values as arguments (a `StatelessScope` maps
them onto the variables while it is traced), so a loop is not retraced
when the weights change, and the caches it fills are donated: updated in
place rather than copied each call. On TensorFlow it is a `tf.function`.
"""

import keras


def compile_loop(loop, variables, donate_argnums=()):
    """`loop` compiled for the active backend, reading `variables`.

    Args:
        loop: the Python function to compile; it reads the model's
            variables and creates none.
        variables: the model's variables, in a fixed order.
        donate_argnums: on JAX, the positions of `loop`'s arguments whose
            buffers it may reuse (the caches it updates).

    Returns:
        A function with `loop`'s signature.

    Raises:
        NotImplementedError: on a backend other than JAX and TensorFlow.
    """
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        def stateless(values, *args):
            mapping = list(zip(variables, values, strict=True))
            # The loop creates no variables: leave any that others left
            # pending (deferred initialization) to their owners.
            with keras.StatelessScope(
                state_mapping=mapping, initialize_variables=False
            ):
                return loop(*args)

        # Shifted by one: the weights' values come first.
        compiled = jax.jit(
            stateless, donate_argnums=tuple(i + 1 for i in donate_argnums)
        )

        def function(*args):
            return compiled([v.value for v in variables], *args)

        return function
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(loop, reduce_retracing=False)
    raise NotImplementedError(
        "`generate` runs on the JAX and TensorFlow backends; the "
        f"active backend is {backend!r}."
    )
