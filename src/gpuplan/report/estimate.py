"""Render an EstimateResult as a rich table (text) or JSON."""

from __future__ import annotations

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table

from gpuplan.core.layout_text import layout_items_text
from gpuplan.report.strict_json import dumps
from gpuplan.schema.result import EstimateResult
from gpuplan.schema.serving import InferenceSpeed, Percentiles
from gpuplan.units import fmt_gib, fmt_hours

PARTS = [
    ("weights_bytes", "weights"),
    ("reference_bytes", "reference model (DPO/GRPO, frozen 16-bit)"),
    ("rollout_weights_bytes", "rollout engine weights (GRPO, vLLM)"),
    ("gradients_bytes", "gradients"),
    ("optimizer_bytes", "optimizer states"),
    ("activations_bytes", "activations"),
    ("kv_cache_bytes", "KV cache"),
    ("other_bytes", "temporaries (logits/loss, casts, optimizer step)"),
]


def render_json(result: EstimateResult) -> str:
    return dumps(result.model_dump(mode="json"), indent=2, sort_keys=False)


def render_text(result: EstimateResult, console: Console) -> None:
    m, mem, hw = result.model, result.memory, result.hardware
    w = result.workload
    head = (f"[bold]{result.project}[/bold]: {m.name} ({m.model_type}, {m.parameters / 1e9:,.2f} B parameters, "
            f"{m.trainable_parameters / 1e9:,.3f} B trainable)\n"
            f"task {w.get('task')}, " + ", ".join(f"{k} {v}" for k, v in w.items()
                                                if k in ("precision", "optimizer", "micro_batch_size",
                                                         "sequence_length", "batch_size", "context_length",
                                                         "weights_dtype", "gradient_checkpointing")) + "\n"
            f"{hw.gpus} × {hw.gpu or 'GPU'}; layout {layout_items_text(hw.layout)}")
    table = Table(title=f"Peak memory per GPU (at the {mem.peak_phase} phase)", show_lines=False)
    table.add_column("part")
    table.add_column("memory", justify="right")
    table.add_column("share", justify="right")
    for key, label in PARTS:
        value = getattr(mem, key)
        if value:
            table.add_row(label, fmt_gib(value, 2), f"{100 * value / mem.peak_tensor_bytes:.0f}%")
    table.add_section()
    table.add_row("[bold]tensor peak[/bold] (torch max_memory_allocated)", fmt_gib(mem.peak_tensor_bytes, 2), "")
    table.add_row("allocator reserve (max_memory_reserved)", fmt_gib(mem.reserved_bytes, 2), "")
    table.add_row("[bold]device total[/bold] (nvidia-smi: + CUDA context, cuBLAS, NCCL)",
                  fmt_gib(mem.device_bytes, 2), "")
    lines = [f"Largest part: {mem.dominant}."]
    if mem.fits is not None and hw.gpu_memory_bytes is not None:
        verdict = "[green]fits[/green]" if mem.fits else "[red]does not fit[/red]"
        engine = why = ""
        inf = result.inference
        if inf is not None and inf.max_num_seqs:
            share = result.workload.get("gpu_memory_utilization")
            engine = (f", of which the serving engine takes {share:.0%}" if isinstance(share, float)
                      else ", of which generate() takes what it needs" if inf.engine == "transformers"
                      else ", of which the serving engine takes its gpu_memory_utilization")
            why = (f": the engine starts and its KV cache holds {inf.kv_cache_requests:,.1f} request(s) "
                   f"({inf.kv_cache_tokens:,} tokens)" if mem.fits else
                   ": the weights, workspace and CUDA graphs with one request's KV cache exceed the engine's share")
        lines.append(f"{hw.gpu}: {fmt_gib(hw.gpu_memory_bytes, 2)} per GPU{engine} → {verdict}{why} "
                     f"(headroom {fmt_gib(mem.headroom_bytes or 0, 2)}).")
    if mem.in_flight_bytes is not None and mem.start_bytes is not None:
        n = mem.in_flight_requests or 1
        rest = ("a batch of one; the rest in later batches" if result.inference is not None
                and result.inference.engine == "transformers" else "one request; the rest wait in its queue")
        lines.append(f"Serving memory per GPU: {fmt_gib(mem.in_flight_bytes, 2)} holds the load's {n:,} request(s) "
                     f"in flight at once, none queued; {fmt_gib(mem.start_bytes, 2)} is the least on which the engine "
                     f"starts ({rest}).")
    lines += _speed_lines(result)
    for note in result.notes:
        lines.append(("[yellow]! [/yellow]" if note.severity == "warning" else "· ") + note.message)
    console.print(Panel(Group(head, table, "\n".join(lines)), title="gpuplan estimate", expand=False))


def _fmt(v: float, unit: str = "") -> str:
    if v >= 100:
        return f"{v:,.0f}{unit}"
    if v >= 10:
        return f"{v:,.1f}{unit}"
    return f"{v:,.3g}{unit}"


