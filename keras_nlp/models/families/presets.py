"""The sizes most built-in presets share, written once."""


def preset_config(
    num_layers, num_heads, hidden_dim, *, vocabulary_size, dropout=0.1, **rest
):
    """A built-in preset's config: the usual sizes, then `rest`.

    The feed-forward is four times the hidden width, as in every family
    that uses this. Configs are passed as keywords, so the keys' order does
    not matter.

    A family binds what its presets share with `functools.partial` and
    states each preset's depth and widths.

    Args:
        num_layers, num_heads, hidden_dim, vocabulary_size: ints.
        dropout: float. Defaults to `0.1`, as most were trained.
        **rest: the family's other arguments, in its constructor's order.
    """
    return {
        "vocabulary_size": vocabulary_size,
        "num_layers": num_layers,
        "num_heads": num_heads,
        "hidden_dim": hidden_dim,
        "intermediate_dim": 4 * hidden_dim,
        "dropout": dropout,
        **rest,
    }
