"""The loaded hardware catalog as data: tables of rows by id, with where each row came from. Loading and
validating the files is `gpuplan.catalog.hardware`'s work; this module holds only the types, so the pure core
can take a Catalog without importing a loader."""

from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from gpuplan.errors import UnknownNameError
from gpuplan.schema.framework import FrameworkCaps
from gpuplan.schema.hardware import CatalogRow, Gpu
from gpuplan.schema.server import Cpu, Drive, Nic, Platform

#: table name in a catalog file -> the Catalog field that holds it (and `gpuplan catalog`'s word)
PLURALS: dict[str, str] = {"gpu": "gpus", "cpu": "cpus", "platform": "platforms", "drive": "drives", "nic": "nics"}

R = TypeVar("R", bound=CatalogRow)


class Origin(BaseModel):
    """Where a row comes from, and the built-in row it replaced, if any."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    file: str
    overrides_builtin: bool = False


class Table(BaseModel, Generic[R]):
    """The rows of one kind, by id, with where each came from."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    kind: str
    rows: dict[str, R]
    origins: dict[str, Origin]

    def find(self, name: str, loc: Sequence[str | int]) -> R:
        """A row by id or alias (case-insensitive); an UnknownNameError with close matches otherwise."""
        key = name.lower()
        for row in self.rows.values():
            if key == row.id or key in (a.lower() for a in row.aliases):
                return row
        raise UnknownNameError(loc, self.kind, name, list(self.rows))

    def overridden(self) -> list[str]:
        return [i for i, o in self.origins.items() if o.overrides_builtin]


class Catalog(BaseModel):
    """All hardware tables."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    gpus: Table[Gpu]
    cpus: Table[Cpu]
    platforms: Table[Platform]
    drives: Table[Drive]
    nics: Table[Nic]
    user_files: tuple[str, ...] = ()
    #: what each training framework can run, by id (data/frameworks.toml `can`): the layouts the search proposes
    frameworks: dict[str, FrameworkCaps] = Field(default_factory=dict)

    def table(self, kind: str) -> Table[Any]:
        table: Table[Any] = getattr(self, PLURALS[kind])
        return table


__all__ = ["PLURALS", "Catalog", "Origin", "Table"]
