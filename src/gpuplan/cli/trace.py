"""`gpuplan trace`: exact peak memory and FLOPs of the user's own PyTorch model, traced without a GPU."""

from enum import Enum
from typing import TYPE_CHECKING, Annotated

import typer

from gpuplan.cli.common import Format, OutputFormat, console, fail
from gpuplan.errors import GpuplanError

if TYPE_CHECKING:
    from gpuplan.schema.trace import CustomTraceResult


class TracePrecision(str, Enum):
    fp32 = "fp32"
    bf16_mixed = "bf16-mixed"
    fp16_mixed = "fp16-mixed"
    bf16 = "bf16"


def trace(
    factory: Annotated[str, typer.Argument(help="MODULE:FUNCTION returning (model, example_inputs); it is YOUR code "
                                                "and gpuplan runs it.")],
    inference: Annotated[bool, typer.Option("--inference", help="One forward under no_grad instead of a training "
                                                                "step.")] = False,
    precision: Annotated[TracePrecision, typer.Option(help="Training precision.")] = TracePrecision.fp32,
    format: OutputFormat = Format.text,
) -> None:
    """Exact peak memory and FLOPs of any PyTorch model's training step (or forward), without a GPU: imports and
    runs your factory under FakeTensorMode (needs the `trace` extra)."""
    try:
        try:
            from gpuplan.trace.custom import trace_factory
        except ImportError:
            raise GpuplanError("gpuplan trace needs torch: pip install 'gpuplan[trace]'") from None
        from gpuplan.report.terminal import progress

        with progress(f"tracing {factory}…"):
            result = trace_factory(factory, training=not inference, precision=precision.value)
    except GpuplanError as exc:
        fail(exc)
    if format is Format.json:
        typer.echo(result.model_dump_json(indent=2))
        return
    _render_text(result, factory, inference, precision)


def _render_text(result: "CustomTraceResult", factory: str, inference: bool, precision: TracePrecision) -> None:
    from rich.table import Table

    from gpuplan.units import GIB

    t = Table(title=f"{factory}: {result.model_class}, {result.parameters / 1e6:,.1f} M parameters "
                    f"({result.trainable_parameters / 1e6:,.1f} M trainable), "
                    + ("inference" if inference else f"training step, {precision.value}"))
    t.add_column("part")
    t.add_column("at the peak", justify="right")
    for label, v in (("parameters", result.parameters_bytes), ("gradients", result.gradients_bytes),
                     ("optimizer states", result.optimizer_bytes),
                     ("activations and temporaries", result.other_bytes)):
        t.add_row(label, f"{v / GIB:,.3f} GiB")
    t.add_section()
    t.add_row("[bold]tensor peak[/bold] (torch max_memory_allocated)", f"{result.peak_bytes / GIB:,.3f} GiB")
    out = console()
    out.print(t)
    out.print(f"FLOPs per {'forward' if inference else 'step'}: {result.flops_per_step:.4g}; phase peaks: "
              + ", ".join(f"{k} {v / GIB:,.3f} GiB" for k, v in result.phase_peaks.items())
              + f"; traced in {result.seconds:.1f} s. Add the CUDA context (~0.5-1.3 GiB) and the "
              "allocator's reserve for what nvidia-smi shows.")


def register(app: typer.Typer) -> None:
    """Add `trace` to a typer app."""
    app.command()(trace)
