"""`gpuplan calibrate`: a short, bounded benchmark of this machine's GPU with PyTorch (a bf16 matmul at a training
shape, a large device-memory copy, a GPU-to-GPU copy when there are two, one training step of a small
transformer), written as a catalog row for that GPU type (gpuplan.catalog.calibration) that `plan`, `estimate`,
`fit` and `cost` read with `--rates FILE` (or `--catalog FILE`): their speed is then the one measured here.

On a machine without a GPU, torch's CPU device stands in, by the same code path (so it is tested in CI), and the
row says so. Without torch installed it refuses, saying how to install it."""

import datetime
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from gpuplan.cli.common import check_out, console, fail, write_out
from gpuplan.errors import GpuplanError, InputError


def calibrate(
    gpu: Annotated[str | None, typer.Option(
        help="The catalog GPU this machine's GPU is (`gpuplan catalog gpus`); default: matched from the driver's "
             "name. Required on the CPU.")] = None,
    out: Annotated[Path | None, typer.Option(help="The rates file to write (a catalog file; default: "
                                                  "calibration-<gpu>.toml here).")] = None,
    device: Annotated[str, typer.Option(help="auto (the GPU when torch sees one, else the CPU standing in), cuda "
                                             "or cpu.")] = "auto",
    seconds: Annotated[float, typer.Option(min=1, max=600, help="About how long the whole benchmark may run.")] = 20,
    force: Annotated[bool, typer.Option(help="Replace --out if it exists.")] = False,
) -> None:
    """Measure this machine's GPU (matmul, memory bandwidth, GPU-to-GPU copy, a training step) and write a rates
    file; `gpuplan plan --rates FILE` then times that GPU type as measured here."""
    from gpuplan.api import builtin_catalog
    from gpuplan.catalog.calibration import measured_gpu, rates_document
    from gpuplan.catalog.loader import load_speed_model
    from gpuplan.clock import plan_date

    try:
        torch = _torch()
        dev = _device(torch, device)
        catalog = builtin_catalog()
        if gpu is None:
            if dev == "cpu":
                raise InputError(["--gpu"], "on the CPU (no GPU seen by torch) say which catalog GPU the rates file "
                                 "is for with --gpu (`gpuplan catalog gpus`); the CPU only stands in for it")
            from gpuplan.core.audit.machine import match_gpu

            props = torch.cuda.get_device_properties(0)
            gpu = match_gpu(props.name, props.total_memory, catalog.gpus.rows.values())
            if gpu is None:
                raise InputError(["--gpu"], f"the catalog has no row for {props.name}; say which it is with --gpu, "
                                 "or add its row with --catalog")
        row = catalog.gpus.find(gpu, ["--gpu"])
        path = out if out is not None else Path(f"calibration-{row.id}.toml")
        check_out(path, force)
        with console(stderr=True).status(f"measuring {'the CPU (standing in)' if dev == 'cpu' else dev} for "
                                         f"about {seconds:g} s…"):
            m = _measure(torch, dev, seconds, plan_date())
        gen = load_speed_model().generations[row.generation]
        measured = measured_gpu(row, gen, m)
        import rtoml

        write_out(path, "# written by gpuplan calibrate: a catalog row for --rates / --catalog\n"
                  + rtoml.dumps(rates_document(measured)), force)
    except GpuplanError as exc:
        fail(exc)
    c = console()
    c.print(f"wrote {path}: {row.id} as measured here")
    c.print(measured.measured_here or "", soft_wrap=True)
    c.print(f"use it: gpuplan plan PROJECT --rates {path}")


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise InputError(["torch"], "gpuplan calibrate measures with PyTorch, which is not installed here",
                         "pip install torch (a CUDA build for a GPU; the CPU build measures the CPU, as a stand-in)") \
            from None
    return torch


def _device(torch: Any, asked: str) -> str:
    if asked not in ("auto", "cuda", "cpu"):
        raise InputError(["--device"], f"unknown device {asked!r}", "auto, cuda, cpu")
    has_gpu = bool(torch.cuda.is_available())
    if asked == "cuda" and not has_gpu:
        raise InputError(["--device"], "torch sees no CUDA GPU here (a CPU build of torch, no driver, or no GPU)")
    return "cuda" if asked == "cuda" or (asked == "auto" and has_gpu) else "cpu"


def _timed(torch: Any, dev: str, fn: Any, budget: float, least: int = 3) -> float:
    """Seconds per call of `fn`, after a warm-up, over at least `least` calls and about `budget` seconds."""
    fn()
    _sync(torch, dev)
    n, start = 0, time.perf_counter()
    while n < least or time.perf_counter() - start < budget:
        fn()
        n += 1
        if n >= 10_000:
            break
    _sync(torch, dev)
    return (time.perf_counter() - start) / n


def _sync(torch: Any, dev: str) -> None:
    if dev == "cuda":
        torch.cuda.synchronize()


def _measure(torch: Any, dev: str, seconds: float, on: datetime.date) -> Any:
    from gpuplan.catalog.calibration import Measurement

    gpu = dev == "cuda"
    share = seconds / 4
    n = 8192 if gpu else 512  # a training step's large matmul; small enough on a CPU to finish in the budget
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    per = _timed(torch, dev, lambda: torch.mm(a, b), share)
    matmul = 2 * n ** 3 / per / 1e12
    size = (1 << 30) if gpu else (64 << 20)
    src = torch.empty(size, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    bandwidth = 2 * size / _timed(torch, dev, lambda: dst.copy_(src), share) / 1e9
    link = None
    if gpu and torch.cuda.device_count() >= 2:
        far = torch.empty(256 << 20, dtype=torch.uint8, device="cuda:1")
        near = torch.empty(256 << 20, dtype=torch.uint8, device="cuda:0")
        link = (256 << 20) / _timed(torch, dev, lambda: far.copy_(near), share / 2) / 1e9
    step_s, tokens = _step(torch, dev, share)
    name = torch.cuda.get_device_name(0) if gpu else f"CPU ({torch.get_num_threads()} threads)"
    return Measurement(device=name, stand_in=not gpu, driver=_driver() if gpu else None, torch=torch.__version__,
                       on=on, matmul_tflops=matmul, matmul_shape=f"{n} x {n} x {n} bf16", bandwidth_gbs=bandwidth,
                       link_gbs=link, step_s=step_s, step_tokens_per_s=tokens / step_s)


def _step(torch: Any, dev: str, budget: float) -> tuple[float, int]:
    """Seconds per training step (forward, backward, AdamW) of a small transformer encoder, and its tokens."""
    width, batch, seq = (1024, 8, 512) if dev == "cuda" else (128, 2, 64)
    layer = torch.nn.TransformerEncoderLayer(width, 8, 4 * width, batch_first=True, device=dev)
    model = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(batch, seq, width, device=dev)

    def step() -> None:
        with torch.autocast(device_type=dev, dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return _timed(torch, dev, step, budget), batch * seq


def _driver() -> str | None:
    try:
        import pynvml  # nvidia-ml-py, when installed

        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:  # noqa: BLE001 (no NVML: the driver is not recorded)
        return None


def register(app: typer.Typer) -> None:
    app.command()(calibrate)
