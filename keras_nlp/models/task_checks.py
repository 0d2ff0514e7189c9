"""What every task checks of the backbone it is given.

A task (`CausalLM`, `Seq2SeqLM`, `TextClassifier`, `MaskedLM`) takes its
family's backbone of this library. A keras-hub backbone of the same name
is the likeliest mistake, so errors name the library an object comes
from and how to build ours from the same weights.
"""


def library_of(obj):
    """`"keras_hub.models.LlamaBackbone"`-like name of an object's class,
    with the library it comes from, for errors about wrong objects."""
    cls = type(obj)
    library = cls.__module__.split(".")[0]
    if library in ("keras_hub", "keras_nlp"):
        return f"{library}.models.{cls.__name__}"
    return f"{cls.__module__}.{cls.__name__}"


def check_backbone(task_name, expected, backbone):
    """Raises unless `backbone` is an `expected` (a backbone class).

    Raises:
        ValueError: naming the class received and its library; for a
            keras-hub backbone, how to load its weights into ours.
    """
    if isinstance(backbone, expected):
        return
    message = (
        f"{task_name} takes a keras_nlp.models.{expected.__name__}. "
        f"Received: {library_of(backbone)}."
    )
    if type(backbone).__module__.startswith("keras_hub"):
        message += (
            " Build ours from the same weights: "
            f"keras_nlp.models.{expected.__name__}.from_preset(...) reads "
            "keras-hub preset directories (`backbone.save_to_preset(dir)` "
            "writes one)."
        )
    raise ValueError(message)
