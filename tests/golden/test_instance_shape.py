"""Issue 28: an 8-GPU server is rented only from providers whose instances hold 8 GPUs. The built-in B200 quotes
include Lambda's 1-GPU instance (3.99 USD/GPU-h, `instance_gpus = 1`): the 8 x B200 fine-tune of the built-in
example leaves it out of its cloud median and says so, where a 1-GPU configuration keeps it."""

from __future__ import annotations

from gpuplan import api
from gpuplan.catalog.loader import example_path


def test_an_8_gpu_server_is_not_priced_from_1_gpu_instances() -> None:
    rec = api.plan(example_path("llama3-8b-full-finetune")).recommendation
    assert rec is not None and rec.gpu_id == "b200-180gb" and rec.gpus_per_server == 8
    cloud = next(d for d in rec.deployments if d.provider == "cloud on-demand")
    assert "Lambda 1x" not in cloud.providers and "Lambda 8x" in cloud.providers
    line = next(a for a in cloud.assumptions if a.startswith("instance shape"))
    assert "1 x 8 GPU(s) on one machine each" in line and "Lambda 1x: 1 GPU(s)" in line
