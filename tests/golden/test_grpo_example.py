"""Golden answers for the GRPO example (issue #31), `qwen2.5-7b-grpo`: verl's DAPO recipe for Qwen2.5-Math-7B
(volcengine/verl recipe/dapo/test_dapo_7b_math.sh @3592251: 512 prompts x 16 responses per step, 2,048 + 8,192
tokens, kl off, 8 x 8 GPUs, actor_rollout_ref.rollout.gpu_memory_utilization=0.80), estimated on 64 H100s
(ZeRO-3)."""

from __future__ import annotations

import functools
from typing import Any

import pytest
import yaml

from gpuplan.api import estimate, plan
from gpuplan.catalog.hardware import builtin_catalog
from gpuplan.catalog.loader import example_path, load_overheads, resolve_model
from gpuplan.catalog.serving import load_serving
from gpuplan.core.sizing.engine_memory import admitted_memory, estimate_serving_memory
from gpuplan.core.sizing.params import count_params
from gpuplan.errors import GpuplanError
from gpuplan.schema.project import Layout, ModelRef, Workload
from gpuplan.schema.result import EstimateResult

CATALOG = builtin_catalog()
#: Qwen2.5-7B: 7.62e9 parameters (config.json arithmetic: models.toml qwen2.5-7b)
PARAMS = 7.616e9
GIB = 2**30


def example(**grpo: Any) -> dict[str, Any]:
    project = yaml.safe_load(example_path("qwen2.5-7b-grpo").read_text())
    project["workload"]["grpo"] = {**project["workload"]["grpo"], **grpo}
    return project


@functools.cache
def estimated(kl: bool = False, group_size: int = 16) -> EstimateResult:
    return estimate(example(kl=kl, group_size=group_size), catalog=CATALOG)


def test_kl_off_needs_less_memory_than_kl_on_by_the_references_weights() -> None:
    # kl on holds a frozen bf16 reference through both phases, sharded as the policy's weights are (ZeRO-3 over
    # 64 ranks: 2 x 7.62e9 / 64 = 0.22 GiB per GPU); kl off holds none: the peaks differ by exactly that part
    on, off = estimated(kl=True).memory, estimated(kl=False).memory
    assert off.reference_bytes == 0
    assert on.reference_bytes == pytest.approx(2 * PARAMS / 64, rel=0.01)
    assert on.peak_phase == off.peak_phase
    assert on.peak_tensor_bytes - off.peak_tensor_bytes == on.reference_bytes


def test_the_recipe_fits_an_h100_with_the_engine_in_its_share() -> None:
    # verl runs this recipe on 8 x 8 80 GB GPUs with the engine at 0.80 of each GPU: vLLM's KV cache is what the
    # share leaves after the engine's bf16 weights (2 x 7.62e9 = 14.2 GiB), temporaries and graphs, and the
    # sequences that do not fit wait in its queue. Before the share was modelled gpuplan held all 128 sequences of
    # each replica (70.0 GiB of KV cache, 87 GiB per GPU: over an H100)
    m = estimated().memory
    share = 0.8 * 79.6 * GIB  # the catalog's H100 SXM: 79.6 GiB
    assert m.peak_phase == "rollout"
    assert m.rollout_weights_bytes == pytest.approx(2 * PARAMS, rel=0.01)
    # the engine's parts (its weights, KV cache, prefill temporaries, graphs) fill its share
    assert m.kv_cache_bytes + m.rollout_weights_bytes + m.activations_bytes + m.other_bytes == pytest.approx(
        share, rel=0.001)
    assert m.kv_cache_bytes < 128 * 10_240 * 57_344  # fewer than every sequence at once
    assert m.gradients_bytes == 0  # freed by the optimizer step before the rollout
    assert m.fits


def test_the_sequences_that_do_not_fit_run_as_waves() -> None:
    # 10,240 tokens x 57,344 bytes (28 layers x 4 KV heads x 128 x 2 x 2 bytes) = 0.55 GiB per sequence at its
    # full length: the share's ~48 GiB of KV cache hold 87 of the replica's 128: two waves, said in a note
    r = estimated()
    waves = [n for n in r.notes if n.code == "grpo-rollout-waves"]
    assert len(waves) == 1 and "87 of each replica's 128" in waves[0].message and "2 waves" in waves[0].message


