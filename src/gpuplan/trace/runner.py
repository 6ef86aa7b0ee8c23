"""trace_memory(): build the model of a TraceSpec and trace a steady-state training step or a prefill.

By default everything runs under FakeTensorMode (no real memory, no GPU).  `fake=False` runs the very same
code on real CPU tensors; the tests use it to show that both give the same bytes.
"""

from __future__ import annotations

import time
import warnings
from contextlib import ExitStack, nullcontext
from typing import Any

from .spec import TraceResult, TraceSpec


def trace_memory(spec: TraceSpec, *, fake: bool = True) -> TraceResult:
    """Peak live tensor bytes (CUDA caching-allocator rounding) of `spec`; see docs/tracer.md."""
    t0 = time.perf_counter()
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from .build import DTYPES, apply_lora, build_model, fake_build_patches, hf_patches
    from .cuda_emulation import cuda_emulation
    from .tracker import MemoryTracker

    torch.manual_seed(0)
    stats: dict[str, int] = {}
    tracker = MemoryTracker()
    with ExitStack() as stack:
        stack.enter_context(warnings.catch_warnings())
        warnings.simplefilter("ignore", FutureWarning)  # HF deprecation notices (checkpointing API names)
        warnings.filterwarnings("ignore", message=".*fan_in_fan_out.*")  # PEFT on GPT-2's Conv1D
        if fake:
            stack.enter_context(FakeTensorMode(allow_non_fake_inputs=True))
        stack.enter_context(hf_patches())

        # ---- model in its training / serving dtype
        if not spec.training:
            base_dtype = DTYPES[spec.weights_dtype]
        elif spec.task == "lora":
            base_dtype = torch.float32 if spec.precision == "fp32" else torch.bfloat16
        else:
            base_dtype = torch.bfloat16 if spec.precision == "bf16" else torch.float32
        with fake_build_patches() if fake else nullcontext():
            model, fam, attention = build_model(spec, base_dtype)
            model_class = type(model).__name__
            if spec.task == "lora":
                model = apply_lora(model, spec)
            # DPO's frozen reference: a bf16 copy of a fully trained policy (TRL's ref_model); a LoRA policy's is
            # its base with the adapters disabled, no copy
            ref = None
            if spec.dpo == "model" and spec.task != "lora":
                ref, _, _ = build_model(spec, torch.bfloat16)
                ref.requires_grad_(False)
                ref.eval()
        if spec.training:
            if spec.gradient_checkpointing:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
                if spec.task == "lora":
                    model.enable_input_require_grads()
            model.train()
        else:
            model.eval()
        params = list(model.parameters())
        trainable = [p for p in params if p.requires_grad]
        n_params = sum(p.numel() for p in params)
        n_trainable = sum(p.numel() for p in trainable)

        stack.enter_context(cuda_emulation(spec.emulate_cuda, stats, tracker))
        stack.enter_context(tracker)
        _register_existing(tracker, model)
        if ref is not None:
            _register_existing(tracker, ref)
        if spec.training:
            kv = 0
            _train(spec, model, fam, trainable, tracker, ref)
        else:
            kv = _prefill(spec, model, fam, tracker)

    split = tracker.peak_split
    return TraceResult(
        peak_bytes=tracker.peak,
        parameters_bytes=split["parameters"],
        gradients_bytes=split["gradients"],
        optimizer_bytes=split["optimizer"],
        other_bytes=split["other"],
        phase_peaks=dict(tracker.phase_peaks),
        kv_cache_bytes=kv,
        parameters=n_params,
        trainable_parameters=n_trainable,
        seconds=time.perf_counter() - t0,
        model_class=model_class,
        attention=attention,
        sdpa_backends=stats,
    )


