"""Invariants of GRPO's step time and memory (issue #31, colocated) over random groups, lengths and layouts of real
decoders on real GPUs: a longer response never shortens the step; more prompts per step never lower the GPU-hours
per prompt below the generation's own compute bound; memory never decreases with the group size."""

from __future__ import annotations

import functools

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog.hardware import builtin_catalog
from gpuplan.catalog.loader import load_activation_table, load_overheads, load_speed_model, resolve_model
from gpuplan.catalog.serving import load_serving
from gpuplan.core.sizing.grpo import policy_workload, with_rollout
from gpuplan.core.sizing.memory import estimate_memory
from gpuplan.core.sizing.params import count_params
from gpuplan.core.sizing.rates import peak_flops
from gpuplan.core.sizing.speed import estimate_training_speed
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import GrpoSpec, Layout, LoraSpec, ModelRef, Workload

TABLE, OH, SPEED, SERVING = load_activation_table(), load_overheads(), load_speed_model(), load_serving()
CATALOG = builtin_catalog()
MODELS = ("qwen2.5-0.5b", "qwen2.5-7b", "llama-3.1-8b")
GPUS = ("h100-sxm-80gb", "a100-sxm-80gb", "b200-180gb", "rtx-4090-24gb")
LAYOUTS = ((Layout(zero=3), 8), (Layout(zero=2, tp=2), 8), (Layout(zero=1), 4), (Layout(), 1))


@functools.cache
def arch_of(name: str) -> ModelArch:
    return resolve_model(ModelRef(preset=name)).arch


@st.composite
def grpo_workloads(draw: st.DrawFn) -> Workload:
    method = draw(st.sampled_from(["full", "lora"]))
    spec = GrpoSpec(method=method, kl=draw(st.booleans()), group_size=draw(st.sampled_from([2, 8, 16])),
                    prompts_per_step=draw(st.sampled_from([8, 64, 512])),
                    prompt_length=draw(st.sampled_from([128, 1024, 2048])),
                    response_length=draw(st.sampled_from([64, 512, 4096])))
    return Workload(task="grpo", grpo=spec, lora=LoraSpec(rank=16) if method == "lora" else None,
                    micro_batch_size=draw(st.sampled_from([1, 2])), gradient_checkpointing=draw(st.booleans()))


def with_spec(w: Workload, **changes: int) -> Workload:
    assert w.grpo is not None
    return w.model_copy(update={"grpo": w.grpo.model_copy(update=changes)})


def step_s(arch: ModelArch, w: Workload, gpu_id: str, lay: Layout, gpus: int, part: str | None = None) -> float:
    """The GRPO step's seconds, or those of one part of its breakdown (`part`)."""
    pw, p = policy_workload(w), count_params(arch)
    sp = estimate_training_speed(arch, p, pw, lay, gpus, CATALOG.gpus.find(gpu_id, ["gpu"]), SPEED, TABLE,
                                 trainable=p.total, serving=SERVING)
    assert sp.time is not None
    return sp.time.step_seconds if part is None else sp.time.step_breakdown_s[part]


def peak(arch: ModelArch, w: Workload, lay: Layout, gpus: int) -> int:
    pw, p = policy_workload(w), count_params(arch)
    m = estimate_memory(arch, p, pw, lay, gpus, TABLE, OH)
    return with_rollout(m, arch, p, pw, lay, gpus, OH, SERVING.engine).peak_tensor_bytes


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(MODELS), grpo_workloads(), st.sampled_from(GPUS), st.sampled_from(LAYOUTS),
       st.sampled_from([2, 4]))
def test_a_longer_response_never_shortens_the_step(model: str, w: Workload, gpu: str, layout: tuple[Layout, int],
                                                   factor: int) -> None:
    arch, (lay, gpus) = arch_of(model), layout
    assert w.grpo is not None
    longer = with_spec(w, response_length=w.grpo.response_length * factor)
    assert step_s(arch, longer, gpu, lay, gpus) >= step_s(arch, w, gpu, lay, gpus)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(MODELS), grpo_workloads(), st.sampled_from(GPUS), st.sampled_from(LAYOUTS),
       st.sampled_from([2, 8, 64]))
def test_more_prompts_never_beat_the_generations_own_bound(model: str, w: Workload, gpu: str,
                                                            layout: tuple[Layout, int], factor: int) -> None:
    """GPU-seconds per prompt, at any number of prompts per step, stay above what generating its group's tokens
    alone takes at the GPU's dense 16-bit peak (2 x active parameters FLOPs per prompt and response token): batching
    more prompts shares the weights' reads, never the generation's FLOPs. The rollout's own GPU-seconds (prefill and
    decode) stay above it too."""
    arch, (lay, gpus) = arch_of(model), layout
    assert w.grpo is not None
    p = count_params(arch)
    row = CATALOG.gpus.find(gpu, ["gpu"])
    for spec_w in (w, with_spec(w, prompts_per_step=w.grpo.prompts_per_step * factor)):
        s = spec_w.grpo
        assert s is not None
        per_prompt = step_s(arch, spec_w, gpu, lay, gpus) * gpus / s.prompts_per_step
        rollout = sum(step_s(arch, spec_w, gpu, lay, gpus, part) for part in ("rollout_prefill", "rollout_decode"))
        bound = s.group_size * (s.prompt_length + s.response_length) * 2 * p.active / peak_flops(row, "bf16-mixed")
        assert per_prompt >= rollout * gpus / s.prompts_per_step >= bound


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(MODELS), grpo_workloads(), st.sampled_from(LAYOUTS), st.sampled_from([2, 4]))
def test_memory_never_decreases_with_the_group_size(model: str, w: Workload, layout: tuple[Layout, int],
                                                    factor: int) -> None:
    arch, (lay, gpus) = arch_of(model), layout
    assert w.grpo is not None
    bigger = with_spec(w, group_size=w.grpo.group_size * factor)
    assert peak(arch, bigger, lay, gpus) >= peak(arch, w, lay, gpus)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(MODELS), grpo_workloads(), st.sampled_from(GPUS), st.sampled_from(LAYOUTS),
       st.floats(0.2, 0.85), st.floats(0.01, 0.5))