def test_a_smaller_share_lengthens_the_step_and_too_small_a_share_cannot_start() -> None:
    half, recipe = estimate(example(gpu_memory_utilization=0.4), catalog=CATALOG), estimated()
    assert half.time is not None and recipe.time is not None
    assert half.time.step_seconds > recipe.time.step_seconds
    # 0.15 x 79.6 GiB = 11.9 GiB: less than the engine's 14.2 GiB of weights
    tiny = estimate(example(gpu_memory_utilization=0.15), catalog=CATALOG)
    assert any(n.code == "grpo-engine-cannot-start" for n in tiny.notes)


def test_the_rollout_engine_is_gpuplans_serving_estimate_of_the_same_engine() -> None:
    # the same vLLM engine serving 128 requests of 2,048 + 8,192 tokens on one GPU with 0.8 of it: the same weights,
    # and the KV cache of the requests its share admits (engine_memory.admitted_memory), within the two sequences
    # (1.1 GiB) the serving estimate also takes from the share for the CUDA context and the allocator's reserve,
    # which a colocated engine shares with the trainer's process (counted once, in the trainer's part)
    arch = resolve_model(ModelRef(preset="qwen2.5-7b")).arch
    w = Workload(task="inference", batch_size=128, context_length=2048, output_tokens=8192)
    p, oh, engine = count_params(arch), load_overheads(), load_serving().engine
    served = estimate_serving_memory(arch, p, w, Layout(), 1, oh, engine)
    m = estimated().memory
    assert m.rollout_weights_bytes == served.breakdown.weights_bytes
    _, holds = admitted_memory(arch, p, w, Layout(), 1, oh, engine, int(0.8 * 79.6 * GIB))
    per_sequence = served.breakdown.kv_cache_bytes / 128
    assert holds <= m.kv_cache_bytes // per_sequence <= holds + 2


def test_memory_never_shrinks_with_the_group() -> None:
    # the engine takes its share whatever the group: a larger group waits longer in the queue, holds no less
    big, small = estimated(group_size=32), estimated(group_size=16)
    assert big.memory.peak_tensor_bytes >= small.memory.peak_tensor_bytes
    assert big.time is not None and small.time is not None and big.time.step_seconds > small.time.step_seconds


def test_the_step_says_where_its_time_goes() -> None:
    t = estimated().time
    assert t is not None
    parts = t.step_breakdown_s
    assert {"rollout_prefill", "rollout_decode", "log_probs", "matmul"} <= set(parts)
    assert sum(parts.values()) == pytest.approx(t.step_seconds, rel=1e-9)
    # 8 k-token responses: decoding is the largest part of the step
    assert max(parts, key=lambda k: parts[k]) == "rollout_decode"
    # the recipe's 200 steps of 512 prompts
    assert t.steps == 200


def test_the_plan_recommends_servers_that_hold_the_rollout() -> None:
    result = plan(example_path("qwen2.5-7b-grpo"), catalog=CATALOG)
    rec = result.recommendation
    assert rec is not None and rec.time is not None
    assert rec.fits and rec.memory.phase_peaks_bytes["rollout"] <= rec.memory.peak_tensor_bytes
    assert "rollout_decode" in rec.time.step_breakdown_s


@pytest.mark.parametrize("workload, says", [
    ({"task": "lora", "grpo": {"group_size": 8}}, "grpo settings only apply to task grpo"),
    ({"task": "grpo", "sequence_length": 4096}, "drop sequence_length"),
    ({"task": "grpo", "lora": {"rank": 8}}, "need grpo.method: lora"),
    ({"task": "grpo", "grpo": {"group_sise": 8}}, "did you mean 'group_size'"),
])
def test_bad_grpo_settings_say_what_to_change(workload: dict[str, Any], says: str) -> None:
    project = {"name": "x", "model": {"preset": "qwen2.5-7b"}, "workload": workload}
    with pytest.raises(GpuplanError) as err:
        estimate(project, catalog=CATALOG)
    assert says in str(err.value)


def test_fit_and_export_say_they_do_not_answer_grpo_yet() -> None:
    # fit's knobs (micro-batch, sequence, model) are not a GRPO step's, whose memory the rollout sets; a training
    # launcher (deepspeed) is not a GRPO job: both refuse with what to do instead (export --to trl or verl)
    from gpuplan.api import fit
    from gpuplan.catalog.loader import load_project
    from gpuplan.core.export.targets import export

    with pytest.raises(GpuplanError, match="try them with gpuplan estimate"):
        fit(example_path("qwen2.5-7b-grpo"), gpu="h100-sxm-80gb", gpus=64, catalog=CATALOG)
    rec = plan(example_path("qwen2.5-7b-grpo"), catalog=CATALOG).recommendation
    assert rec is not None
    with pytest.raises(GpuplanError, match="verl or TRL job.*trl, verl"):
        export(load_project(example_path("qwen2.5-7b-grpo"))[0], rec, "deepspeed")


