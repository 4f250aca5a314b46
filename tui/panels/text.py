"""Small text layouts for panels: aligned columns and ``label value`` runs, as markup."""

from __future__ import annotations

from collections.abc import Sequence

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
