"""Files -> validated models: built-in catalogs (models, overheads, activation coefficients) and project
files. Every error names the file, the row or field path, what is allowed and a close match."""

from __future__ import annotations

import datetime
import tomllib
from collections.abc import Mapping, Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpuplan.catalog import reading
from gpuplan.catalog.hf_config import arch_from_hf_config
from gpuplan.catalog.project_errors import translate_validation_error
from gpuplan.core.sizing.lora import check_target_names
from gpuplan.errors import CatalogError, InputError, UnknownNameError, UnsupportedModelError, clip
from gpuplan.schema.estimate import ActivationCoefficients, ActivationTable, Overheads
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import ModelRef, Project
from gpuplan.schema.speed import GenerationEfficiency, SpeedModel, SpeedParams

M = TypeVar("M", bound=BaseModel)

SCHEMA_VERSIONS = (1,)


class ModelPreset(BaseModel):
    """A row of data/models.toml."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    name: str
    aliases: list[str] = Field(default_factory=list)
    hf_id: str | None = None
    parameters: int = Field(gt=0)
    source: str = Field(min_length=1)
    as_of: datetime.date
    notes: str | None = None
    config: dict[str, Any]


class ResolvedModel(BaseModel):
    """A model reference made concrete: its architecture and where it came from."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    arch: ModelArch
    name: str
    origin: str  # "preset:<id>" | "hf_config:<path>" | "config" | "hf_id:<id>"
    source: str | None = None
    as_of: datetime.date | None = None


def _data_text(name: str) -> str:
    return resources.files("gpuplan.data").joinpath(name).read_text(encoding="utf-8")


def _read_toml(text: str, path: str) -> dict[str, Any]:
    try:
        data = reading.builtin_toml(text) if path.startswith("gpuplan/data/") else tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(path, f"not valid TOML: {exc}") from None
    version = data.get("schema_version")
    if version not in SCHEMA_VERSIONS:
        raise CatalogError(path, f"schema_version {clip(version)} is not one this gpuplan reads "
                                 f"({', '.join(map(str, SCHEMA_VERSIONS))})", field="schema_version")
    return data


read_toml = _read_toml  # for the other catalog modules


def _row_error(path: str, row: Mapping[str, Any], index: int, exc: ValidationError) -> CatalogError:
    err = exc.errors()[0]
    return CatalogError(path, err["msg"], row=row.get("id", index), field=".".join(map(str, err["loc"])))


@lru_cache(maxsize=1)
def load_presets() -> dict[str, ModelPreset]:
    """The built-in model presets, by id."""
    path = "gpuplan/data/models.toml"
    data = _read_toml(_data_text("models.toml"), path)
    out: dict[str, ModelPreset] = {}
    for i, row in enumerate(data.get("model", [])):
        try:
            preset = ModelPreset(**row)
        except ValidationError as exc:
            raise _row_error(path, row, i, exc) from None
        if preset.id in out:
            raise CatalogError(path, "duplicate id", row=preset.id, field="id")
        out[preset.id] = preset
    return out


def find_preset(name: str, loc: Sequence[str | int] = ("model", "preset")) -> ModelPreset:
    """A preset by id or alias (case-insensitive); UnknownNameError with suggestions otherwise."""
    hit = _presets_by_name().get(name.lower())
    if hit is None:
        raise UnknownNameError(loc, "model", name, [p.id for p in load_presets().values()])
    return hit


@lru_cache(maxsize=1)
def _presets_by_name() -> dict[str, ModelPreset]:
    """The built-in presets by lower-cased id, alias and Hugging Face id, indexed once (a plan looks its model up)."""
    by_name: dict[str, ModelPreset] = {}
    for p in load_presets().values():
        for n in (p.id, *p.aliases, *([p.hf_id] if p.hf_id else [])):
            by_name[n.lower()] = p
    return by_name


@lru_cache(maxsize=1)
def load_overheads() -> Overheads:
    path = "gpuplan/data/overheads.toml"
    data = _read_toml(_data_text("overheads.toml"), path)
    values: dict[str, Any] = {}
    for i, row in enumerate(data.get("overhead", [])):
        for key in ("id", "value", "source", "as_of"):
            if key not in row:
                raise CatalogError(path, f"missing {key}", row=row.get("id", i), field=key)
        values[row["id"]] = row["value"]
    try:
        return Overheads(**values)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise CatalogError(path, err["msg"], row=".".join(map(str, err["loc"]))) from None


