"""Serving an encoder or a vision model (core/sizing/serving.py hands them here): one forward per request, the batch
at once, no decoding. Pure."""

from __future__ import annotations

from gpuplan.core.sizing.flops import forward_flops
from gpuplan.core.sizing.memory import resolve
from gpuplan.core.sizing.params import ParamCount
from gpuplan.core.sizing.rates import GB, _base_efficiency, _calibration_notes, _span, peak_flops
from gpuplan.schema.hardware import Gpu
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Layout, Workload
from gpuplan.schema.serving import InferenceSpeed, Percentiles
from gpuplan.schema.speed import ComputeOut, SpeedModel, SpeedResult


def encoder_speed(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpus: int, gpu: Gpu,
                   sm: SpeedModel) -> SpeedResult:
    """Encoders and vision models: one forward per request, the batch at once, no decoding."""
    r = resolve(arch, w)
    gen = sm.generations[gpu.generation]
    prec = "fp32" if (w.weights_dtype or "bf16") == "fp32" else "bf16"
    peak = peak_flops(gpu, prec) * _base_efficiency(gen, prec) * sm.params.prefill_factor
    fwd = forward_flops(arch, p, r.seq, eager=w.attention == "eager", image_size=r.seq)
    mp = lay.tp * lay.pp
    replicas = max(gpus // mp, 1)
    t = max(fwd.forward * r.batch / mp / peak, p.total * 2 / mp / (gpu.memory_bandwidth_gbs * GB * gen.bandwidth))
    rps = r.batch * replicas / t
    pc = Percentiles(p50=t, p90=t, p99=t)
    inf = InferenceSpeed(
        time_to_first_token_s=t, time_to_first_token_s_range=_span(t, sm), decode_tokens_per_s_per_request=0.0,
        decode_tokens_per_s_per_request_range=(0.0, 0.0), aggregate_tokens_per_s=rps * fwd.tokens,
        aggregate_tokens_per_s_range=_span(rps * fwd.tokens, sm, speed=True), batch_prefill_s=t,
        request_latency_s=t, requests_per_s=rps, decode_bound="compute", target_latency_s=w.target_latency_s,
        ttft_s=pc, itl_s=Percentiles(p50=0.0, p90=0.0, p99=0.0), e2e_s=pc, concurrency=rps * t,
        replicas=replicas, assumptions=[f"{r.batch} request(s) per forward; {replicas} replica(s) of {mp} GPU(s)"])
    compute = ComputeOut(flops_per_token=fwd.forward / fwd.tokens, hardware_flops_per_token=fwd.forward / fwd.tokens,
                         flops_total=fwd.forward * r.batch * replicas)
    return SpeedResult(compute=compute, inference=inf, notes=_calibration_notes(gen))


__all__ = ["encoder_speed"]
