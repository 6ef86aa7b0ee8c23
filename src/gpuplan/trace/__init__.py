"""Ground-truth memory tracer: trace a real Hugging Face training step / prefill under FakeTensorMode.

    from gpuplan.trace import TraceSpec, TraceResult, trace_memory
    r = trace_memory(TraceSpec(config=json.load(open("llama-3-8b.json")), precision="bf16-mixed"))

Needs the `trace` extra (torch, transformers, peft, accelerate); TraceSpec/TraceResult import without it.
The regime is documented in docs/tracer.md.
"""

from .spec import TraceResult, TraceSpec


def trace_memory(spec: TraceSpec, *, fake: bool = True) -> TraceResult:
    """Trace `spec` (FakeTensorMode unless fake=False); see gpuplan.trace.runner.trace_memory."""
    from .runner import trace_memory as _trace

    return _trace(spec, fake=fake)


__all__ = ["TraceSpec", "TraceResult", "trace_memory"]
