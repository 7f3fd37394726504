"""The blocks of a report: paragraphs, tables and figures in sections.

An evaluation's report part (`common.evaluations.ReportSection`) returns `Section`s; `report.render` writes them
as Markdown and HTML. Plain dataclasses below the registry; `report.blocks` hands them on with the helpers that
format their cells.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]


@dataclass
class FigureBlock:
    name: str
    """Names the file under `figures/`: the report writes it as `report.blocks.slug(name)`."""
    caption: str
    figure: Figure


@dataclass
class Section:
    title: str
    blocks: list[str | Table | FigureBlock] = field(default_factory=list)
