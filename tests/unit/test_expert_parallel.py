"""Expert parallelism in the training step (issue #30, core/sizing/experts.py): a MoE's routed experts over `ep`
data-parallel ranks. The all-to-all's bytes by hand, where it runs (the scale-up link inside a node, the NIC across
nodes), what each GPU no longer holds, steps and reduces, and that nothing changes without it."""

from __future__ import annotations

import pytest

from gpuplan.catalog.hardware import builtin_catalog
from gpuplan.catalog.hf_config import arch_from_hf_config
from gpuplan.catalog.loader import find_preset, load_activation_table, load_speed_model
from gpuplan.core.sizing.experts import A2A_BYTES_PER_ELEMENT, expert_split
from gpuplan.core.sizing.params import count_params, expert_weights
from gpuplan.core.sizing.speed import estimate_training_speed
from gpuplan.core.sizing.step import StepWork
from gpuplan.core.sizing.step_time import GpuRates, a2a_s
from gpuplan.schema.project import Layout, Workload

SM = load_speed_model()
TABLE = load_activation_table()
GPUS = builtin_catalog().gpus.rows
QWEN3_MOE = arch_from_hf_config(find_preset("qwen3-30b-a3b", ["model"]).config)
LLAMA = arch_from_hf_config(find_preset("llama-3.1-8b", ["model"]).config)
W = Workload(task="pretrain", precision="bf16-mixed", micro_batch_size=2, sequence_length=4096, global_batch_size=64)


def step(arch, gpus: int, ep: int, gpu: str = "h100-sxm-80gb", w: Workload = W):  # type: ignore[no-untyped-def]
    p = count_params(arch)
    return estimate_training_speed(arch, p, w, Layout(zero=1), gpus, GPUS[gpu], SM, TABLE, trainable=p.total,
                                   expert_parallel=ep).time


def test_the_all_to_all_bytes_by_hand() -> None:
    """Qwen3-30B-A3B (48 MoE layers, top-8, hidden 2048), 2 x 4096 tokens per GPU: each MoE layer dispatches and
    combines every token's 8 copies in forward and in backward: 4 all-to-alls of 8,192 x 8 x 2,048 x 2 bytes."""
    moe = QWEN3_MOE.moe
    assert moe is not None and (moe.moe_layers, moe.experts_per_token, QWEN3_MOE.hidden_size) == (48, 8, 2048)
    p = count_params(QWEN3_MOE)
    kept, total, opt, a2a, calls = expert_split(QWEN3_MOE, W, p.total, p.total, 1000.0, 8, 8192, 1, False)
    assert calls == 4 * 48
    assert a2a == calls * 8192 * 8 * 2048 * A2A_BYTES_PER_ELEMENT
    away = round(expert_weights(QWEN3_MOE) * 7 / 8)
    assert (kept, total) == (p.total - away, p.total - away)
    assert opt == pytest.approx(1000.0 * kept / p.total)
    # recomputation runs the forward's two again; a LoRA's frozen experts keep its trainable count
    assert expert_split(QWEN3_MOE, W, p.total, p.total, 1.0, 8, 8192, 1, True)[4] == 6 * 48
    lora = W.model_copy(update={"task": "lora"})
    assert expert_split(QWEN3_MOE, lora, 123, p.total, 1.0, 8, 8192, 1, False)[0] == 123


def test_without_expert_parallelism_nothing_changes() -> None:
    p = count_params(QWEN3_MOE)
    one = StepWork(QWEN3_MOE, p, W, Layout(zero=1), 8, SM, TABLE, p.total)
    assert (one.a2a_bytes, one.a2a_calls, one.total_params) == (0.0, 0, p.total)
    dense = step(LLAMA, 8, 8)  # a dense model has no experts to spread
    assert dense == step(LLAMA, 8, 1)


def test_expert_parallel_trades_gradient_traffic_for_the_all_to_all() -> None:
    one, eight = step(QWEN3_MOE, 16, 1), step(QWEN3_MOE, 16, 8)
    assert eight.step_breakdown_s["optimizer"] < one.step_breakdown_s["optimizer"] / 4  # experts are most weights
    assert any("expert parallel 8" in a for a in eight.assumptions)
    assert not any("expert parallel" in a for a in one.assumptions)


def a2a(gpus: int, ep: int, gpu: str) -> float:
    p = count_params(QWEN3_MOE)
    work = StepWork(QWEN3_MOE, p, W, Layout(zero=1), gpus, SM, TABLE, p.total, expert_parallel=ep)
    rates = GpuRates(GPUS[gpu], SM, W.precision, False)
    return a2a_s(work, rates, rates.node) / work.a2a_bytes


def test_across_nodes_the_all_to_all_waits_on_the_network() -> None:
    """Seconds per byte: expert groups of 8 stay on one HGX H100 board's NVLink (450 GB/s a direction); 16 send half
    their bytes to the other node over the 400 Gb/s NIC (50 GB/s), about 5x slower per byte; on an NVL72 rack
    (GB200: 72 GPUs share NVLink) 16 do not leave the domain."""
    eff = SM.params.link_efficiency
    assert a2a(64, 8, "h100-sxm-80gb") == pytest.approx(7 / 8 / (450e9 * eff), rel=0.01)
    assert a2a(64, 16, "h100-sxm-80gb") == pytest.approx(8 / 16 / (50e9 * eff), rel=0.01)
    assert a2a(64, 16, "gb200-186gb") < a2a(64, 16, "h100-sxm-80gb") / 5
    assert step(QWEN3_MOE, 64, 16).step_seconds > step(QWEN3_MOE, 64, 8).step_seconds