@lru_cache(maxsize=1)
def load_host_support() -> tuple[dict[str, str], dict[str, str]]:
    """What the host must provide: per GPU generation (toolkit) and per platform need (data/host_support.toml)."""
    path = "gpuplan/data/host_support.toml"
    data = _read_toml(_data_text("host_support.toml"), path)
    out: list[dict[str, str]] = [{}, {}]
    for k, (table, field) in enumerate((("generation", "toolkit"), ("platform_need", "text"))):
        for i, row in enumerate(data.get(table, [])):
            for key in ("id", field, "source", "as_of"):
                if key not in row:
                    raise CatalogError(path, f"missing {key}", row=row.get("id", i), field=key)
            out[k][row["id"]] = row[field]
    return out[0], out[1]


@lru_cache(maxsize=1)
def load_fx() -> dict[str, float]:
    """Units of each currency per US dollar (data/fx.toml)."""
    return {c: rate for c, (rate, _) in _fx_rows().items()}


def load_fx_dates() -> dict[str, datetime.date]:
    """The date of each rate of data/fx.toml."""
    return {c: when for c, (_, when) in _fx_rows().items()}


def _fx_rows() -> dict[str, tuple[float, datetime.date]]:
    path = "gpuplan/data/fx.toml"
    data = _read_toml(_data_text("fx.toml"), path)
    rates: dict[str, tuple[float, datetime.date]] = {}
    for i, row in enumerate(data.get("rate", [])):
        for key in ("currency", "per_usd", "source", "as_of"):
            if key not in row:
                raise CatalogError(path, f"missing {key}", row=row.get("currency", i), field=key)
        rates[row["currency"]] = (float(row["per_usd"]), row["as_of"])
    return rates


@lru_cache(maxsize=1)
def load_speed_model() -> SpeedModel:
    """The speed model's assumptions (data/speed.toml)."""
    path = "gpuplan/data/speed.toml"
    data = _read_toml(_data_text("speed.toml"), path)
    gens = table_rows(data, path, "generation", GenerationEfficiency)
    params, sources = param_rows(data, path, SpeedParams)
    return SpeedModel(generations=gens, params=params, sources=sources)


def table_rows(data: dict[str, Any], path: str, table: str, model: type[M]) -> dict[str, M]:
    """The `[[table]]` rows of a data file, each validated as `model`, by id (a row's index where it has none);
    a row that does not validate is an error naming the file, row and field."""
    out: dict[str, M] = {}
    for i, row in enumerate(data.get(table, [])):
        try:
            out[row.get("id", str(i))] = model(**row)
        except ValidationError as exc:
            raise _row_error(path, row, i, exc) from None
    return out


