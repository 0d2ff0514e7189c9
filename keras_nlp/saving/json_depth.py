"""A nesting limit for the JSON files of presets, checkpoints and tokenizers.

Python's `json` parser recurses once per level of nesting, so a file
nested some thousands of levels deep ends in a `RecursionError` (and
`tokenizers` refuses one past 128 levels with its own message). Configs
nest a handful of levels and a `tokenizer.json` about ten: `check_json_depth`
refuses a file deeper than `MAX_JSON_DEPTH` before it is parsed, naming it,
in time linear in its size (strings are skipped, brackets counted).
"""

import re

import numpy as np

MAX_JSON_DEPTH = 64
"""The deepest nesting of arrays and objects read."""

# A JSON string (escapes included).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKETS = b"[]{}"
_NOT_BRACKETS = bytes(b for b in range(256) if b not in _BRACKETS)


def json_depth(data):
    """The deepest nesting of arrays and objects in the JSON `data`
    (bytes or str); 0 for a scalar. Brackets inside strings do not count."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    if not brackets:
        return 0
    codes = np.frombuffer(brackets, np.uint8)
    steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1)
    return int(np.cumsum(steps).max())


def check_json_depth(data, where, error=ValueError):
    """Raises `error` naming `where` when `data` nests deeper than
    `MAX_JSON_DEPTH`."""
    depth = json_depth(data)
    if depth > MAX_JSON_DEPTH:
        raise error(
            f"{where} nests JSON arrays and objects {depth} levels deep; at "
            f"most {MAX_JSON_DEPTH} are read (configs and tokenizer files "
            "nest about ten)."
        )
