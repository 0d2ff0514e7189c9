"""What every task checks of the backbone it is given.

A task (`CausalLM`, `Seq2SeqLM`, `TextClassifier`, `MaskedLM`) takes its
family's backbone of this library. A keras-hub backbone of the same name
is the likeliest mistake, so errors name the library an object comes
from and how to build ours from the same weights.
"""

from keras_nlp.distribution.layout_map import bind_active_layout_map


def library_of(obj):
    """`"keras_hub.models.LlamaBackbone"`-like name of an object's class,
    with the library it comes from, for errors about wrong objects."""
    cls = type(obj)
    library = cls.__module__.split(".")[0]
    if library in ("keras_hub", "keras_nlp"):
        return f"{library}.models.{cls.__name__}"
    return f"{cls.__module__}.{cls.__name__}"


def check_backbone(task_name, expected, backbone):
    """Raises unless `backbone` is an `expected` (a backbone class); then
    binds the active distribution's layout map to it, if not bound yet
    (`bind_active_layout_map`: the task's own variables, its optimizer's
    and head's, are then laid out under that map).

    Raises:
        ValueError: naming the class received and its library; for a
            keras-hub backbone, how to load its weights into ours.
    """
    if isinstance(backbone, expected):
        bind_active_layout_map(backbone)
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


class TaskRegistry:
    """Each family's subclass of a task, by the backbone class it takes.

    A task class's `__init_subclass__` registers its subclasses; `lookup`
    finds the one for a backbone class (or a parent of it), as
    `CausalLM.from_preset` and `TextClassifier.from_preset` do for a
    preset's backbone.

    Args:
        task: what the task is called in errors (`"causal LM"`).
        kind: the kind of backbone that has one (`"decoder"`).
    """

    def __init__(self, task, kind):
        self.task = task
        self.kind = kind
        self._classes = {}

    def register(self, task_cls):
        if task_cls.backbone_cls is not None:
            self._classes.setdefault(task_cls.backbone_cls, task_cls)

    def lookup(self, backbone_cls):
        """The task subclass of `backbone_cls`.

        Raises:
            ValueError: if the backbone has none, naming those that do.
        """
        for klass in backbone_cls.__mro__:
            if klass in self._classes:
                return self._classes[klass]
        raise ValueError(
            f"{backbone_cls.__name__} has no {self.task}: it is not "
            f"{'an' if self.kind[0] in 'aeiou' else 'a'} {self.kind}. "
            f"{self.kind.capitalize()}s with one: "
            + ", ".join(sorted(k.__name__ for k in self._classes))
            + "."
        )
