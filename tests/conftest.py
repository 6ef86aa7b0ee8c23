"""Shared fixtures: paths to the real Hugging Face configs in ../shared/hf-configs (read-only); the date every plan
of the suite is made for."""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path

import pytest

#: the date the suite's plans are made for, whatever day it runs (prices age against it): set for this process and
#: every server or command it starts (gpuplan.clock.AS_OF_ENV), so that no result depends on the calendar
PLAN_DATE = datetime.date(2026, 12, 1)
os.environ["GPUPLAN_AS_OF"] = PLAN_DATE.isoformat()

ROOT = Path(__file__).resolve().parents[1]
HF_CONFIGS = ROOT.parent / "shared" / "hf-configs"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def hf_config(name: str) -> dict:
    """A real config.json: from ../shared/hf-configs, else the copy in tests/fixtures/hf-configs."""
    for folder in (HF_CONFIGS, FIXTURES / "hf-configs"):
        path = folder / f"{name}.json"
        if path.exists():
            return json.loads(path.read_text())
    pytest.skip(f"{name}.json not available")


@pytest.fixture
def llama3_8b() -> dict:
    return hf_config("llama-3-8b")
