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


VIT = {"name": "vit-mb128", "model": {"preset": "vit-large-patch16-224"},
       "workload": {"task": "pretrain", "precision": "bf16-mixed", "micro_batch_size": 128, "image_size": 224,
                    "epochs": 90, "global_batch_size": 1024},
       "data": {"samples": 1281167, "size_gb": 150, "modality": "image"},
       "goals": {"purpose": "experiment", "objective": "time", "deadline_days": 21}}


def _own_hours(project: dict, gpu: str, gpus: int, zero: int, tp: int, pp: int, ckpt: bool | None) -> float:
    """The project's own settings timed on the candidate's GPUs and layout (`gpuplan estimate`)."""
    w = dict(project["workload"])
    if ckpt is not None:
        w["gradient_checkpointing"] = ckpt
    own = {**project, "workload": w,
           "hardware": {"gpu": gpu, "gpus": gpus, "layout": {"zero": zero, "tp": tp, "pp": pp}}}
    from gpuplan.api import estimate

    t = estimate(own).time
    assert t is not None and t.wall_hours is not None
    return t.wall_hours


def test_a_departure_is_never_slower_than_the_projects_own_micro_batch() -> None:
    """"The fastest that fits" must be: a ViT-L/16 run at the project's 128 images per micro-batch (37.0 GiB of
    160.5 usable on a B200, 2.50 h) was planned at 64 (2.81 h), because the search tried micro-batches up to 64
    only; a project's own micro-batch, and powers of two up to it, are tried now."""
    result = plan(VIT, top=12)
    one = next(c for c in result.candidates if (c.gpu_id, c.gpus_per_server, c.servers) == ("b200-180gb", 8, 1))
    assert one.layout.micro_batch_size == 128, one.layout
    forced = [c for c in result.candidates if "data-parallel ranks leave" in " ".join(c.reasons)]
    assert all(c.layout.dp * 128 > 1024 for c in forced)  # 16 B200s: 1,024 images a step leave 64 each
    for c in result.candidates:
        said = " ".join(c.reasons)
        if "within the usable" not in said or "data-parallel ranks leave" in said:
            continue  # the project's settings fit, on as many ranks as its batch allows: no slower then
        lay = c.layout
        assert c.time_hours is not None
        own = _own_hours(VIT, c.gpu_id, c.gpus_per_server * c.servers, lay.zero, lay.tp, lay.pp, None)
        assert c.time_hours <= own * (1 + 1e-9), (c.gpu_id, lay, c.time_hours, own)


def test_a_micro_batch_that_is_no_power_of_two_is_tried() -> None:
    """A project's 24 sequences per micro-batch (192 a step on 8 GPUs) of a Llama 3.2 1B pre-training: only
    powers of two were tried, so 8 x H200 ran 8 x 3 accumulation steps where 24 fits; on 16 GPUs each rank's 12
    ran as 3 x 4. Every divisor of a rank's share is tried now."""
    small = {"name": "mb24", "model": {"preset": "llama-3.2-1b"},
             "workload": {"task": "pretrain", "precision": "bf16-mixed", "micro_batch_size": 24,
                          "sequence_length": 1024, "global_batch_size": 192, "tokens": 2.0e9,
                          "gradient_checkpointing": False},
             "goals": {"purpose": "experiment", "objective": "time", "deadline_days": 14}}
    result = plan(small, top=40)
    h200 = {c.gpus_per_server * c.servers: c.layout.micro_batch_size for c in result.candidates
            if c.gpu_id == "h200-sxm-141gb"}
    assert h200.get(8) == 24 and h200.get(16) == 12, h200
