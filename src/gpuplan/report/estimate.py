"""Render an EstimateResult as a rich table (text) or JSON."""

from __future__ import annotations

import json

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table

from gpuplan.schema.result import EstimateResult
from gpuplan.units import GIB

PARTS = [
    ("weights_bytes", "weights"),
    ("gradients_bytes", "gradients"),
    ("optimizer_bytes", "optimizer states"),
    ("activations_bytes", "activations"),
    ("kv_cache_bytes", "KV cache"),
    ("other_bytes", "temporaries (logits/loss, casts, optimizer step)"),
]


def render_json(result: EstimateResult) -> str:
    return json.dumps(result.model_dump(mode="json"), indent=2, sort_keys=False)


def _gib(n: int) -> str:
    return f"{n / GIB:,.2f} GiB"


def render_text(result: EstimateResult, console: Console) -> None:
    m, mem, hw = result.model, result.memory, result.hardware
    w = result.workload
    head = (f"[bold]{result.project}[/bold]: {m.name} ({m.model_type}, {m.parameters / 1e9:,.2f} B parameters, "
            f"{m.trainable_parameters / 1e9:,.3f} B trainable)\n"
            f"task {w.get('task')}, " + ", ".join(f"{k} {v}" for k, v in w.items()
                                                if k in ("precision", "optimizer", "micro_batch_size",
                                                         "sequence_length", "batch_size", "context_length",
                                                         "weights_dtype", "gradient_checkpointing")) + "\n"
            f"{hw.gpus} × {hw.gpu or 'GPU'}; layout " + ", ".join(f"{k}={v}" for k, v in hw.layout.items()))
    table = Table(title=f"Peak memory per GPU (at the {mem.peak_phase} phase)", show_lines=False)
    table.add_column("part")
    table.add_column("memory", justify="right")
    table.add_column("share", justify="right")
    for key, label in PARTS:
        value = getattr(mem, key)
        if value:
            table.add_row(label, _gib(value), f"{100 * value / mem.peak_tensor_bytes:.0f}%")
    table.add_section()
    table.add_row("[bold]tensor peak[/bold] (torch max_memory_allocated)", _gib(mem.peak_tensor_bytes), "")
    table.add_row("allocator reserve (max_memory_reserved)", _gib(mem.reserved_bytes), "")
    table.add_row("[bold]device total[/bold] (nvidia-smi: + CUDA context, cuBLAS, NCCL)", _gib(mem.device_bytes), "")
    lines = [f"Largest part: {mem.dominant}."]
    if mem.fits is not None and hw.gpu_memory_bytes is not None:
        verdict = "[green]fits[/green]" if mem.fits else "[red]does not fit[/red]"
        lines.append(f"{hw.gpu}: {_gib(hw.gpu_memory_bytes)} per GPU → {verdict} "
                     f"(headroom {_gib(mem.headroom_bytes or 0)}).")
    for note in result.notes:
        lines.append(("[yellow]! [/yellow]" if note.severity == "warning" else "· ") + note.message)
    console.print(Panel(Group(head, table, "\n".join(lines)), title="gpuplan estimate", expand=False))