def separate(rollout_gpus: int, gpus: int = 64) -> EstimateResult:
    project = example(placement="separate", rollout_gpus=rollout_gpus, gpu_memory_utilization=None)
    project["hardware"] = {**project["hardware"], "gpus": gpus}
    return estimate(project, catalog=CATALOG)


def test_separate_pools_hold_each_its_own_and_time_the_weight_sync() -> None:
    # 16 of 64 H100s for the engine (vLLM alone there, at its own 0.9 share), 48 for the trainer (ZeRO-3). The
    # weights' broadcast crosses servers: the NIC's 50 GB/s per GPU (data/speed.toml hopper network_gbs_per_gpu, 400
    # Gb/s NDR) x 0.75 (link_efficiency): 2 x 7.62e9 bytes / 37.5e9 = 0.41 s; the engine's GPUs count in GPU-hours
    r = separate(16)
    assert r.hardware.gpus == 48 and any(n.code == "grpo-pools" for n in r.notes)
    m, t = r.memory, r.time
    assert t is not None
    assert m.peak_phase == "rollout" and m.weights_bytes == 0 and m.optimizer_bytes == 0  # the engine's pool alone
    assert m.rollout_weights_bytes == pytest.approx(2 * PARAMS, rel=0.01)
    assert m.device_bytes <= 0.9 * 79.6 * GIB + 1  # vLLM's share holds all it uses there
    assert t.step_breakdown_s["weight_sync"] == pytest.approx(2 * PARAMS / (50e9 * 0.75), rel=0.01)
    assert t.gpu_hours == pytest.approx(t.wall_hours * 64, rel=1e-9)  # type: ignore[operator]


def test_in_one_server_the_weights_go_over_nvlink() -> None:
    # 2 + 6 H100s of one server: NVLink's 900 GB/s both ways, 450 one way x 0.75: 2 x 7.62e9 / 337.5e9 = 0.045 s
    t = separate(2, gpus=8).time
    assert t is not None
    assert t.step_breakdown_s["weight_sync"] == pytest.approx(2 * PARAMS / (450e9 * 0.75), rel=0.01)


def test_fewer_engine_gpus_lengthen_the_rollout() -> None:
    few, more = separate(8).time, separate(32).time
    assert few is not None and more is not None
    rollout = [t.step_breakdown_s["rollout_decode"] + t.step_breakdown_s["rollout_prefill"] for t in (few, more)]
    assert rollout[0] > rollout[1]


def test_separate_pools_need_the_engines_share_of_gpus() -> None:
    with pytest.raises(GpuplanError, match="rollout_gpus"):
        estimate(example(placement="separate"), catalog=CATALOG)
    with pytest.raises(GpuplanError, match="leave the trainer none"):
        separate(64)


def test_the_plan_says_which_placement_is_faster_and_where_the_step_goes() -> None:
    result = plan(example_path("qwen2.5-7b-grpo"), catalog=CATALOG)
    notes = [n.message for n in result.notes if n.code == "grpo-placement"]
    assert len(notes) == 1 and "colocated" in notes[0] and "rollout" in notes[0] and "training" in notes[0]
    assert "separate pools" in notes[0]


def test_a_known_mean_response_shortens_the_step_but_the_longest_still_bounds_it() -> None:
    # the recipe's 8,192-token cap with responses of 2,000 tokens on average: the rollout decodes the mean at the
    # engine's batch and the longest response's tail alone; the training pass computes the mean sequence
    capped, mean = estimated().time, estimate(example(mean_response_length=2000), catalog=CATALOG).time
    at_mean = estimate(example(response_length=2000), catalog=CATALOG).time
    assert capped is not None and mean is not None and at_mean is not None
    def rollout(t: Any) -> float:
        return float(t.step_breakdown_s["rollout_prefill"] + t.step_breakdown_s["rollout_decode"])

    assert rollout(at_mean) < rollout(mean) < rollout(capped)  # the tail: between all at the mean and all capped
    assert mean.step_seconds < capped.step_seconds
    # memory keeps the longest sequence
    assert estimate(example(mean_response_length=2000), catalog=CATALOG).memory.peak_tensor_bytes == \
        estimated().memory.peak_tensor_bytes


def test_a_mean_over_the_longest_is_refused() -> None:
    with pytest.raises(GpuplanError, match="mean_response_length"):
        estimate(example(mean_response_length=9000), catalog=CATALOG)
