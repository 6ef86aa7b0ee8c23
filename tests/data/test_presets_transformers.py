"""Checks the built-in model catalog (src/gpuplan/data/models.toml) against transformers.

Every row's ``parameters`` must equal the parameter count of the real transformers class built from the row's
``[model.config]`` table on the meta device (no weights are allocated, so even the 405B row takes well under a
second). The catalog's bookkeeping (ids, aliases, dates, sources) is checked too; those checks need neither
torch nor transformers. This module deliberately does not import gpuplan.
"""

from __future__ import annotations

import datetime as dt
import re
import tomllib
from pathlib import Path

import pytest

CATALOG = Path(__file__).resolve().parents[2] / "src" / "gpuplan" / "data" / "models.toml"
DATA = tomllib.loads(CATALOG.read_text(encoding="utf-8"))
ROWS = DATA["model"]
IDS = [row["id"] for row in ROWS]

KEBAB = re.compile(r"^[a-z0-9]+(?:[-.][a-z0-9]+)*$")  # lowercase kebab-case; dots allowed in versions ("llama-3.1-8b")

SEQ2SEQ = {"t5", "mt5"}
SEQUENCE_CLASSIFICATION = {"bert", "roberta"}
IMAGE_CLASSIFICATION = {"vit", "resnet"}


def _auto_class(model_type: str):
    import transformers

    if model_type in SEQ2SEQ:
        return transformers.AutoModelForSeq2SeqLM
    if model_type in SEQUENCE_CLASSIFICATION:
        return transformers.AutoModelForSequenceClassification
    if model_type in IMAGE_CLASSIFICATION:
        return transformers.AutoModelForImageClassification
    return transformers.AutoModelForCausalLM


def count_parameters(config: dict) -> int:
    """Parameters of the checkpoint described by ``config`` (a [model.config] table), built on the meta device."""
    import torch
    import transformers

    kwargs = dict(config)
    model_type = kwargs.pop("model_type")
    hf_config = transformers.AutoConfig.for_model(model_type, **kwargs)
    with torch.device("meta"):
        model = _auto_class(model_type).from_config(hf_config)
    total = sum(p.numel() for p in model.parameters())  # parameters() yields each shared tensor once
    # transformers 5.x: T5Config/MT5Config force tie_word_embeddings=True (the file's `false` only switches off the
    # decoder-output rescaling), so a model built from a config shares lm_head with the embeddings. T5 v1.1-style
    # checkpoints (flan-t5, T0, mT0, ...) ship a separate lm_head and from_pretrained keeps it untied, so the real
    # model has one more vocab_size x d_model matrix. Count it when the row says the embeddings are untied.
    if config.get("tie_word_embeddings") is False:
        output = model.get_output_embeddings()
        if output is not None and output.weight is model.get_input_embeddings().weight:
            total += output.weight.numel()
    return total


@pytest.mark.trace
@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_parameter_count_matches_transformers(row):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    assert count_parameters(row["config"]) == row["parameters"]


def test_schema_version_and_size():
    assert DATA["schema_version"] == 1
    assert len(ROWS) >= 32


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_row_fields(row):
    for key in ("id", "name", "hf_id", "source"):
        assert isinstance(row[key], str) and row[key].strip(), key
    assert KEBAB.match(row["id"]), row["id"]
    assert isinstance(row["aliases"], list) and all(isinstance(a, str) and a.strip() for a in row["aliases"])
    assert isinstance(row["parameters"], int) and not isinstance(row["parameters"], bool)
    assert row["parameters"] > 0
    assert isinstance(row["as_of"], dt.date) and not isinstance(row["as_of"], dt.datetime)
    assert row["as_of"] <= dt.date.today()
    config = row["config"]
    assert isinstance(config.get("model_type"), str)
    assert isinstance(config.get("tie_word_embeddings"), bool), "tie_word_embeddings must be explicit"


def test_ids_unique():
    assert len(IDS) == len(set(IDS))


def test_aliases_unambiguous():
    owner: dict[str, str] = {}
    ids = {i.lower(): i for i in IDS}
    for row in ROWS:
        for alias in row["aliases"]:
            key = alias.lower()
            assert key not in owner or owner[key] == row["id"], f"{alias!r}: {owner.get(key)} and {row['id']}"
            assert key not in ids or ids[key] == row["id"], f"alias {alias!r} of {row['id']} is the id of {ids[key]}"
            owner[key] = row["id"]
        assert len({a.lower() for a in row["aliases"]}) == len(row["aliases"]), f"duplicate alias in {row['id']}"
