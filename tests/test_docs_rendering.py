"""The site shows no Markdown or Sphinx syntax as text: what ``mkdocs build --strict`` lets through.

A fence left open (``` followed by text on its line) builds without a warning,
and the rest of the page comes out wrong: the code as paragraphs, the prose
and its links inside a code span or a code block. A Sphinx role in a docstring
(``:class:`X` ``) reaches the API reference as the literal ``:class:``. Neither
is a broken link, so the strict build passes.

``rendering_problems`` reads one rendered page and names what is left of
Markdown or Sphinx in it: in its text (outside code) a fence, a snippet marker
(``--8<--``), a role, an unrendered link or bold, a lone backtick, an
admonition marker, a table row or a heading line left in a paragraph, a
reStructuredText ``::``; in an
inline code span a link or a run of backticks; in a code block a Markdown
heading, a link to a page, a fence or a snippet marker (the prose a fence left
open swallowed). tests/integrations/test_docs_site.py runs it on every page of
the built site, and on a page with the unclosed fence docs/recipes/discovery.md
once had, rendered by the site's own Markdown settings; the tests here show
each rule on a small hand-made page.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

#: Elements that end a line of text (a paragraph, a cell, an item, ...).
_BLOCKS = frozenset(
    {"article", "blockquote", "br", "dd", "details", "div", "dt", "figcaption", "hr", "li"}
    | {"ol", "p", "section", "summary", "table", "td", "th", "tr", "ul"}
    | {f"h{level}" for level in range(1, 7)}
)
#: Elements whose content is not page text.
_SKIPPED = frozenset({"script", "style", "svg", "textarea"})
#: Stands for an inline code span in the text, so that ``:class:`` before one still reads as a role.
CODE = "\x00"

#: In the page's text (code spans and blocks left out): (what it is, the pattern).
TEXT_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a code fence", re.compile(r"```|~~~")),
    ("a snippet marker", re.compile(r"--8<--")),
    (
        "a Sphinx role",
        re.compile(r":(?:py:)?(?:attr|class|const|data|doc|exc|func|meth|mod|obj|ref|term):"),
    ),
    ("an unrendered link", re.compile(r"\[[^\]\n]+\]\([^)\s]*\)")),
    ("an unresolved reference link", re.compile(r"\[[^\]\n]+\]\[[^\]\n]*\]")),
    ("unrendered bold", re.compile(r"\*\*[^*\n]+\*\*")),
    ("a lone backtick", re.compile(r"`")),
    ("an admonition marker", re.compile(r"^\s*!!! ")),
    ("a table row", re.compile(r"^\s*\|.*\|\s*$")),
    ("a heading line", re.compile(r"^\s*#{1,6} \S")),
    ("a reStructuredText literal-block marker", re.compile(r"::\s*$")),
)
#: In an inline code span.
CODE_SPAN_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a link inside a code span", re.compile(r"\[[^\]\n]+\]\([^)\s]+\)")),
    ("backticks inside a code span", re.compile(r"``")),
)
#: In a code block (one that shows Markdown on purpose, ```markdown, is left alone).
CODE_BLOCK_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a Markdown heading in a code block", re.compile(r"^#{2,6} \w", re.M)),
    ("a link to a page in a code block", re.compile(r"\[[^\]\n]+\]\([^)\s]*\.md\b[^)\s]*\)")),
    ("a fence in a code block", re.compile(r"^\s*```", re.M)),
    ("a snippet marker in a code block", re.compile(r"--8<--")),
)


class _PageText(HTMLParser):
    """The text of a page's ``<article>``, its code spans and its code blocks, apart."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.spans: list[str] = []
        self.blocks: list[str] = []
        self._in_article = 0
        self._skipped = 0
        self._pre = 0
        self._code = 0
        self._markdown_block = False
        self._span: list[str] = []
        self._block: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "article":
            self._in_article += 1
        if not self._in_article:
            return
        classes = " ".join(value or "" for name, value in attrs if name == "class")
        if tag in _SKIPPED:
            self._skipped += 1
        elif tag == "div" and re.search(r"\blanguage-(?:md|markdown)\b", classes):
            self._markdown_block = True
        elif tag == "pre":
            self._pre += 1
            self._block = []
        elif tag == "code" and not self._pre:
            self._code += 1
            self._span = []
            self.text.append(CODE)
        if tag in _BLOCKS:
            self.text.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if not self._in_article:
            return
        if tag in _SKIPPED:
            self._skipped -= 1
        elif tag == "pre" and self._pre:
            self._pre -= 1
            if not self._pre:
                if not self._markdown_block:
                    self.blocks.append("".join(self._block))
                self._markdown_block = False
        elif tag == "code" and self._code:
            self._code -= 1
            if not self._code:
                self.spans.append("".join(self._span))
        if tag in _BLOCKS:
            self.text.append("\n")
        if tag == "article":
            self._in_article -= 1

    def handle_data(self, data: str) -> None:
        if not self._in_article or self._skipped:
            return
        if self._pre:
            self._block.append(data)
        elif self._code:
            self._span.append(data)
        else:
            self.text.append(data)


