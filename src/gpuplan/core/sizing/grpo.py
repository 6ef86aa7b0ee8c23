"""Group relative policy optimisation (task grpo), colocated, as the sizing sees it. Each step:

1. rollout: a vLLM engine on the trainer's GPUs (verl's hybrid engine, TRL `vllm_mode=colocate`) generates
   `group_size` responses to each of `prompts_per_step` prompts: prefill, then decoding until the longest response
   (`response_length`, the cap every response is timed to) ends;
2. log-probabilities: the old policy's forward over every sequence (verl recomputes it each step,
   `actor.compute_log_prob`; TRL skips it when num_iterations is 1) and, with `kl`, the frozen reference's;
3. the training pass: the policy trains as `method` (a full fine-tune or LoRA) over the
   prompts_per_step x group_size sequences of prompt + response tokens, one optimizer step.

Memory has two phases. The engine is a separate inference copy of the weights (16-bit, its own allocation, not the
trainer's tensors: verl's sharding manager copies the FSDP parameters into it before each rollout, TRL loads them
into its own `LLM`) and a KV cache for every sequence the step generates, sized with gpuplan's serving estimate
for vLLM (core/sizing/serving_memory.estimate_inference). During the rollout the trainer keeps its weights, its
optimizer states and the reference (no gradients: freed by the optimizer step; no activations). After the rollout
verl puts the engine to sleep at level 1 (verl/workers/sharding_manager/fsdp_vllm.py `__exit__`:
`inference_engine.sleep(level=1)`: vLLM's weights to host memory, the KV cache discarded; vLLM docs, "Sleep Mode"),
so the training phase holds the trainer's usual memory and none of the engine's. TRL releases the same only with
`vllm_enable_sleep_mode=True` (then `llm.sleep(level=2)`, weights and KV discarded); by default it keeps the
engine's reservation (vllm_gpu_memory_utilization) through training, which this model does not size. The peak is
the larger phase.

Pure: no I/O; the engine's defaults come in as `engine`/`serving` (data/serving.toml)."""

from __future__ import annotations

import math

from gpuplan.core.sizing.batching import StepCost
from gpuplan.core.sizing.flops import forward_flops
from gpuplan.core.sizing.grpo_policy import (  # the policy's view, re-exported for callers
    POLICY_TASK,
    check_grpo,
    grpo_notes,
    grpo_spec,
    policy_project,
    policy_workload,
    reference_bytes,
    sequences_per_step,
)
from gpuplan.core.sizing.grpo_pools import engine_pool_layout, engine_utilization, separate, sync_seconds
from gpuplan.core.sizing.grpo_share import EngineShare, engine_share
from gpuplan.core.sizing.levels import reserve_and_device
from gpuplan.core.sizing.params import ParamCount
from gpuplan.core.sizing.serving import step_cost
from gpuplan.core.sizing.serving_memory import estimate_inference, prefill_budget
from gpuplan.core.sizing.step import StepWork
from gpuplan.core.sizing.step_time import GpuRates, StepTime, finish_step
from gpuplan.schema.estimate import MemoryBreakdown, MemoryEstimate, Note, Overheads
from gpuplan.schema.hardware import Gpu
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import GrpoSpec, Layout, Workload
from gpuplan.schema.serving import EngineDefaults, ServingData
from gpuplan.schema.speed import SpeedModel
from gpuplan.units import GIB

#: the reference's and the rollout engine's weights: bf16 (the policy's dtype, as verl and TRL load them)
WEIGHT_BYTES_16BIT = 2
#: segments the decoding of a response is summed over (the context grows linearly; each segment at its midpoint)
DECODE_SEGMENTS = 32
#: the overheads an engine estimate is made with where only its tensors are read (its breakdown does not depend on
#: them: the CUDA context, the allocator's reserve and NCCL's buffers enter its device total only)
TENSORS_ONLY = Overheads(cuda_context_bytes=0, cublas_workspace_bytes=0, nccl_bytes_per_communicator=0,
                         allocator_fraction_training=0.0, allocator_fraction_inference=0.0,
                         allocator_rounding_bytes=1, ddp_bucket_bytes=0)


# ------------------------------------------------------------------------------------------------ memory
def rollout_workload(spec: GrpoSpec, replicas: int) -> Workload:
    """The rollout as a serving workload: each engine replica's share of the step's sequences, all in flight."""
    per_replica = math.ceil(sequences_per_step(spec) / max(replicas, 1))
    return Workload(task="inference", batch_size=per_replica, context_length=spec.prompt_length,
                    output_tokens=spec.response_length)


