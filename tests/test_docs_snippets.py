"""Every Python snippet on a page says where each of its names comes from.

A page's code block shows files, or sections of them (``--8<-- "path:NAME"``, the
lines between ``# --8<-- [start:NAME]`` and ``# --8<-- [end:NAME]``), and the reader
copies the block: a name bound outside it (an import at the file's top, an object
made in a function around the section, a stand-in for the reader's own code) is a
NameError with no clue where it comes from. So each name a block uses is either
bound in it (an import, an assignment, a ``def`` or ``class``, a parameter, a
``for``, ``with`` or ``except`` target, a comprehension variable, a walrus, a
``match`` capture, a ``global`` a function assigns) or declared by a comment line
of the block::

    # given: hosts (your ensemble, "zk1:2181,zk2:2181"), storage (your store)

for what the reader's program already has: the ensemble's address, a client or an
app made elsewhere, their own work. A name declared but not needed fails too
(except in a whole file, which holds the ``# given:`` lines of its sections).

Scopes are the compiler's own (``symtable``): a name bound in one function does not
serve another, a method does not see its class's attributes, a comprehension's
variable stays in it. CONTRIBUTING.md ("Docs ship with the code") states the rule.
"""

from __future__ import annotations

import ast
import builtins
import re
import symtable
import textwrap
from collections.abc import Iterator

import pytest

from tests.test_docs import _SNIPPET, MARKDOWN, ROOT

#: ``# given: name (what it is), name (...)``: names the reader's program already has.
_GIVEN = re.compile(r"^[ \t]*# given: (.*)$", flags=re.MULTILINE)
#: A section marker line of pymdownx.snippets (any section's: they are not shown).
_MARKER = re.compile(r"-{1,}8<-{1,}[ \t]+\[[ \t]*(start|end)[ \t]*:[ \t]*([\w-]+)[ \t]*\]")
#: Names every module has without binding them.
_BUILTINS = frozenset(dir(builtins))


def section(text: str, name: str) -> str:
    """The section ``name`` of a file as the site shows it: other markers dropped, dedented."""
    lines: list[str] = []
    inside = False
    for line in text.splitlines():
        marker = _MARKER.search(line)
        if marker and marker.group(2) == name:
            if marker.group(1) == "end" and inside:
                return textwrap.dedent("\n".join(lines)) + "\n"
            inside = True
        elif inside and not marker:
            lines.append(line)
    raise LookupError(f"no section {name!r}")


def given(code: str) -> list[str]:
    """The names the snippet's ``# given:`` lines declare, in order."""
    names = []
    for declared in _GIVEN.findall(code):
        depth, outside = 0, []
        for char in declared:  # what is in parentheses says what a name is
            if char == "(":
                depth += 1
            elif char == ")":
                depth = max(depth - 1, 0)
            elif depth == 0:
                outside.append(char)
        for part in "".join(outside).split(","):
            if not part.strip().isidentifier():
                raise ValueError(f"# given: {declared!r}: {part.strip()!r} is not a name")
            names.append(part.strip())
    return names


def _tables(table: symtable.SymbolTable) -> Iterator[symtable.SymbolTable]:
    yield table
    for child in table.get_children():
        yield from _tables(child)


def free_names(code: str) -> list[str]:
    """Names the snippet uses from its module's scope without binding them there, sorted."""
    tree = ast.parse(code)  # a SyntaxError says where
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            raise ValueError(f"line {node.lineno}: a * import hides which names it binds")
    top = symtable.symtable(code, "<snippet>", "exec")
    used: set[str] = set()
    bound: set[str] = set()
    for table in _tables(top):
        for symbol in table.get_symbols():
            name = symbol.get_name()
            if table is top:
                if symbol.is_assigned() or symbol.is_imported():
                    bound.add(name)
                if symbol.is_referenced():
                    used.add(name)
            elif symbol.is_global():  # not local here, nor in an enclosing function
                if symbol.is_referenced():
                    used.add(name)
                if symbol.is_declared_global() and symbol.is_assigned():
                    bound.add(name)
    return sorted(used - bound - _BUILTINS)


