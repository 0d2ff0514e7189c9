"""README.md's Python snippets run as pasted, in order, in a fresh process.

They set the backend and the fake devices themselves (as the README says),
so the subprocess starts without this suite's environment for either: it
keeps only the suite's XLA flags that make compiling faster, which the
README's device flag is added to. Each
`print` is followed in the README by what it prints; those lines must
match (`...` stands for any text). They also paste into the interactive
interpreter, which compiles line by line and needs a blank line to close a
block (checked by compiling alone: the run above executes them once).
"""

import code
import os
import pathlib
import re
import subprocess
import sys

import pytest

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
    environment["XLA_FLAGS"] = " ".join(
        flag
        for flag in os.environ.get("XLA_FLAGS", "").split()
        if not flag.startswith("--xla_force_host_platform_device_count")
    )
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


class PasteRecorder(code.InteractiveConsole):
    """The interactive interpreter's line-by-line compiler, running nothing.

    `push` compiles as `python` does at its prompt (`codeop`); the compiled
    statements are dropped and syntax errors are recorded instead of printed.
    """

    def __init__(self):
        super().__init__(filename="<paste>")
        self.syntax_errors = []

    def runcode(self, compiled):
        pass

    def showsyntaxerror(self, *args, **kwargs):
        self.syntax_errors.append(sys.exc_info()[1])


def paste_problems(snippet):
    """What goes wrong when `snippet` is pasted at the `>>>` prompt.

    Args:
        snippet: Python source, fed one line at a time as a paste is.

    Returns:
        A list of strings, one per line the interpreter rejects and one if
        the paste ends inside an open block; empty if it pastes cleanly.
    """
    console, problems, more = PasteRecorder(), [], False
    for number, line in enumerate(snippet.splitlines(), 1):
        more = console.push(line)
        if console.syntax_errors:
            error = console.syntax_errors.pop()
            problems.append(f"line {number} {line!r}: {error.msg}")
    if more:
        problems.append("it ends inside an open block")
    return problems


def test_readme_snippets_paste_into_the_interactive_interpreter():
    failures = [
        f"the snippet starting {snippet.splitlines()[0]!r}: "
        + "; ".join(problems)
        for snippet in snippets()
        if (problems := paste_problems(snippet))
    ]
    assert not failures, (
        "README snippets that do not paste into `python`: "
        + "\n".join(failures)
        + "\nAt the prompt a block ends only at a blank line: put one after "
        "each indented block that a dedented line follows, none inside one."
    )


@pytest.mark.parametrize(
    "snippet, problem",
    [
        ("with a:\n    b = 1\nc = b\n", "line 3 'c = b': invalid syntax"),
        ("with a:\n    b = 1\n", "it ends inside an open block"),
        ("if a:\n    b = 1\n\n    c = 2\n", "line 4 '    c = 2': unexpected"),
        ("with a:\n    b = 1\n\nc = b\n", None),
    ],
)
def test_paste_check_finds_what_the_prompt_rejects(snippet, problem):
    problems = paste_problems(snippet)
    if problem is None:
        assert problems == []
    else:
        assert len(problems) == 1 and problems[0].startswith(problem)