def test_a_smaller_engine_share_never_shortens_the_step(model: str, w: Workload, gpu: str, layout: tuple[Layout, int],
                                                        share: float, less: float) -> None:
    """The colocated engine's share (grpo.gpu_memory_utilization) bounds the sequences it generates at once: a
    smaller share holds fewer, the rest wait, and the rollout's waves decode at a smaller batch, never faster; where
    the smaller share holds fewer sequences than the larger one's waves need, the step is strictly longer."""
    arch, (lay, gpus) = arch_of(model), layout
    big, small = with_share(w, share), with_share(w, share * (1 - less))
    assert step_s(arch, small, gpu, lay, gpus) >= step_s(arch, big, gpu, lay, gpus)
    assert step_s(arch, small, gpu, lay, gpus, "rollout_decode") >= step_s(arch, big, gpu, lay, gpus, "rollout_decode")


def with_share(w: Workload, share: float) -> Workload:
    assert w.grpo is not None
    return w.model_copy(update={"grpo": w.grpo.model_copy(update={"gpu_memory_utilization": share})})


SHARES = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
TOTALS = (1, 2, 4, 8, 16, 32, 64)
HEADROOM = 0.1


def fits_colocated(arch: ModelArch, w: Workload, gpu_id: str, n: int) -> bool:
    """Colocated on n GPUs (ZeRO-3 trainer) fits with some engine share and tensor parallelism: every GPU holds the
    training step, and the trainer's kept memory beside the engine's share, within the headroom."""
    assert w.grpo is not None
    gpu = CATALOG.gpus.find(gpu_id, ["gpu"])
    g = int(gpu.memory_gib * 2**30)
    p, lay = count_params(arch), Layout(zero=3) if n > 1 else Layout()
    pw = policy_workload(w)
    m = estimate_memory(arch, p, pw, lay, n, TABLE, OH)
    for tp in (t for t in (1, 2, 4, 8) if t <= n and n % t == 0 and arch.num_heads % t == 0):
        for share in SHARES:
            ww = pw.model_copy(update={"grpo": w.grpo.model_copy(update={"gpu_memory_utilization": share,
                                                                          "rollout_tp": tp})})
            r = with_rollout(m, arch, p, ww, lay, n, OH, SERVING.engine, g)
            if max(r.device_bytes, m.device_bytes) <= g * (1 - HEADROOM) and not any(
                    x.code == "grpo-engine-cannot-start" for x in r.notes):
                return True
    return False


def fits_separate(arch: ModelArch, w: Workload, gpu_id: str, n: int) -> bool:
    """Separate pools on n GPUs fit with some split: the trainer's pool (ZeRO-3) holds the training step, the
    engine's pool vLLM at its share (0.9 less the plan's headroom: the engine alone on its GPUs, its share is the
    headroom, as for serving)."""
    assert w.grpo is not None
    gpu = CATALOG.gpus.find(gpu_id, ["gpu"])
    g = int(gpu.memory_gib * 2**30)
    p, pw = count_params(arch), policy_workload(w)
    for engine in (e for e in (1, 2, 4, 8, 16, 32) if e < n):
        trainer = n - engine
        lay = Layout(zero=3) if trainer > 1 else Layout()
        m = estimate_memory(arch, p, pw, lay, trainer, TABLE, OH)
        if m.device_bytes > g * (1 - HEADROOM):
            continue
        for tp in (t for t in (1, 2, 4, 8) if t <= engine and engine % t == 0 and arch.num_heads % t == 0):
            ww = pw.model_copy(update={"grpo": w.grpo.model_copy(update={
                "placement": "separate", "rollout_gpus": engine, "rollout_tp": tp,
                "gpu_memory_utilization": 1 - HEADROOM})})
            r = with_rollout(m, arch, p, ww, lay, trainer, OH, SERVING.engine, g)
            if r.device_bytes <= g * (1 - HEADROOM) and not any(x.code == "grpo-engine-cannot-start" for x in r.notes):
                return True
    return False


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(MODELS), grpo_workloads(), st.sampled_from(GPUS))
def test_colocated_never_needs_more_gpus_than_separate_pools(model: str, w: Workload, gpu: str) -> None:
    """Issue #31: on one GPU type, the fewest GPUs colocated GRPO fits on (some engine share and tensor
    parallelism) is never more than the fewest separate pools fit on (some split): colocated time-shares every GPU
    between the phases, where separate pools hold the engine's weights and the trainer's state on GPUs of their
    own."""
    arch = arch_of(model)
    col = next((n for n in TOTALS if fits_colocated(arch, w, gpu, n)), None)
    sep = next((n for n in TOTALS if fits_separate(arch, w, gpu, n)), None)
    if sep is not None:
        assert col is not None and col <= sep
