"""A table that fits the width it is drawn in by leaving out columns, never by cutting a number short.

rich shrinks a table wider than the terminal by cutting its cells ("671.6…"); a figure cut so is a wrong figure. A
`Fitted` table is built again at render time without its least needed columns (given in the order they may go) until
its natural width fits; where nothing more may go, cells wrap rather than cut."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.table import Table

UNBOUNDED = 10_000
"""A width no table reaches: its natural width is measured in it (a measurement is clipped to the width it is given)."""


def _natural(console: Console, table: Table) -> int:
    """The table's width with every cell whole."""
    return Measurement.get(console, console.options.update_width(UNBOUNDED), table).maximum


@dataclass
class Fitted:
    """`build(left_out)` makes the table without the columns named in `left_out`; `drop` names the columns that may
    be left out, first to go first."""

    build: Callable[[frozenset[str]], Table]
    drop: Sequence[str]

    def table_for(self, console: Console, width: int) -> Table:
        """The table with as many columns as fit in `width`."""
        left_out: frozenset[str] = frozenset()
        table = self.build(left_out)
        for name in self.drop:
            if _natural(console, table) <= width:
                return table
            left_out = left_out | {name}
            table = self.build(left_out)
        if _natural(console, table) > width:
            for column in table.columns:
                column.no_wrap, column.overflow = False, "fold"
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.table_for(console, options.max_width)
