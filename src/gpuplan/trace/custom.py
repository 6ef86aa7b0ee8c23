"""Trace any PyTorch model: `gpuplan trace module:factory`.

The factory is the user's code: gpuplan imports `module` (from the current directory or the Python path) and
calls `factory()` under FakeTensorMode, so parameters and activations take no memory and no GPU is needed. It
must return `(model, example_inputs)` where `example_inputs` is a dict of keyword arguments or a tuple of
positional ones for `model(...)`; the batch in the inputs is the batch that is measured. Training runs two
steps (forward, backward, AdamW step: the second is the steady state) and takes the output's `loss` when it
has one, else the sum of the output as a stand-in loss (same backward memory as any scalar loss). Inference
runs one forward under `torch.no_grad()`.

What it measures is exact for the code as written: the peak of live tensors (what
`torch.cuda.max_memory_allocated` reports on a GPU, CUDA context and allocator reserve excluded, see
docs/tracer.md) and the FLOPs PyTorch's FlopCounterMode counts (matmuls, convolutions, attention kernels).
"""

from __future__ import annotations

import importlib
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Literal

from gpuplan.errors import InputError
from gpuplan.schema.trace import CustomTraceResult

Precision = Literal["fp32", "bf16-mixed", "fp16-mixed", "bf16"]


def load_factory(ref: str) -> Any:
    """`module:function` -> the function; errors say what is wrong and what was expected."""
    if ref.count(":") != 1 or not all(ref.split(":")):
        raise InputError(["factory"], f"{ref!r} is not MODULE:FUNCTION", "e.g. mymodels:build_classifier")
    mod_name, fn_name = ref.split(":")
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(mod_name)
    except ImportError as exc:
        raise InputError(["factory"], f"cannot import {mod_name!r}: {exc}",
                         "a module on the Python path or in the current directory") from None
    fn = getattr(module, fn_name, None)
    if not callable(fn):
        names = [n for n in dir(module) if callable(getattr(module, n)) and not n.startswith("_")]
        from gpuplan.errors import suggest

        hint = suggest(fn_name, names)
        raise InputError(["factory"], f"{mod_name} has no function {fn_name!r}"
                         + (f"; did you mean {' or '.join(map(repr, hint))}?" if hint else ""))
    return fn


def trace_factory(ref: str, *, training: bool = True, precision: Precision = "fp32",
                  fake: bool = True) -> CustomTraceResult:
    """Run the user's factory and one (steady-state) step under FakeTensorMode; see the module docstring."""
    t0 = time.perf_counter()
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils.flop_counter import FlopCounterMode

    from .tracker import MemoryTracker

    factory = load_factory(ref)
    tracker = MemoryTracker()
    torch.manual_seed(0)
    with ExitStack() as stack:
        if fake:
            stack.enter_context(FakeTensorMode(allow_non_fake_inputs=True))
        try:
            built = factory()
        except Exception as exc:  # noqa: BLE001 - the user's code may raise anything: report it, never a traceback of ours
            raise InputError(["factory"], f"{ref}() raised {type(exc).__name__}: {exc}") from None
        if not (isinstance(built, tuple) and len(built) == 2 and isinstance(built[0], torch.nn.Module)):
            raise InputError(["factory"], f"{ref}() must return (model, example_inputs)",
                             "a torch.nn.Module and a dict of keyword arguments or a tuple of positional ones")
        model, inputs = built
        if precision == "bf16":
            model = model.to(torch.bfloat16)
        params = list(model.parameters())
        trainable = [p for p in params if p.requires_grad]
        for p in params:
            tracker.track(p, category="parameters")
        for b in model.buffers():
            tracker.track(b)

        def call() -> Any:
            amp = {"fp16-mixed": torch.float16, "bf16-mixed": torch.bfloat16}.get(precision)
            ctx = torch.autocast("cpu", dtype=amp) if amp is not None else ExitStack()
            with ctx:
                return model(**inputs) if isinstance(inputs, dict) else model(*inputs)

        def loss_of(out: Any) -> Any:
            loss = getattr(out, "loss", None)
            if loss is None and isinstance(out, dict):
                loss = out.get("loss")
            if loss is None:
                tensor = out if isinstance(out, torch.Tensor) else (out[0] if isinstance(out, (tuple, list)) else None)
                if tensor is None:
                    raise InputError(["factory"], "the model's output has no loss and no tensor to stand in for one")
                loss = tensor.float().sum()
            return loss

        flops = FlopCounterMode(display=False)
        stack.enter_context(tracker)
        if training:
            model.train()
            optimizer = torch.optim.AdamW(trainable, lr=1e-4, foreach=True)
            for p in trainable:
                p.register_post_accumulate_grad_hook(lambda q: tracker.track(q.grad, category="gradients"))
            for step in range(2):
                if step == 1:
                    tracker.reset_peak()
                with flops if step == 1 else ExitStack():
                    with tracker.phase("forward"):
                        loss = loss_of(call())
                    with tracker.phase("backward"):
                        loss.backward()
                        del loss
                with tracker.phase("optimizer"):
                    optimizer.step()
                    tracker.tag_tensors((t for st in optimizer.state.values() for t in st.values()
                                         if isinstance(t, torch.Tensor)), "optimizer")
                    optimizer.zero_grad(set_to_none=True)
        else:
            model.eval()
            with torch.no_grad(), flops, tracker.phase("forward"):
                out = call()
                del out
    split = tracker.peak_split
    return CustomTraceResult(
        factory=ref, model_class=type(model).__name__, training=training, precision=precision,
        parameters=sum(p.numel() for p in params), trainable_parameters=sum(p.numel() for p in trainable),
        peak_bytes=tracker.peak, parameters_bytes=split["parameters"], gradients_bytes=split["gradients"],
        optimizer_bytes=split["optimizer"], other_bytes=split["other"], phase_peaks=dict(tracker.phase_peaks),
        flops_per_step=int(flops.get_total_flops()), seconds=time.perf_counter() - t0,
    )


__all__ = ["CustomTraceResult", "load_factory", "trace_factory"]