def param_rows(data: dict[str, Any], path: str, model: type[M]) -> tuple[M, dict[str, str]]:
    """The `[[param]]` rows of a data file (id, value, source, as_of each) as one `model`, and each value's source."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for i, row in enumerate(data.get("param", [])):
        for key in ("id", "value", "source", "as_of"):
            if key not in row:
                raise CatalogError(path, f"missing {key}", row=row.get("id", i), field=key)
        values[row["id"]] = row["value"]
        sources[row["id"]] = row["source"]
    try:
        return model(**values), sources
    except ValidationError as exc:
        err = exc.errors()[0]
        raise CatalogError(path, err["msg"], row=".".join(map(str, err["loc"]))) from None


@lru_cache(maxsize=1)
def load_activation_table() -> ActivationTable:
    path = "gpuplan/data/activations.toml"
    data = _read_toml(_data_text("activations.toml"), path)
    rows = {}
    for i, row in enumerate(data.get("row", [])):
        key = row.get("key")
        try:
            rows[key] = ActivationCoefficients(**{k: v for k, v in row.items() if k != "key"})
        except ValidationError as exc:
            raise _row_error(path, {"id": key}, i, exc) from None
    cnn_path = "gpuplan/data/cnn_activations.toml"
    cnn = {}
    for i, row in enumerate(_read_toml(_data_text("cnn_activations.toml"), cnn_path).get("cnn", [])):
        for key in ("regime", "bytes_per_feature_element", "source", "as_of"):
            if key not in row:
                raise CatalogError(cnn_path, f"missing {key}", row=i, field=key)
        cnn[row["regime"]] = float(row["bytes_per_feature_element"])
    return ActivationTable(source=data["source"], as_of=str(data["as_of"]), rows=rows, cnn=cnn)


# ---------------------------------------------------------------------------------------------- projects

def parse_project(data: Any, source: str = "project") -> Project:
    if not isinstance(data, Mapping):
        raise InputError([], "a project file must be a mapping of keys (name, model, workload, ...)", source=source)
    try:
        reading.check_values(data)
    except reading.Unreadable as exc:
        raise InputError(exc.loc, exc.message, source=source) from None
    try:
        project = Project.model_validate(data)
    except ValidationError as exc:
        raise translate_validation_error(exc, source) from None
    if project.workload.lora is not None:  # a typo; a name this model lacks is checked with the model (check_targets)
        try:
            check_target_names(project.workload.lora.targets)
        except InputError as exc:
            raise InputError(exc.loc, exc.detail, exc.allowed, source=source) from None
    return project


def read_structured(path: Path) -> Any:
    """YAML or JSON from a file, with errors that name the file and line (catalog/reading.py: size, UTF-8,
    nesting, duplicate keys, NaN and huge numbers refused)."""
    try:
        text = reading.read_text(path)
    except reading.Unreadable as exc:
        raise InputError([], exc.message, source=None if exc.reason else str(path)) from None
    try:
        return reading.parse(text, "json" if path.suffix.lower() == ".json" else "yaml")
    except reading.Unreadable as exc:
        raise InputError(exc.loc, exc.message, source=str(path)) from None


def load_project(path: str | Path) -> tuple[Project, Path]:
    """A project file and the folder its relative paths are relative to."""
    p = Path(path)
    return parse_project(read_structured(p), source=str(p)), p.parent


def resolve_model(ref: ModelRef, base_dir: Path | None = None) -> ResolvedModel:
    """The architecture behind a project's `model` section."""
    if ref.trace:
        raise InputError(["model", "trace"], "a traced model has no architecture to derive layouts from: "
                         "`gpuplan estimate` and `gpuplan plan` take it (data-parallel only), this command does not",
                         "model.preset, model.hf_config, model.config or model.hf_id")
    if ref.preset:
        preset = find_preset(ref.preset)
        arch = arch_from_hf_config(preset.config, source=f"preset {preset.id}")
        return ResolvedModel(arch=arch, name=preset.name, origin=f"preset:{preset.id}", source=preset.source,
                             as_of=preset.as_of)
    if ref.hf_config:
        path = Path(ref.hf_config)
        if base_dir is not None and not path.is_absolute():
            path = base_dir / path
        data = read_structured(path) if path.suffix.lower() != ".json" else _read_json(path)
        arch = arch_from_hf_config(data, source=str(path))
        name = data.get("_name_or_path") or (path.parent.name if path.stem == "config" else path.stem)
        return ResolvedModel(arch=arch, name=str(name), origin=f"hf_config:{path}", source=str(path))
    if ref.config:
        try:
            arch = arch_from_hf_config(ref.config)
        except InputError as exc:  # located under model.config, for a form to show it beside the pasted text
            if type(exc) not in (InputError, UnsupportedModelError):
                raise
            raise type(exc)(["model", "config", *exc.loc], exc.detail, exc.allowed) from None
        name = ref.config.get("_name_or_path") or arch.model_type
        return ResolvedModel(arch=arch, name=str(name), origin="config", source="model.config (a config.json, inline)")
    assert ref.hf_id
    try:  # a Hub id that is also a built-in preset needs no network
        preset = find_preset(ref.hf_id, ("model", "hf_id"))
    except UnknownNameError:
        pass
    else:
        return resolve_model(ModelRef(preset=preset.id))
    from gpuplan.catalog.hub import fetch_config

    config, where = fetch_config(ref.hf_id)
    arch = arch_from_hf_config(config, source=f"hf_id {ref.hf_id} ({where})")
    return ResolvedModel(arch=arch, name=ref.hf_id, origin=f"hf_id:{ref.hf_id}",
                         source=f"Hugging Face Hub config.json ({where})")


def _read_json(path: Path) -> Any:
    try:
        text = reading.read_text(path)
    except reading.Unreadable as exc:
        raise InputError(["model", "hf_config"], exc.message, source=None if exc.reason else str(path)) from None
    try:
        return reading.parse(text, "json")
    except reading.Unreadable as exc:
        raise InputError(exc.loc, exc.message, source=str(path)) from None


def _hub_cache() -> str:
    """The Hugging Face cache folder in use (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub)."""
    from gpuplan.catalog.hub import hub_cache_dir

    return hub_cache_dir()


def example_names() -> list[str]:
    """The built-in example projects, by name."""
    return list(_examples())


@lru_cache(maxsize=1)
def _examples() -> tuple[str, ...]:  # the package's files do not change while it runs
    files = resources.files("gpuplan.examples")
    return tuple(sorted(f.name.removesuffix(".yaml") for f in files.iterdir() if f.name.endswith(".yaml")))


def example_path(name: str) -> Path:
    if name not in _examples():
        raise UnknownNameError(["--example"], "example", name, example_names())
    return Path(str(resources.files("gpuplan.examples").joinpath(f"{name}.yaml")))


__all__ = ["ModelPreset", "param_rows", "ResolvedModel", "example_names", "example_path", "find_preset",
           "load_activation_table", "load_fx", "load_fx_dates", "load_host_support", "load_overheads", "load_presets",
           "load_project", "load_speed_model", "parse_project",
           "resolve_model", "translate_validation_error"]