def problems(code: str, *, whole_file: bool = False) -> list[str]:
    """What the reader would not know: each name neither bound nor given, each given unused.

    A whole file may hold the ``# given:`` lines of its sections, needed there only.
    """
    free, declared = free_names(code), given(code)
    unknown = [f"{name}: bind it in the snippet, or say what it is in a '# given:' line"
               for name in free if name not in declared]  # fmt: skip
    if whole_file:
        return unknown
    return unknown + [f"{name}: given but not needed" for name in declared if name not in free]


#: A line that opens or closes a fenced code block.
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")

Snippet = tuple[tuple[str, str], ...]


def code_blocks(page: str) -> Iterator[Snippet]:
    """The Python files and sections each code block of a page includes: (path, section or "").

    The reader copies a block whole, so what one of its includes binds serves the others
    (``app`` made in the first, used in the second).
    """
    fence: str | None = None
    included: list[tuple[str, str]] = []
    for line in page.splitlines():
        found = _FENCE.match(line)
        if fence is None and found:
            fence, included = found.group(1), []
        elif fence is not None and found and found.group(1).startswith(fence):
            if included:
                yield tuple(included)
            fence = None
        elif fence is not None and (include := _SNIPPET.match(line)) is not None:
            path, name = include.groups()
            if path.endswith(".py"):
                included.append((path, name or ""))


def code(snippet: Snippet) -> str:
    """The block's Python as the site shows it."""
    texts = []
    for path, name in snippet:
        text = (ROOT / path).read_text()
        texts.append(section(text, name) if name else text)
    return "\n".join(texts)


SNIPPETS = sorted({snippet for doc in MARKDOWN for snippet in code_blocks(doc.read_text())})


@pytest.mark.parametrize(
    "snippet", SNIPPETS, ids=[" + ".join(f"{p}:{n}" for p, n in s) for s in SNIPPETS]
)
def test_a_snippet_binds_or_declares_every_name_it_uses(snippet: Snippet) -> None:
    assert problems(code(snippet), whole_file=any(not name for _, name in snippet)) == []


def test_pages_include_python_snippets() -> None:
    assert len({path for snippet in SNIPPETS for path, _ in snippet}) > 20
    assert any(len(snippet) > 1 for snippet in SNIPPETS)


def test_the_includes_of_one_code_block_are_one_snippet() -> None:
    page = (
        'Text.\n\n```python\n--8<-- "a.py:app"\n\n--8<-- "a.py:tasks"\n```\n\n'
        '    ```python title="b"\n    --8<-- "b.py"\n    ```\n\n'
        '```sh\n--8<-- "run.sh"\n```\n\n--8<-- "README.md"\n'
    )
    assert list(code_blocks(page)) == [(("a.py", "app"), ("a.py", "tasks")), (("b.py", ""),)]