def _register_existing(tracker, model) -> None:
    """Weights, buffers and plain tensor attributes exist before the step: they are live memory."""
    import torch

    for p in model.parameters():
        tracker.track(p, category="parameters")
    for b in model.buffers():
        tracker.track(b)
    for m in model.modules():
        for v in vars(m).values():
            if isinstance(v, torch.Tensor):
                tracker.track(v)


def _make_optimizer(spec, params):
    import torch

    if spec.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=1e-4, foreach=True)
    if spec.optimizer == "sgd":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=True)
    from transformers.optimization import Adafactor

    return Adafactor(params, lr=1e-3, scale_parameter=False, relative_step=False, warmup_init=False)


def _train(spec, model, fam, trainable, tracker, ref=None) -> None:
    import torch

    from .build import make_inputs

    amp = {"fp16-mixed": torch.float16, "bf16-mixed": torch.bfloat16}.get(spec.precision)
    pixel_dtype = next(model.parameters()).dtype if spec.precision == "bf16" else torch.float32
    optimizer = _make_optimizer(spec, trainable)
    for p in trainable:  # the storage that ends up in p.grad is a gradient from then on
        p.register_post_accumulate_grad_hook(lambda q: tracker.track(q.grad, category="gradients"))

    def tag_state():
        tracker.tag_tensors(
            (t for st in optimizer.state.values() for t in st.values() if isinstance(t, torch.Tensor)),
            "optimizer")

    for step in range(2):  # step 2 is the steady state: optimizer state exists
        if step == 1:
            tracker.reset_peak()
        with tracker.phase("forward"):
            if spec.dpo != "off":  # chosen and rejected concatenated: twice the micro-batch
                pairs = spec.model_copy(update={"micro_batch_size": 2 * spec.micro_batch_size})
                ids = make_inputs(model.config, fam, pairs, True, pixel_dtype)["input_ids"]
                loss = _dpo_loss(spec, model, ref, ids, amp)
                del ids
                batch = None
            else:
                batch = make_inputs(model.config, fam, spec, True, pixel_dtype)
                loss = (_chunked_loss(model, batch, amp) if spec.loss == "chunked"
                        else _forward_loss(model, batch, amp))
            del batch
        with tracker.phase("backward"):
            loss.backward()
            del loss
        with tracker.phase("optimizer"):
            torch.nn.utils.clip_grad_norm_(trainable, 1.0)
            optimizer.step()
            tag_state()
            optimizer.zero_grad(set_to_none=True)


def _forward_loss(model, batch, amp):
    """Forward + loss as HF Trainer does it; with AMP, accelerate converts the outputs to fp32."""
    import torch

    if amp is None:
        return model(**batch)["loss"]
    from accelerate.utils import convert_to_fp32

    with torch.autocast("cpu", dtype=amp):
        out = model(**batch)
    out = convert_to_fp32(out)
    return out["loss"]


#: DPO's beta (TRL DPOConfig default): a scalar, no memory of its own
DPO_BETA = 0.1


def _logits(model, ids, amp):
    """The logits of `ids`; with AMP, in fp32 as accelerate's wrapped forward returns them."""
    import torch

    if amp is None:
        return model(input_ids=ids).logits
    from accelerate.utils import convert_to_fp32

    with torch.autocast("cpu", dtype=amp):
        logits = model(input_ids=ids).logits
    return convert_to_fp32(logits)


def _selective_log_softmax(logits, index):
    """TRL's selective_log_softmax (trl/trainer/utils.py): fp32 logits gather then a logsumexp per row; 16-bit ones a
    log_softmax per row."""
    import torch
    import torch.nn.functional as F

    if logits.dtype in (torch.float32, torch.float64):
        selected = torch.gather(logits, dim=-1, index=index.unsqueeze(-1)).squeeze(-1)
        return selected - torch.stack([torch.logsumexp(row, dim=-1) for row in logits])
    return torch.stack([F.log_softmax(row, dim=-1).gather(-1, i.unsqueeze(-1)).squeeze(-1)
                        for row, i in zip(logits, index)])


