"""Task dpo (issue #31): the policy trains as a fine-tune on the chosen and rejected sequences together, with a
frozen reference held (full), not held (LoRA: the base with adapters off) or not run (precomputed)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from gpuplan import api
from gpuplan.catalog.loader import parse_project, resolve_model
from gpuplan.core.sizing.flops import forward_flops, training_flops
from gpuplan.core.sizing.params import count_params
from gpuplan.core.sizing.preference import policy_workload
from gpuplan.errors import InputError
from gpuplan.schema.project import Workload

GIB = 2**30


def project(task: str = "dpo", *, dpo: dict[str, Any] | None = None, mb: int = 1, seq: int = 1024,
            gpus: int = 8, zero: int = 3, lora: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    w: dict[str, Any] = {"task": task, "micro_batch_size": mb, "sequence_length": seq,
                         "gradient_checkpointing": True, **extra}
    if dpo is not None:
        w["dpo"] = dpo
    if lora is not None:
        w["lora"] = lora
    return {"name": "t", "model": {"preset": "llama-3.1-8b"}, "workload": w,
            "hardware": {"gpu": "h100-sxm-80gb", "gpus": gpus, "layout": {"zero": zero}}}


def test_dpo_section_only_with_task_dpo() -> None:
    with pytest.raises(ValidationError, match="dpo settings only apply to task dpo"):
        Workload.model_validate({"task": "full-finetune", "dpo": {"method": "full"}})
    with pytest.raises(ValidationError, match="need dpo.method: lora"):
        Workload.model_validate({"task": "dpo", "lora": {"rank": 8}})
    with pytest.raises(ValidationError):
        Workload.model_validate({"task": "dpo", "dpo": {"method": "qlora"}})


def test_bad_dpo_key_is_a_clear_error() -> None:
    with pytest.raises(InputError) as exc:
        api.estimate(project(dpo={"method": "ful"}))
    assert "dpo" in str(exc.value) and "full" in str(exc.value)


def test_policy_view_doubles_the_batches_and_keeps_the_method() -> None:
    w = Workload.model_validate({"task": "dpo", "dpo": {"method": "lora"}, "micro_batch_size": 3,
                                 "global_batch_size": 12})
    v = policy_workload(w)
    assert (v.task, v.micro_batch_size, v.global_batch_size) == ("lora", 6, 24)
    full = policy_workload(Workload.model_validate({"task": "dpo"}))
    assert full.task == "full-finetune" and full.dpo is not None and full.dpo.reference == "model"


def test_full_dpo_holds_the_reference_sharded_like_the_weights() -> None:
    params = count_params(resolve_model(parse_project(project()).model, None).arch).total
    for zero, gpus, shard in ((3, 8, 8), (2, 8, 1), (0, 1, 1)):
        r = api.estimate(project(zero=zero, gpus=gpus))
        # the reference's bf16 weights, divided by dp under ZeRO-3 as the policy's are (rounded to 512 B blocks)
        assert r.memory.reference_bytes == pytest.approx(2 * params / shard, abs=512)


def test_lora_and_precomputed_need_no_reference_copy() -> None:
    lora = api.estimate(project(dpo={"method": "lora"}, zero=0, gpus=1))
    pre = api.estimate(project(dpo={"method": "full", "reference": "precomputed"}))
    assert lora.memory.reference_bytes == 0 and pre.memory.reference_bytes == 0


def test_dpo_shows_its_own_task_and_pairs() -> None:
    r = api.estimate(project(mb=2, global_batch_size=64))
    assert r.workload["task"] == "dpo" and r.workload["micro_batch_size"] == 2
    assert r.workload["global_batch_size"] == 64
    assert any(n.code == "dpo" for n in r.notes)


def test_full_dpo_is_its_precomputed_self_plus_the_reference() -> None:
    """A held reference adds its weights to the peak, to the byte; DPO's loss over log-probabilities holds one more
    fp32 logits-sized gradient in backward than the same SFT's cross-entropy (traced: tests/trace/test_dpo_trace.py),
    so a precomputed-reference DPO needs at least the SFT of both sequences."""
    dpo = api.estimate(project(mb=2))
    pre = api.estimate(project(mb=2, dpo={"reference": "precomputed"}))
    sft = api.estimate(project("full-finetune", mb=4))
    assert dpo.memory.peak_tensor_bytes - pre.memory.peak_tensor_bytes == dpo.memory.reference_bytes > 0
    assert pre.memory.peak_tensor_bytes >= sft.memory.peak_tensor_bytes


def test_reference_forward_adds_two_flops_per_parameter_per_token() -> None:
    arch = resolve_model(parse_project(project()).model, None).arch
    p = count_params(arch)
    fwd = forward_flops(arch, p, 1024)
    sft = training_flops(fwd, frozen_base=False, checkpointing=False)
    dpo = training_flops(fwd, frozen_base=False, checkpointing=False, reference_forward=True)
    assert dpo.model_per_token - sft.model_per_token == pytest.approx(fwd.forward / fwd.tokens)
    # about 2 x parameters (the matmuls of every weight but the embedding, plus attention's)
    assert 1.7 * p.total < dpo.model_per_token - sft.model_per_token < 2.3 * p.total
    est = api.estimate(project(mb=1))
    pre = api.estimate(project(mb=1, dpo={"reference": "precomputed"}))
    assert est.compute.flops_per_token > pre.compute.flops_per_token


def test_dpo_step_is_slower_than_the_same_sft_step() -> None:
    dpo = api.estimate(project(mb=2, tokens=1e8))
    sft = api.estimate(project("full-finetune", mb=4, tokens=1e8))
    assert dpo.time is not None and sft.time is not None
    assert dpo.time.step_seconds > sft.time.step_seconds
    # reference forward = 1/3 of the policy's 6N: the step grows by less than that share plus the fixed parts
    assert dpo.time.step_seconds < sft.time.step_seconds * 1.4


def test_fit_counts_the_micro_batch_in_pairs() -> None:
    """`fit`'s largest DPO micro-batch is in pairs: it fits, one more pair does not (no accumulation, as fit runs)."""
    proj = project(mb=1, seq=4096)
    proj["workload"]["gradient_checkpointing"] = True
    res = api.fit(proj, gpu="h100-sxm-80gb")
    best = next(lim.largest for lim in res.limits if lim.setting == "micro_batch_size" and lim.gradient_checkpointing)
    assert best is not None and best >= 1

    def device(pairs: int) -> int:
        w = {**proj["workload"], "micro_batch_size": pairs}
        return api.estimate({**proj, "workload": w}).memory.device_bytes

    assert device(int(best)) <= res.usable_bytes < device(int(best) + 1)


def test_dpo_of_a_model_without_a_language_head_is_a_clear_error() -> None:
    proj = project()
    proj["model"] = {"preset": "bert-base-uncased"}
    with pytest.raises(InputError, match="dpo tunes a language model"):
        api.estimate(proj)
    with pytest.raises(InputError, match="dpo tunes a language model"):
        api.plan(proj)