# A hand-made snippet, the names it uses from outside, and what the test says of it.
_CASES = {
    "a name from nowhere": (
        "with ZkClient(hosts) as zk:\n    Lock(zk, '/l').acquire()\n",
        ["Lock", "ZkClient", "hosts"],
    ),
    "imports, assignments, defs and targets bind": (
        "import os.path\nfrom zk_recipes import Lock as L\nx = y = 1\n"
        "def f(a, *b, c=x, **d): return a, b, c, d, L\nclass K: pass\n"
        "for i in range(3): pass\nwith open(os.path.sep) as fh: pass\n"
        "try:\n    pass\nexcept OSError as exc:\n    print(exc)\nprint(f, K, i, fh, y)\n",
        [],
    ),
    "a name bound in one function serves not another": (
        "def f():\n    zk = 1\n    return zk\ndef g():\n    return zk\n",
        ["zk"],
    ),
    "a nested function sees its enclosing function's names": (
        "def f(zk):\n    def g():\n        return zk\n    return g\n",
        [],
    ),
    "a method does not see its class's attributes": (
        "class C:\n    limit = 3\n    def m(self):\n        return limit\n",
        ["limit"],
    ),
    "a comprehension's variable stays in it": (
        "names = [n for n in range(3)]\nprint(n)\n",
        ["n"],
    ),
    "a walrus in a comprehension binds outside it": (
        "if any((hit := n) > 1 for n in range(3)):\n    print(hit)\n",
        [],
    ),
    "a global a function assigns is bound": (
        "def setup():\n    global client\n    client = 1\nprint(client)\n",
        [],
    ),
    "a global a function only reads is not": (
        "def use():\n    global client\n    return client\n",
        ["client"],
    ),
    "match captures bind": (
        "match event:\n    case {'path': path}:\n        print(path)\n    case [first, *rest]:\n"
        "        print(first, rest)\n",
        ["event"],
    ),
    "annotations count": (
        "def view(request: HttpRequest) -> HttpResponse:\n    return request\n",
        ["HttpRequest", "HttpResponse"],
    ),
    "a decorator and a base class count": (
        "@app.task\ndef run(): pass\nclass V(View): pass\n",
        ["View", "app"],
    ),
}


@pytest.mark.parametrize("case", sorted(_CASES))
def test_free_names_are_the_compilers_scopes(case: str) -> None:
    code, free = _CASES[case]
    assert free_names(code) == free


#: A hand-made example file: its section uses names bound outside it.
_EXAMPLE = """\
from zk_recipes import Lock, ZkClient

storage = Storage()


def main(hosts: str) -> None:
    # --8<-- [start:example]
    with ZkClient(hosts) as zk:
        with Lock(zk, "/locks/report") as lock:
            storage.write(b"...", fencing_token=lock.fencing_token)
    # --8<-- [end:example]
"""


def test_a_section_with_names_from_outside_fails_until_it_binds_or_declares_them() -> None:
    unknown = "bind it in the snippet, or say what it is in a '# given:' line"
    assert problems(section(_EXAMPLE, "example")) == [
        f"{name}: {unknown}" for name in ("Lock", "ZkClient", "hosts", "storage")
    ]
    fixed = _EXAMPLE.replace(
        "    # --8<-- [start:example]\n",
        "    # --8<-- [start:example]\n"
        '    # given: hosts (your ensemble, "zk1:2181,zk2:2181")\n'
        "    # given: storage (your store: it refuses a stale token (an older one))\n"
        "    from zk_recipes import Lock, ZkClient\n\n",
    )
    assert problems(section(fixed, "example")) == []
    # The whole file: the section's given lines are its own; Storage is defined nowhere.
    assert problems(fixed, whole_file=True) == ["Storage: " + unknown]
    assert problems("# given: zk (a client)\nzk = 1\nprint(zk)\n") == ["zk: given but not needed"]
    assert problems("# given: zk (a client)\nzk = 1\n", whole_file=True) == []


def test_a_given_line_names_names() -> None:
    assert given('  # given: a (x, "y"), b_2 (an (inner) note), c\n# given: d\n') == [
        "a",
        "b_2",
        "c",
        "d",
    ]
    with pytest.raises(ValueError, match="is not a name"):
        given("# given: your client\n")


def test_a_section_is_what_the_site_shows() -> None:
    text = (
        "def main(hosts):\n"
        "    # --8<-- [start:outer]\n"
        "    x = 1\n"
        "    # --8<-- [start:inner]\n"
        "    print(x)\n"
        "    # --8<-- [end:inner]\n"
        "    # --8<-- [end:outer]\n"
    )
    assert section(text, "outer") == "x = 1\nprint(x)\n"
    assert section(text, "inner") == "print(x)\n"
    with pytest.raises(LookupError):
        section(text, "nowhere")