def engine_layout(lay: Layout, spec: GrpoSpec | None = None) -> Layout:
    """The colocated engine's layout: `grpo.rollout_tp` tensor parallel when given (verl
    actor_rollout_ref.rollout.tensor_model_parallel_size), else the trainer's model-parallel group (tensor x
    pipeline); one replica per group; ZeRO does not shard an inference engine."""
    if spec is not None and spec.rollout_tp is not None:
        return Layout(tp=spec.rollout_tp)
    return Layout(tp=lay.tp, pp=lay.pp)


def rollout_engine_memory(arch: ModelArch, p: ParamCount, spec: GrpoSpec, lay: Layout, gpus: int, oh: Overheads,
                          engine: EngineDefaults) -> MemoryEstimate:
    """gpuplan's serving estimate of the colocated vLLM engine, per GPU: its weights, the KV cache of its replica's
    sequences (prompt + response each) all in flight, its prefill temporaries and CUDA graphs."""
    el = engine_layout(lay, spec)
    return estimate_inference(arch, p, rollout_workload(spec, replicas_of(lay, gpus, spec)), el, el.tp * el.pp, oh,
                              engine)


def replicas_of(lay: Layout, gpus: int, spec: GrpoSpec | None = None) -> int:
    """The colocated engine's replicas: one per engine layout's group of GPUs (engine_layout)."""
    el = engine_layout(lay, spec)
    return max(gpus // (el.tp * el.pp), 1)


def rollout_share(eng: MemoryEstimate, spec: GrpoSpec, lay: Layout, gpus: int, gpu_bytes: int,
                  engine: EngineDefaults) -> EngineShare:
    """The engine of `eng` (rollout_engine_memory's) in its share of a GPU of `gpu_bytes`
    (grpo.gpu_memory_utilization, grpo_pools.engine_utilization; core/sizing/grpo_share.py): the KV cache it
    allocates, the sequences it holds at once, the waves its replica's sequences run in."""
    wanted = rollout_workload(spec, replicas_of(lay, gpus, spec)).batch_size or 1
    return engine_share(eng, wanted, gpu_bytes, engine_utilization(spec, engine))


def rollout_parts(kept: MemoryBreakdown, eng: MemoryEstimate) -> MemoryBreakdown:
    """The rollout phase's tensors per GPU: the trainer's weights, optimizer states and reference (`kept`), the
    engine's weights, KV cache, temporaries and graphs; no gradients, no training activations."""
    e = eng.breakdown
    return MemoryBreakdown(weights_bytes=kept.weights_bytes, gradients_bytes=0, optimizer_bytes=kept.optimizer_bytes,
                           activations_bytes=e.activations_bytes, kv_cache_bytes=e.kv_cache_bytes,
                           other_bytes=e.other_bytes, reference_bytes=kept.reference_bytes,
                           rollout_weights_bytes=e.weights_bytes)


def trainer_kept(b: MemoryBreakdown) -> MemoryBreakdown:
    """What the trainer keeps through the rollout of its training breakdown `b`: its weights, optimizer states and
    the reference (no gradients, no activations)."""
    return MemoryBreakdown(weights_bytes=b.weights_bytes, gradients_bytes=0, optimizer_bytes=b.optimizer_bytes,
                           activations_bytes=0, kv_cache_bytes=0, other_bytes=0, reference_bytes=b.reference_bytes)


def rollout_device_bytes(parts: MemoryBreakdown, oh: Overheads, gpus: int, lay: Layout) -> tuple[int, int, int]:
    """(tensor peak, allocator reserve, device total) of the rollout phase's `parts`."""
    peak = parts.total
    reserved, device = reserve_and_device(peak, parts.activations_bytes + parts.other_bytes, oh, gpus, lay, True)
    return peak, reserved, device


ROLLOUT_NAMES = {"weights_bytes": "weights", "optimizer_bytes": "optimizer states",
                 "activations_bytes": "activations", "kv_cache_bytes": "rollout KV cache",
                 "other_bytes": "temporaries", "reference_bytes": "reference model",
                 "rollout_weights_bytes": "rollout engine weights", "gradients_bytes": "gradients"}


def with_rollout(m: MemoryEstimate, arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpus: int,
                 oh: Overheads, engine: EngineDefaults | None, gpu_bytes: int | None = None) -> MemoryEstimate:
    """The training estimate `m` of a GRPO policy's view with the rollout phase: the larger of the two is the peak
    (its breakdown shown); `engine` None (no serving data given): the rollout is not sized, and a note says so.
    `gpu_bytes`: the GPU's memory, whose share (grpo.gpu_memory_utilization) the engine takes whole, its KV cache
    holding the sequences that fit (the rest queue: waves); None (no GPU given): every sequence's KV cache held."""
    spec = w.grpo
    if spec is None:
        return m
    if engine is None:
        return m.model_copy(update={"notes": [*m.notes, Note(
            code="grpo-rollout-unsized", severity="warning",
            message="the rollout engine's memory is not counted here (no serving engine data)")]})
    if separate(spec):
        return with_engine_pool(m, arch, p, spec, oh, engine, gpu_bytes)
    eng = rollout_engine_memory(arch, p, spec, lay, gpus, oh, engine)
    kept = m.breakdown
    notes = list(m.notes)
    if gpu_bytes is None:
        parts = rollout_parts(kept, eng)
        peak, reserved, device = rollout_device_bytes(parts, oh, gpus, lay)
    else:
        share = rollout_share(eng, spec, lay, gpus, gpu_bytes, engine)
        kv = share.kv_bytes if share.starts else math.ceil(share.per_sequence)
        eng = eng.model_copy(update={"breakdown": eng.breakdown.model_copy(update={"kv_cache_bytes": kv})})
        parts = rollout_parts(kept, eng)
        kpeak, kreserved, kdevice = rollout_device_bytes(trainer_kept(kept), oh, gpus, lay)
        engine_total = share.fixed + kv  # vLLM's own allocation: no allocator reserve on top
        peak, reserved, device = kpeak + engine_total, kreserved + engine_total, kdevice + engine_total
        notes.append(share_note(share, spec, engine_utilization(spec, engine)))
    return with_phase(m, parts, peak, reserved, device, notes)


def with_phase(m: MemoryEstimate, parts: MemoryBreakdown, peak: int, reserved: int, device: int,
               notes: list[Note]) -> MemoryEstimate:
    """`m` with the rollout phase (`parts`, its tensor `peak`, allocator reserve and device total): the peak when
    it is the larger."""
    phases = {**m.phase_peaks_bytes, "rollout": peak}
    if peak <= m.peak_tensor_bytes:
        return m.model_copy(update={"phase_peaks_bytes": phases, "notes": notes})
    dump = parts.model_dump()
    dominant = ROLLOUT_NAMES[max(dump, key=lambda k: dump[k])]
    return m.model_copy(update={"breakdown": parts, "peak_phase": "rollout", "phase_peaks_bytes": phases,
                                "peak_tensor_bytes": peak, "reserved_bytes": reserved, "device_bytes": device,
                                "dominant": dominant, "notes": notes})


def with_engine_pool(m: MemoryEstimate, arch: ModelArch, p: ParamCount, spec: GrpoSpec, oh: Overheads,
                     engine: EngineDefaults, gpu_bytes: int | None) -> MemoryEstimate:
    """Separate pools (core/sizing/grpo_pools.py): `m` is the trainer's (no engine beside it); the engine's GPUs
    hold vLLM alone, at its share of a GPU of `gpu_bytes` (None: every sequence's KV cache held); the peak per GPU
    is the larger pool's (phase `rollout` when it is the engine's)."""
    el = engine_pool_layout(spec)
    gpus = spec.rollout_gpus or el.tp
    eng = estimate_inference(arch, p, rollout_workload(spec, max(gpus // el.tp, 1)), el, el.tp, oh, engine)
    notes = list(m.notes)
    e = eng.breakdown
    parts = MemoryBreakdown(weights_bytes=0, gradients_bytes=0, optimizer_bytes=0,
                            activations_bytes=e.activations_bytes, kv_cache_bytes=e.kv_cache_bytes,
                            other_bytes=e.other_bytes, rollout_weights_bytes=e.weights_bytes)
    if gpu_bytes is not None:  # alone on its GPUs, vLLM's share holds all it uses (the CUDA context too), as serving
        bpeak, breserved, base = rollout_device_bytes(parts.model_copy(update={"kv_cache_bytes": 0}), oh, el.tp, el)
        wanted = rollout_workload(spec, max(gpus // el.tp, 1)).batch_size or 1
        share = EngineShare(share=int(gpu_bytes * engine_utilization(spec, engine)), fixed=base,
                            per_sequence=e.kv_cache_bytes / wanted, wanted=wanted)
        kv = share.kv_bytes if share.starts else math.ceil(share.per_sequence)
        parts = parts.model_copy(update={"kv_cache_bytes": kv})
        notes.append(share_note(share, spec, engine_utilization(spec, engine)))
        return with_phase(m, parts, bpeak + kv, breserved + kv, base + kv, notes)
    peak, reserved, device = rollout_device_bytes(parts, oh, el.tp, el)
    return with_phase(m, parts, peak, reserved, device, notes)


def share_note(share: EngineShare, spec: GrpoSpec, utilization: float) -> Note:
    """What the engine's share holds: all the replica's sequences, waves of those that fit, or not one."""
    gib = GIB
    head = (f"rollout engine: {utilization:g} of each GPU ({share.share / gib:,.1f} GiB, "
            f"grpo.gpu_memory_utilization), {share.kv_bytes / gib:,.1f} GiB of it KV cache")
    if not share.starts:
        return Note(code="grpo-engine-cannot-start", severity="warning",
                    message=f"{head}: not one sequence of {spec.prompt_length + spec.response_length:,} tokens fits "
                            f"beside its weights, temporaries and graphs ({share.fixed / gib:,.1f} GiB); vLLM would "
                            "refuse to start: raise grpo.gpu_memory_utilization or the tensor parallelism")
    if share.waves == 1:
        return Note(code="grpo-rollout-waves", message=f"{head}: holds all {share.wanted:,} sequences of each "
                    f"replica at once ({share.holds:,} fit)")
    return Note(code="grpo-rollout-waves", message=(
        f"{head}: holds {share.in_flight:,} of each replica's {share.wanted:,} sequences at their full length; vLLM "
        f"queues the rest, so the rollout is timed as {share.waves} waves (an upper bound where responses end "
        "early: vLLM then admits queued ones as blocks free)"))


# ------------------------------------------------------------------------------------------------ time
class RolloutTime:
    """Seconds of a step's phases outside the training pass: the rollout's prefill and decoding, and the
    log-probability forwards (old policy, and the reference with kl)."""

    __slots__ = ("decode", "log_probs", "prefill")

    def __init__(self, prefill: float, decode: float, log_probs: float) -> None:
        self.prefill, self.decode, self.log_probs = prefill, decode, log_probs

    @property
    def total(self) -> float:
        return self.prefill + self.decode + self.log_probs


def rollout_seconds(arch: ModelArch, p: ParamCount, spec: GrpoSpec, lay: Layout, gpus: int, gpu: Gpu,
                    sm: SpeedModel, serving: ServingData, node: int) -> tuple[float, float]:
    """(prefill, decode) seconds of the step's rollout on each engine replica: its sequences in waves of those the
    engine runs at once (the fewer of vLLM's max_num_seqs and those whose KV cache at full length fits the engine's
    share of the GPU: grpo.gpu_memory_utilization; the rest wait in vLLM's queue), each wave prefilled in chunks of
    the token budget, then decoded a token per step per sequence until response_length (the longest response
    bounds the step), the context growing as it decodes. Each engine step is timed by the serving speed model
    (core/sizing/serving.step_cost)."""
    el = engine_layout(lay, spec)
    rw = rollout_workload(spec, replicas_of(lay, gpus, spec))
    eng = serving.engine
    cost = step_cost(arch, p, rw, el, gpu, sm, serving, node)
    large = gpu.memory_gib >= eng.large_gpu_min_gib and "a100" not in gpu.id
    budget = prefill_budget(rw, eng, large) or eng.max_num_batched_tokens_large
    max_seqs = eng.max_num_seqs_large if large else eng.max_num_seqs_small
    mem = estimate_inference(arch, p, rw, el, el.tp * el.pp, TENSORS_ONLY, eng)
    fits = rollout_share(mem, spec, lay, gpus, int(gpu.memory_gib * GIB), eng).in_flight
    n = rw.batch_size
    prompt, resp = spec.prompt_length, spec.response_length
    mean = spec.mean_response_length or resp
    # with shorter responses on average the cache holds more at once (sequences at their mean length)
    fits = min(max(int(fits * (prompt + resp) / (prompt + mean)), 1), n)
    waves = math.ceil(n / min(max_seqs, fits))
    b = n / waves
    tokens = b * prompt
    chunks = max(math.ceil(tokens / budget), 1)
    prefill = chunks * cost.seconds(0.0, tokens / chunks, 0.0, b * prompt * prompt / 2 / chunks)
    decode = 0.0
    segs = min(DECODE_SEGMENTS, mean)
    for k in range(segs):
        ctx = prompt + (k + 0.5) * mean / segs
        decode += cost.seconds(b, 0.0, b * ctx, b * ctx) * mean / segs
    return waves * prefill, waves * decode + tail_seconds(cost, prompt, mean, resp)


def tail_seconds(cost: StepCost, prompt: int, mean: int, longest: int) -> float:
    """The longest response's tail once the others ended: its tokens beyond the mean decoded alone (batch 1, each
    step a read of the weights), the step waiting for it (0 when every response runs to the longest)."""
    extra = longest - mean
    if extra <= 0:
        return 0.0
    segs = min(DECODE_SEGMENTS, extra)
    out = 0.0
    for k in range(segs):
        ctx = prompt + mean + (k + 0.5) * extra / segs
        out += cost.seconds(1.0, 0.0, ctx, ctx) * extra / segs
    return out


def mean_fraction(spec: GrpoSpec) -> float:
    """The mean sequence's share of the longest: what the training pass and the log-probabilities compute, the
    sequences packed (verl use_remove_padding, NeMo RL sequence packing) rather than padded to the longest."""
    longest = spec.prompt_length + spec.response_length
    return (spec.prompt_length + (spec.mean_response_length or spec.response_length)) / longest


def log_prob_seconds(arch: ModelArch, p: ParamCount, spec: GrpoSpec, lay: Layout, gpus: int, peak_flops: float,
                     efficiency: float, factor: float) -> float:
    """Seconds of the log-probability forwards over every sequence of the step: the old policy's, and the
    reference's with kl (LoRA's reference is the base with adapters off: a forward all the same); matmuls at the
    training pass's efficiency (`peak_flops` x `efficiency`, x the stack's `factor`), split over the GPUs."""
    seq = spec.prompt_length + (spec.mean_response_length or spec.response_length)
    fwd = forward_flops(arch, p, seq)
    passes = 1 + (1 if spec.kl else 0)
    flops = passes * sequences_per_step(spec) * fwd.forward / gpus
    return flops / (peak_flops * efficiency) * factor


def timed_step(st: StepTime, work: StepWork, r: GpuRates, arch: ModelArch, p: ParamCount, sm: SpeedModel,
               serving: ServingData | None, node: int, total_tokens: float | None) -> StepTime:
    """The training pass `st` of a GRPO policy's view (`work`) made a whole GRPO step: the rollout's prefill and
    decoding and the log-probability forwards added, throughput, wall time and GPU-hours from the sum; `st` itself
    for any other workload, or without the serving engine's data."""
    spec = work.workload.grpo
    if spec is None or serving is None:
        return st
    lay, gpus = work.layout, work.gpus
    sync, engine_gpus = 0.0, 0
    if separate(spec):  # the rollout on the engine's own GPUs, then the weights broadcast to them
        engine_gpus = spec.rollout_gpus or 1
        prefill, decode = rollout_seconds(arch, p, spec, engine_pool_layout(spec), engine_gpus, r.gpu, sm, serving,
                                          node)
        sync = sync_seconds(p.total, r.gpu, sm, gpus + engine_gpus, r.node)  # one server: its scale-up link
    else:
        prefill, decode = rollout_seconds(arch, p, spec, lay, gpus, r.gpu, sm, serving, node)
    logp = log_prob_seconds(arch, p, spec, lay, gpus, st.peak, st.eff, work.factor)
    out = StepTime()
    for k in StepTime.__slots__:
        setattr(out, k, getattr(st, k))
    f = mean_fraction(spec)  # the training pass's compute on the mean sequence (its memory keeps the longest)
    shorter = (1 - f) * work.micro * (st.t_matmul + st.t_elem + st.t_dequant)
    out.t_matmul, out.t_elem, out.t_dequant = st.t_matmul * f, st.t_elem * f, st.t_dequant * f
    out.t_prefill, out.t_decode, out.t_log_probs, out.t_sync = prefill, decode, logp, sync
    out.step = st.step - shorter + prefill + decode + logp + sync
    out = finish_step(out, work, r, total_tokens)
    if engine_gpus and out.wall is not None:  # the engine's GPUs are held for the run too
        out.gpu_hours = out.wall * (gpus + engine_gpus)
    return out


__all__ = ["DECODE_SEGMENTS", "POLICY_TASK", "ROLLOUT_NAMES", "TENSORS_ONLY", "RolloutTime", "check_grpo",
           "engine_layout", "grpo_notes", "grpo_spec", "log_prob_seconds", "mean_fraction", "policy_project",
           "policy_workload", "reference_bytes", "replicas_of", "rollout_device_bytes", "rollout_engine_memory",
           "rollout_parts", "rollout_seconds", "rollout_share", "rollout_workload", "sequences_per_step", "share_note",
           "tail_seconds", "timed_step", "trainer_kept", "with_rollout"]