def _sequence_logps(model, ids, amp):
    """Summed log-probabilities of each sequence's next tokens (TRL DPOTrainer._compute_loss: the logits shifted by
    one, selective_log_softmax, summed over the sequence)."""
    logits = _logits(model, ids, amp)
    logps = _selective_log_softmax(logits[..., :-1, :], ids[..., 1:]).sum(dim=1)
    del logits
    return logps


def _dpo_loss(spec, model, ref, ids, amp):
    """A DPO step's loss as TRL's DPOTrainer._compute_loss takes it (trl@f2cd577, 2026-07-24): the policy's
    log-probabilities over the chosen and rejected sequences together, then, while the policy's graph is alive, the
    reference's without grad (the frozen copy, or the policy with its adapters disabled; precomputed: given), and
    the sigmoid loss on the margins."""
    import contextlib

    import torch
    import torch.nn.functional as F

    n = ids.shape[0] // 2
    logps = _sequence_logps(model, ids, amp)
    if spec.dpo == "model":
        with torch.no_grad():
            off = model.disable_adapter() if ref is None else contextlib.nullcontext()
            with off:
                ref_logps = _sequence_logps(ref if ref is not None else model, ids, amp)
    else:
        ref_logps = torch.zeros(ids.shape[0])
    margin = (logps[:n] - ref_logps[:n]) - (logps[n:] - ref_logps[n:])
    return -F.logsigmoid(DPO_BETA * margin).mean()


#: chunks of the sequence the chunked loss takes one at a time (torchtune num_output_chunks)
LOSS_CHUNKS = 8


def _chunked_loss(model, batch, amp):
    """torchtune's CEWithChunkedOutputLoss: the base model's hidden states, then per chunk of the sequence the LM
    head and cross-entropy on the logits upcast to fp32; the full logits never exist at once."""
    import contextlib

    import torch
    import torch.nn.functional as F

    base, head = model.base_model, model.get_output_embeddings()
    if head is None:
        raise ValueError("loss: chunked needs a model with an LM head (a decoder)")
    ctx = torch.autocast("cpu", dtype=amp) if amp is not None else contextlib.nullcontext()
    labels = batch["labels"]
    with ctx:
        hidden = base(input_ids=batch["input_ids"]).last_hidden_state
        total = 0.0
        for h, y in zip(hidden.chunk(LOSS_CHUNKS, dim=1), labels.chunk(LOSS_CHUNKS, dim=1)):
            total = total + F.cross_entropy(head(h).float().flatten(0, 1), y.flatten(), reduction="sum")
    return total / labels.numel()


def _prefill(spec, model, fam, tracker) -> int:
    import inspect

    import torch

    from .build import make_inputs

    kwargs: dict[str, Any] = {}
    if fam in ("decoder", "seq2seq"):
        kwargs["use_cache"] = True
        if fam == "decoder" and "logits_to_keep" in inspect.signature(model.forward).parameters:
            kwargs["logits_to_keep"] = 1
    pixel_dtype = next(model.parameters()).dtype
    with torch.no_grad(), tracker.phase("prefill"):
        batch = make_inputs(model.config, fam, spec, False, pixel_dtype)
        out = model(**batch, **kwargs)
    cache = out.get("cache", None)
    if cache is None:
        cache = out.get("past_key_values", None)
    kv = tracker.live_bytes(_tensors_in(cache)) if cache is not None else 0
    del out
    return kv


def _tensors_in(obj, depth: int = 4, seen=None):
    import torch

    seen = set() if seen is None else seen
    if id(obj) in seen or depth < 0:
        return
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _tensors_in(o, depth - 1, seen)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors_in(o, depth - 1, seen)
    elif hasattr(obj, "__dict__") and not isinstance(obj, torch.nn.Module):
        for o in vars(obj).values():
            yield from _tensors_in(o, depth - 1, seen)
