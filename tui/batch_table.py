"""`--format table`: one table shape for the batch commands that print rows.

On a terminal the table fits its width: every cell on one line, cut with `…` (`--wide` keeps
every cell whole); the columns that name a run take what the others leave. Anywhere else
(a pipe, a file) it is plain TSV: a header line, then one line per row, tabs between cells,
so `cut`, `sort` and `awk` read it. Either way a cell is escaped (`term_safe`: a tab or newline
in a name never splits a row) and never longer than CELL_CAP characters, however long the
field read off a job dir.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

from services.core.text import term_safe

CELL_CAP = 300  # characters; a 10 MB field would otherwise take a minute to lay out
ELLIPSIS = "…"


def capped(value: object, cap: int = CELL_CAP) -> str:
    """`value` as one escaped line of at most `cap` characters."""
    if value is None:
        return ""
    s = value if isinstance(value, str) else str(value)
    if len(s) > cap:
        s = s[:cap]  # before escaping: escaping a huge field is itself the slow part
        return term_safe(s)[: cap - 1] + ELLIPSIS
    out = term_safe(s)
    return out if len(out) <= cap else out[: cap - 1] + ELLIPSIS


@dataclass(frozen=True)
class Column:
    name: str
    flexible: bool = False  # takes the width the fixed columns leave (ids, names, evidence)
    weight: int = 1  # a flexible column's share of that width
    justify: str = "left"


def terminal_width(out: IO[str]) -> int | None:
    """The width of the terminal `out` is, or None when it is not one."""
    if not out.isatty():
        return None
    import shutil

    return shutil.get_terminal_size((80, 24)).columns


def column_widths(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int) -> list[int]:
    """Each column's width on a terminal `width` wide: fixed columns keep their natural width;
    the flexible ones share what is left, a narrow one giving its surplus to the others."""
    natural = [max([len(c.name)] + [len(r[i]) for r in rows]) for i, c in enumerate(columns)]
    out = list(natural)
    # rich's SIMPLE_HEAD box without its edge, one space of padding: two spaces between columns
    room = width - 2 * (len(columns) - 1) - sum(n for n, c in zip(natural, columns, strict=True) if not c.flexible)
    flex = sorted((n for n, c in enumerate(columns) if c.flexible), key=lambda n: natural[n] / columns[n].weight)
    weights = sum(columns[n].weight for n in flex)
    for n in flex:
        share = max(6, room * columns[n].weight // weights)
        out[n] = min(natural[n], share)
        room -= out[n]
        weights -= columns[n].weight
    return out


def print_rows(out: IO[str], title: str, columns: Sequence[Column], rows: Sequence[Sequence[Any]], *,
               wide: bool = False) -> None:
    """The rows as a table that fits the terminal, or as TSV off a terminal."""
    cells = [[v if isinstance(v, str) and len(v) <= CELL_CAP and v == term_safe(v) else capped(v) for v in row]
             for row in rows]
    width = terminal_width(out)
    if width is None:
        out.write("\t".join(c.name for c in columns) + "\n")
        for row in cells:
            out.write("\t".join(row) + "\n")
        return
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    widths = [max([len(c.name)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)] if wide \
        else column_widths(columns, cells, width)
    console = Console(file=out, width=max(width, sum(widths) + 2 * len(widths)), highlight=False)
    table = Table(title=title or None, title_justify="left", expand=False, box=box.SIMPLE_HEAD, show_edge=False,
                  pad_edge=False, padding=(0, 1, 0, 0))
    for c, w in zip(columns, widths, strict=True):
        table.add_column(c.name, no_wrap=True, overflow="ellipsis", width=w, justify=c.justify)  # type: ignore[arg-type]
    for row in cells:
        table.add_row(*(Text(v) for v in row))  # never read as markup
    console.print(table)