def _shown(line: str) -> str:
    return repr(line.strip().replace(CODE, "`…`")[:160])


def rendering_problems(page: str) -> list[str]:
    """What is left of Markdown or Sphinx syntax in one rendered HTML page's ``<article>``."""
    parsed = _PageText()
    parsed.feed(page)
    parsed.close()
    problems = []
    for line in "".join(parsed.text).split("\n"):
        problems += [f"{what}: {_shown(line)}" for what, rule in TEXT_RULES if rule.search(line)]
    for span in parsed.spans:
        problems += [
            f"{what}: {_shown(span)}" for what, rule in CODE_SPAN_RULES if rule.search(span)
        ]
    for block in parsed.blocks:
        for what, rule in CODE_BLOCK_RULES:
            if found := rule.search(block):
                line = block[block.rfind("\n", 0, found.start()) + 1 :].split("\n", 1)[0]
                problems.append(f"{what}: {_shown(line)}")
    return problems


def _page(body: str) -> str:
    """A page as the theme frames it: navigation outside the article, the content inside."""
    return (
        '<html><body><nav class="md-nav">``` [nav](x.md) **kept**</nav>'
        f'<article class="md-content__inner md-typeset">{body}</article>'
        "<script>var s = '```';</script></body></html>"
    )


#: A page as it should render: code, links, bold, a table, a code block showing Python.
CLEAN = _page(
    '<h1 id="lock">Lock<a class="headerlink" href="#lock">&para;</a></h1>'
    '<p>Take <code>Lock(client, "/locks/x")</code>; see <a href="../client/">the client</a>, '
    "<strong>once</strong>. Roles such as <code>:class:`X`</code> shown as code are fine, "
    "and so are times like 10:30 and the list [1, 2].</p>"
    "<table><tr><td><code>a | b</code></td></tr></table>"
    '<div class="language-python highlight"><pre><code># a comment\n'
    "def f(**kwargs): return kwargs  # [x](y)\n</code></pre></div>"
    '<div class="language-markdown highlight"><pre><code>## A heading\n'
    '[a page](page.md)\n--8<-- "file.py"\n</code></pre></div>'
)


def test_a_page_as_it_should_render_has_no_problem() -> None:
    assert rendering_problems(CLEAN) == []


def test_each_leftover_in_the_text_is_named() -> None:
    cases = {
        "<p>```python</p>": "a code fence",
        '<p>--8<-- "example.py"</p>': "a snippet marker",
        "<p>Like :class:<code>Lock</code> does.</p>": "a Sphinx role",
        "<p>As :meth:`Lock.acquire` says.</p>": "a Sphinx role",
        "<p>See [the client](../client.md).</p>": "an unrendered link",
        "<p>See [ZkClient][zk_recipes.ZkClient].</p>": "an unresolved reference link",
        "<p>It is **kept**.</p>": "unrendered bold",
        "<p><code>zk-recipes</code> announce` (cli.md)</p>": "a lone backtick",
        "<p>!!! note</p>": "an admonition marker",
        "<p>| key | default |\n|---|---|</p>": "a table row",
        '<p>def main():\n    # Two "hosts", each with its own client.</p>': "a heading line",
        "<p>Stack it under <code>@app.task</code>::</p>": "a reStructuredText literal-block marker",
    }
    for body, what in cases.items():
        problems = rendering_problems(_page(body))
        assert any(problem.startswith(what + ":") for problem in problems), (body, problems)


def test_a_code_span_or_block_that_swallowed_prose_is_named() -> None:
    span = _page(
        "<p><code>`` Web apps announce themselves\n"
        "([Django](../integrations/django.md#service-discovery),</code></p>"
    )
    assert [p.split(":")[0] for p in rendering_problems(span)] == [
        "a link inside a code span",
        "backticks inside a code span",
    ]
    block = _page(
        '<div class="language-python highlight"><pre><code>print("done")\n'
        "``` Web apps announce themselves with one setting\n"
        "([Django](../integrations/django.md#service-discovery)).\n\n"
        "## The SERVICE setting of the web faces\n</code></pre></div>"
    )
    assert sorted(p.split(":")[0] for p in rendering_problems(block)) == [
        "a Markdown heading in a code block",
        "a fence in a code block",
        "a link to a page in a code block",
    ]


def test_only_the_article_is_read() -> None:
    """The theme's navigation and scripts are not the page's text."""
    assert rendering_problems(_page("")) == []
    assert rendering_problems("<p>```</p>") == []
