"""The plan never changes a setting the project states without saying so (issue #27): a candidate that runs
without the gradient checkpointing the project asks for, or with another micro-batch, says which, and what the
project's own setting would take on the same layout."""

from __future__ import annotations

import re

from gpuplan.api import plan

PROJECT = {"name": "llama8b-full-ckpt", "model": {"preset": "llama-3.1-8b"},
           "workload": {"task": "full-finetune", "precision": "bf16-mixed", "micro_batch_size": 1,
                        "sequence_length": 4096, "gradient_checkpointing": True, "global_batch_size": 64,
                        "tokens": 5.0e8},
           "goals": {"purpose": "experiment", "objective": "time", "deadline_days": 14}}


def test_every_departure_from_the_projects_settings_is_said() -> None:
    result = plan(PROJECT, top=100)
    departed = 0
    for c in result.candidates:
        said = " ".join(c.reasons)
        lay = c.layout
        if lay.gradient_checkpointing is False:
            departed += 1
            assert "gradient checkpointing off (project: on)" in said, c.gpu_id
            m = re.search(r"the project's settings need ([\d,.]+) GiB per GPU here", said)
            assert m is not None, said
            # recomputing saves activation memory: the project's setting never needs more on the same layout
            assert float(m.group(1).replace(",", "")) <= c.memory.device_bytes / 2**30 + 0.05
        else:
            assert "gradient checkpointing" not in said
        if lay.micro_batch_size != 1:
            assert f"micro-batch {lay.micro_batch_size} (project: 1)" in said, c.gpu_id
    assert departed, "the fastest candidates of this project run without recomputation: the test must see one"


def test_a_setting_the_project_leaves_out_is_no_departure() -> None:
    quiet = {**PROJECT, "workload": {k: v for k, v in PROJECT["workload"].items()
                                     if k not in ("gradient_checkpointing", "micro_batch_size")}}
    for c in plan(quiet, top=20).candidates:
        assert not any("departs from the project" in r for r in c.reasons), c.gpu_id
