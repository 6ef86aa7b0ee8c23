"""Today's run takes the fastest layout that fits today; the planned growth asks only that the same GPUs hold the
grown model with some layout (issue #27: growth is planned, not a brake on today's run). Before, every layout had
to hold the grown model as it is: a 1.1B pre-training with model_scale 3 on 8 x B200 ran at micro-batch 4 (41.6 h)
where the project's 16 fits today with room to spare (37.7 h, 10 % sooner), because micro-batch 16 would not hold
the 3.3B model."""

from __future__ import annotations

import functools

from gpuplan import api
from gpuplan.schema.plan import PlanResult

PROJECT = {"name": "small-pretrain", "model": {"preset": "tinyllama-1.1b"},
           "workload": {"task": "pretrain", "sequence_length": 2048, "micro_batch_size": 16,
                        "global_batch_size": 1024, "tokens": 100_000_000_000},
           "data": {"modality": "text", "size_gb": 400},
           "goals": {"purpose": "production", "deadline_days": 14, "objective": "balanced"},
           "constraints": {"gpus": ["b200-180gb", "h200-sxm-141gb"]}}


@functools.cache
def planned(model_scale: float) -> PlanResult:
    return api.plan({**PROJECT, "growth": {"model_scale": model_scale, "data_scale": 2.0, "horizon_months": 24}})


def test_growth_does_not_slow_todays_run() -> None:
    grown, flat = planned(3.0), planned(1.0)
    g, f = grown.recommendation, flat.recommendation
    assert g is not None and f is not None
    assert (g.gpu_id, g.gpus_per_server, g.servers) == (f.gpu_id, f.gpus_per_server, f.servers)
    assert g.layout == f.layout and g.layout.micro_batch_size == 16  # the project's own, which fits today
    assert g.time is not None and f.time is not None and g.time.wall_hours == f.time.wall_hours


def test_the_grown_model_is_run_as_a_leaner_layout_the_plan_names() -> None:
    c = planned(3.0).recommendation
    assert c is not None and c.grown_layout is not None and c.fits_with_growth
    lay = c.grown_layout
    assert (lay.micro_batch_size or 0) < 16 or lay.gradient_checkpointing or lay.zero > c.layout.zero
    assert (lay.dp or 0) * lay.tp * lay.pp == c.gpus_per_server * c.servers
    line = next(r for r in c.reasons if "after the planned growth" in r)
    assert "the grown model run as" in line and "this layout would need" in line
    # the growth view's x1 row is the grown model in that layout
    row = next(r for r in planned(3.0).growth_view if (r.gpu_id, r.factor) == (c.gpu_id, 1.0))
    assert row.device_bytes == c.grown_device_bytes and row.fits
