"""GRPO with separate pools (`workload.grpo.placement: separate`): the rollout engine on GPUs of its own, as
OpenRLHF, NeMo RL (`policy.generation.colocated.enabled: false`) and TRL's server mode (`vllm_mode: server`, `trl
vllm-serve`) run it, the trainer on the rest of `hardware.gpus`.

Memory: each pool holds its own. The trainer's GPUs hold the training step (and the reference with kl), no engine;
the engine's GPUs hold vLLM alone at its share (`grpo.gpu_memory_utilization`, by default vLLM's own 0.9: nothing
else shares them): its weights, temporaries, CUDA graphs and KV cache. The peak per GPU is the larger pool's.

Time per step (synchronous, on-policy: the trainer waits for the rollout, the engine for the new weights): the
rollout on the engine's GPUs (every replica's sequences in waves of those its KV cache holds, as colocated), the
weight sync, the log-probability forwards and the training pass on the trainer's GPUs. The weight sync is an NCCL
broadcast of the policy's 16-bit weights from the trainer to the engine (verl's one-step-off recipe broadcasts
tensor by tensor, docs/advance/one_step_off.md "NCCL Parameter Synchronization"; OpenRLHF and NeMo RL likewise
over NCCL): 2 bytes x parameters over the link between the pools, the scale-up link (NVLink) when both pools share
one server, else the network, at the speed model's link figures (core/sizing/rates.link_gbs: the GPU's interconnect
from data/gpus.toml, the generation's network per GPU from data/speed.toml). Pure."""

from __future__ import annotations

from gpuplan.core.sizing.rates import link_gbs
from gpuplan.errors import InputError
from gpuplan.schema.estimate import Note
from gpuplan.schema.hardware import Gpu
from gpuplan.schema.project import GrpoSpec, Hardware, Layout, Workload
from gpuplan.schema.serving import EngineDefaults
from gpuplan.schema.speed import SpeedModel

#: the policy's weights as the engine loads them: 16-bit
SYNC_BYTES_PER_PARAM = 2
#: the colocated engine's share of each GPU when none is given: verl's default
COLOCATED_SHARE = 0.5


def engine_utilization(spec: GrpoSpec, engine: EngineDefaults) -> float:
    """The engine's share of each of its GPUs: grpo.gpu_memory_utilization, else verl's 0.5 colocated and vLLM's
    own default (data/serving.toml) on GPUs of its own."""
    if spec.gpu_memory_utilization is not None:
        return spec.gpu_memory_utilization
    return COLOCATED_SHARE if spec.placement == "colocated" else engine.gpu_memory_utilization


def separate(spec: GrpoSpec | None) -> bool:
    return spec is not None and spec.placement == "separate"


def pool_gpus(spec: GrpoSpec, total: int) -> tuple[int, int]:
    """(the trainer's GPUs, the engine's) of `total`: the engine has grpo.rollout_gpus."""
    if spec.rollout_gpus is None:
        raise InputError(["workload", "grpo", "rollout_gpus"], "placement separate needs the engine pool's GPUs "
                         "(grpo.rollout_gpus; the trainer has the rest of hardware.gpus), or `gpuplan plan` to "
                         "choose the split", "a number of GPUs below hardware.gpus")
    if spec.rollout_gpus >= total:
        raise InputError(["workload", "grpo", "rollout_gpus"], f"the engine pool's {spec.rollout_gpus} GPUs leave "
                         f"the trainer none of hardware.gpus ({total})", f"1 to {total - 1}")
    return total - spec.rollout_gpus, spec.rollout_gpus


def trainer_pool(hw: Hardware, w: Workload) -> tuple[Hardware, list[Note]]:
    """The hardware the trainer runs on: `hw` less the engine's pool with placement separate, else `hw`; a note
    says the split."""
    spec = w.grpo
    if not separate(spec):
        return hw, []
    assert spec is not None
    trainer, engine = pool_gpus(spec, hw.gpus)
    mp = hw.layout.tp * hw.layout.pp
    if trainer % mp:
        raise InputError(["hardware", "layout"], f"the trainer's {trainer} GPUs (hardware.gpus {hw.gpus} less "
                         f"grpo.rollout_gpus {engine}) are not a multiple of tp x pp ({mp})",
                         f"rollout_gpus leaving a multiple of {mp}")
    tp = spec.rollout_tp or 1
    if engine % tp:
        raise InputError(["workload", "grpo", "rollout_tp"], f"the engine pool's {engine} GPUs are not a multiple "
                         f"of rollout_tp ({tp})", f"a divisor of {engine}")
    return hw.model_copy(update={"gpus": trainer}), [Note(code="grpo-pools", message=(
        f"GRPO (separate pools): the trainer on {trainer} GPU(s), the vLLM engine on {engine} of its own "
        f"(tensor parallel {tp}); the hardware shown is the trainer's, the memory the larger pool's per GPU (the "
        "engine's: phase rollout)"))]


def engine_pool_layout(spec: GrpoSpec) -> Layout:
    return Layout(tp=spec.rollout_tp or 1)


def sync_seconds(params: int, gpu: Gpu, sm: SpeedModel, total_gpus: int, node: int) -> float:
    """Seconds to broadcast the policy's 16-bit weights from the trainer's pool to the engine's: over the scale-up
    link when both pools fit one server (`node` GPUs), else over the network (rates.link_gbs)."""
    bw = link_gbs(gpu, sm, total_gpus, node) * 1e9
    return SYNC_BYTES_PER_PARAM * params / bw if bw > 0 else 0.0


__all__ = ["COLOCATED_SHARE", "SYNC_BYTES_PER_PARAM", "engine_pool_layout", "engine_utilization", "pool_gpus",
           "separate", "sync_seconds", "trainer_pool"]
