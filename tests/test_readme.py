"""README.md's Python snippets run as pasted, in order, in a fresh process.

They set the backend and the fake devices themselves (as the README says),
so the subprocess starts without this suite's environment for either. Each
`print` is followed in the README by what it prints; those lines must
match (`...` stands for any text).
"""

import os
import pathlib
import re
import subprocess
import sys

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def snippets():
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)


def expected_outputs(code):
    """The comment lines after each `print(...)` statement, joined."""
    expected, lines = [], code.splitlines()
    for index, line in enumerate(lines):
        if not line.startswith("print("):
            continue
        # Skip the rest of a multi-line print.
        end = index
        while lines[end].count("(") > lines[end].count(")") or (
            end > index and not lines[end].rstrip().endswith(")")
        ):
            end += 1
        comment = []
        for following in lines[end + 1 :]:
            if not following.startswith("# "):
                break
            comment.append(following[2:])
        expected.append(" ".join(comment))
    return expected


def test_readme_snippets_run_in_order_and_print_what_they_say(tmp_path):
    blocks = snippets()
    assert len(blocks) >= 4
    script = "\n".join(blocks)
    expected = [line for block in blocks for line in expected_outputs(block)]
    assert expected and all(expected)
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("KERAS_BACKEND", "XLA_FLAGS")
    }
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    printed = result.stdout.strip()
    for line in expected:
        pattern = ".*?".join(
            re.escape(" ".join(part.split())) for part in line.split("...")
        )
        assert re.search(pattern, " ".join(printed.split())), (
            f"expected {line!r} in:\n{printed}"
        )
