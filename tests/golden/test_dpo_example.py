"""Golden answers for the DPO example (issue #31), `llama3-8b-dpo`: the alignment-handbook's Zephyr DPO recipe
(huggingface/alignment-handbook, recipes/zephyr-7b-beta/dpo/config_full.yaml @19f0345: ZeRO-3 on 8 GPUs of 80 GB,
8 pairs per GPU, max_length 1024, gradient checkpointing, bf16) applied to Llama 3.1 8B. Each answer follows from
arithmetic on the parameters or from how TRL's DPOTrainer holds the reference (huggingface/trl@f2cd577,
trl/trainer/dpo_trainer.py: no reference model with a PEFT policy or precompute_ref_log_probs; otherwise one
prepared with the policy's DeepSpeed/FSDP config)."""

from __future__ import annotations

import functools
from typing import Any

import pytest
import yaml

from gpuplan.api import estimate, plan
from gpuplan.catalog.hardware import builtin_catalog
from gpuplan.catalog.loader import example_path
from gpuplan.schema.result import EstimateResult

CATALOG = builtin_catalog()
#: Llama 3.1 8B: 8.03e9 parameters (config.json arithmetic; tests/unit/test_params.py)
PARAMS = 8.03e9


def example(**workload: Any) -> dict[str, Any]:
    project = yaml.safe_load(example_path("llama3-8b-dpo").read_text())
    project["workload"] = {**project["workload"], **workload}
    return project


@functools.cache
def estimated(key: str) -> EstimateResult:
    variants: dict[str, dict[str, Any]] = {
        "full": {},
        "precomputed": {"dpo": {"method": "full", "reference": "precomputed"}},
        "lora": {"dpo": {"method": "lora"}, "lora": {"rank": 16}},
        "sft": {"task": "full-finetune", "dpo": None, "micro_batch_size": 16, "global_batch_size": 256},
    }
    project = example(**variants[key])
    project["workload"] = {k: v for k, v in project["workload"].items() if v is not None}
    return estimate(project, catalog=CATALOG)


def test_full_dpo_holds_the_reference_sharded_over_the_eight_gpus() -> None:
    # a bf16 copy: 2 bytes x 8.03e9 = 16.1 GB, divided by ZeRO-3's 8 data-parallel ranks: 2.0 GB per GPU
    ref = estimated("full").memory.reference_bytes
    assert ref == pytest.approx(2 * PARAMS / 8, rel=0.01)


def test_lora_and_precomputed_dpo_need_no_reference_copy() -> None:
    assert estimated("lora").memory.reference_bytes == 0
    assert estimated("precomputed").memory.reference_bytes == 0
    assert estimated("lora").memory.peak_tensor_bytes < estimated("full").memory.peak_tensor_bytes


def test_full_dpo_needs_the_reference_weights_more_than_the_same_sft() -> None:
    # the SFT of the same 16 sequences per GPU (8 pairs) on the same layout: DPO adds at least the reference
    full, sft = estimated("full").memory, estimated("sft").memory
    assert full.peak_tensor_bytes - sft.peak_tensor_bytes >= full.reference_bytes > 0


def test_the_recipe_fits_eight_80gb_gpus_as_the_handbook_says() -> None:
    # "You will require 8 GPUs (80GB of VRAM) to train the full model" (recipes/zephyr-7b-beta/README.md): the
    # recipe's own settings fit an 80 GB GPU under ZeRO-3 on 8
    m = estimated("full").memory
    assert m.fits and m.device_bytes < 80e9


def test_the_plan_recommends_a_server_like_for_sft() -> None:
    result = plan(example_path("llama3-8b-dpo"), catalog=CATALOG)
    rec = result.recommendation
    assert rec.memory.reference_bytes > 0
    assert rec.memory.device_bytes <= (1 - result.headroom) * CATALOG.gpus.rows[rec.gpu_id].memory_gib * 2**30
    assert any(n.code == "dpo" for n in result.notes)
    assert rec.time_hours is not None and rec.time_hours > 0


def test_the_reference_forward_is_a_quarter_of_the_policy_step() -> None:
    # per token: the policy's forward + backward 6 x N FLOPs, the reference's forward 2 x N: the step of a held
    # reference is about 8/6 of the precomputed one's, less what does not scale with FLOPs (communication, optimizer)
    full, pre = estimated("full").time, estimated("precomputed").time
    assert full is not None and pre is not None
    assert 1.15 < full.step_seconds / pre.step_seconds < 8 / 6 + 0.01
