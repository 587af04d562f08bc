"""A griffe extension for the API page: the doctest lines of a docstring (``>>>``, ``...`` and the output below
them, up to a blank line) become a fenced ``pycon`` block, so markdown renders them as code rather than as
nested quotes (the library's docstrings put their examples there without an ``Examples:`` heading)."""

from __future__ import annotations

import griffe


def fence_doctests(text: str) -> str:
    """``text`` with each doctest run fenced.

    >>> fence_doctests("Sum.\\n\\n>>> 1 + 1\\n2\\n")
    'Sum.\\n\\n```pycon\\n>>> 1 + 1\\n2\\n```\\n'
    """
    out, inside = [], False
    for line in text.splitlines():
        stripped = line.strip()
        if not inside and stripped.startswith(">>>"):
            out.append("```pycon")
            inside = True
        elif inside and not stripped:
            out.append("```")
            inside = False
        out.append(line)
    if inside:
        out.append("```")
    return "\n".join(out) + "\n"


class DoctestBlocks(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)
