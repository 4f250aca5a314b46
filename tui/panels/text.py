"""Small text layouts for panels: aligned columns and ``label value`` runs, as markup; and a
text widget that lays the screen out again only when its text needs other room."""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from textual.content import Content
from textual.widgets import Static

from ..format import escape

#: A cell: plain text, or (plain text, role) to colour it with a theme role ("probe-warn").
Cell = str | tuple[str, str]


def _plain(cell: Cell) -> str:
    return cell[0] if isinstance(cell, tuple) else cell


def _styled(cell: Cell, text: str) -> str:
    if isinstance(cell, tuple) and cell[1]:
        return f"[${cell[1]}]{escape(text)}[/]"
    return escape(text)


def columns(headers: Sequence[str], rows: Sequence[Sequence[Cell]], *, left: int = 1,
            max_widths: Sequence[int] | None = None) -> str:
    """Rows under bold headers; the first ``left`` columns align left, the rest right."""
    count = len(headers)
    widths = [len(h) for h in headers]
    for row in rows:
        for index, cell in enumerate(row[:count]):
            widths[index] = max(widths[index], len(_plain(cell)))
    if max_widths:
        widths = [min(w, m) if m else w for w, m in zip(widths, max_widths, strict=False)]  # may list fewer

    def fit(text: str, index: int) -> str:
        width = widths[index]
        if len(text) > width:
            text = text[: max(1, width - 1)] + "…"
        return text.ljust(width) if index < left else text.rjust(width)

    lines = ["[b]" + escape(" ".join(fit(h, i) for i, h in enumerate(headers))) + "[/b]"]
    for row in rows:
        lines.append(" ".join(_styled(cell, fit(_plain(cell), i)) for i, cell in enumerate(row[:count])))
    return "\n".join(lines)


def pairs(*items: tuple[str, str] | None, separator: str = " · ") -> str:
    """``label [b]value[/b]`` runs joined by dots; None items are skipped; values are markup."""
    return separator.join(f"{escape(label)} [b]{value}[/b]" if label else value
                          for item in items if item for label, value in [item])


def word_widths(markup: str) -> tuple[tuple[int, ...], ...]:
    """The cells of each word of each line of ``markup`` as shown: two texts with the same take
    the same room in a widget, wrapped or cut, so changing one for the other needs no layout."""
    return tuple(tuple(cell_len(word) for word in line.split(" "))
                 for line in Content.from_markup(markup).plain.split("\n"))


class TextView(Static):
    """Markup that redraws only when it changes, and lays the screen out again only when its room
    may change (a line or a word of another width): a clock that moves "3s" to "4s" costs a repaint
    of the widget, not a layout of every widget on the screen."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        #: What the widget shows now, as markup.
        self.shown = ""

    def show(self, markup: str) -> None:
        if markup == self.shown:
            return
        same_room = word_widths(markup) == word_widths(self.shown)
        self.shown = markup
        self.update(markup, layout=not same_room)