def _speed_lines(result: EstimateResult) -> list[str]:
    c, t, inf = result.compute, result.time, result.inference
    unit = "step of the traced batch" if result.model.origin.startswith("trace:") else "token"
    out = [f"Compute: {c.flops_per_token / 1e9:,.2f} GFLOP per {unit}"
           + (f" ({c.hardware_flops_per_token / 1e9:,.2f} with recomputation)"
              if c.hardware_flops_per_token > c.flops_per_token * 1.001 else "")
           + (f", {c.flops_total:.3g} FLOP in all" if c.flops_total else "") + "."]
    if t is not None:
        lo, hi = t.tokens_per_s_range
        out.append(f"Training: {_fmt(t.tokens_per_s)} tokens/s on {result.hardware.gpus} GPU(s) "
                   f"(range {_fmt(lo)}–{_fmt(hi)}; {_fmt(t.tokens_per_s_per_gpu)} per GPU, MFU {t.mfu:.0%}), "
                   f"{_fmt(t.step_seconds)} s per step.")
        if t.wall_hours is not None and t.wall_hours_range and t.gpu_hours is not None and t.gpu_hours_range:
            wl, wh = t.wall_hours_range
            gl, gh = t.gpu_hours_range
            out.append(f"Run of {t.tokens:.3g} tokens: {fmt_hours(t.wall_hours)} wall (range {fmt_hours(wl)}–"
                       f"{fmt_hours(wh)}), {_fmt(t.gpu_hours)} GPU-hours ({_fmt(gl)}–{_fmt(gh)}).")
        parts = sorted(t.step_breakdown_s.items(), key=lambda kv: -kv[1])
        total = sum(v for _, v in parts) or 1.0
        out.append("Step time: " + ", ".join(f"{k.replace('_', ' ')} {100 * v / total:.0f}%" for k, v in parts if v > 0)
                   + ".")
        out += [f"· assumed: {a}" for a in t.assumptions]
    if inf is not None:
        out += _serving_lines(inf)
    return out


def _pcts(p: Percentiles | None, target: float | None, pct: int) -> str:
    if p is None:
        return "-"
    within = "" if target is None else f" (objective {_fmt(target, ' s')} at p{pct})"
    return f"{_fmt(p.p50, ' s')} / {_fmt(p.p90, ' s')} / {_fmt(p.p99, ' s')}{within}"


def _serving_lines(inf: InferenceSpeed) -> list[str]:
    """Serving: the latencies at the load (p50 / p90 / p99 against the objectives), throughput, capacity."""
    lo, hi = inf.time_to_first_token_s_range
    dlo, dhi = inf.decode_tokens_per_s_per_request_range
    out = [(f"Inference: first token after {_fmt(inf.time_to_first_token_s, ' s')} ({_fmt(lo)}–{_fmt(hi)} s) on "
            f"average; {_fmt(inf.decode_tokens_per_s_per_request)} tokens/s per request ({_fmt(dlo)}–{_fmt(dhi)}), "
            f"{_fmt(inf.aggregate_tokens_per_s)} tokens/s in all; decoding is {inf.decode_bound}-bound."),
           (f"A request takes {_fmt(inf.request_latency_s, ' s')} on average; {_fmt(inf.requests_per_s)} requests/s "
            f"with {_fmt(inf.concurrency)} in flight (prefilling the whole batch at once: "
            f"{_fmt(inf.batch_prefill_s, ' s')}).")]
    o = inf.objectives
    if inf.ttft_s is not None and o is not None:
        out.append("Latency p50 / p90 / p99: first token " + _pcts(inf.ttft_s, o.ttft_s, o.percentile)
                   + "; per output token " + _pcts(inf.itl_s, o.itl_s, o.percentile)
                   + "; end to end " + _pcts(inf.e2e_s, o.e2e_s, o.percentile) + ".")
    if inf.max_batch_for_target is not None and inf.requests_per_s_at_target is not None:
        out.append(f"Within {inf.target_latency_s:g} s per request: up to {inf.max_batch_for_target} concurrent "
                   f"requests, {_fmt(inf.requests_per_s_at_target)} requests/s.")
    if inf.capacity_requests_per_s is not None:
        met = "" if inf.objectives_met is None else (" The objectives hold at this load." if inf.objectives_met
                                                      else " The objectives do not hold at this load.")
        out.append(f"Capacity: {_fmt(inf.capacity_requests_per_s)} requests/s on {inf.replicas} replica(s) "
                   f"(bound: {inf.capacity_bound}); the load needs {inf.replicas_needed} replica(s) with headroom; "
                   f"KV cache {inf.kv_cache_occupancy:.0%} used of {inf.kv_cache_tokens:,} tokens." + met)
    out += [f"· assumed: {a}" for a in inf.assumptions]
    return out
