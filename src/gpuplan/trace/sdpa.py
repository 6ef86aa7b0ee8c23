"""scaled_dot_product_attention with the memory footprint of CUDA's kernels (installed by cuda_emulation).

The CPU build picks `_scaled_dot_product_flash_attention_for_cpu` (out + fp32 logsumexp, no seq x seq tensor)
when it can, but falls back to the math path (seq x seq scores, softmax, dropout mask) for dropout > 0,
and CPU's choice rules are not CUDA's.  Here the backend is chosen with CUDA's rules (sdp_utils.cpp, sm80+ GPU)
and each backend allocates what the CUDA kernel allocates:

* flash (fp16/bf16, no mask, head_dim <= 256, GQA native, dropout fused):
  q/k/v padded to a multiple of 8 if needed; forward out (layout of q) + logsumexp fp32 (b, h, s_q);
  backward dq/dk/dv + transient softmax_d fp32 (b, h, s_q^128), dq_accum fp32 (b, s_q^128, h, d^32) and,
  for GQA, dk/dv expanded to all query heads (b, s_k, h, d) (flash_api.cpp mha_bwd).
* efficient (fp16/bf16/fp32, any mask, head_dim aligned, GQA native):
  bool mask -> additive mask, expanded to (b, h, s_q, s_k) and padded to a multiple of 16 (kept for backward);
  forward out (b, s_q, h, d_v) + logsumexp fp32 (b, h, s_q^32) (empty under no_grad);
  backward dq/dk/dv (+ d_mask when the mask needs grad, last dim padded to 16) + delta fp32 (b, h, s_q)
  (computed from grad_out * out in fp32 when the kernel does not compute it: fp32 inputs).
* math (anything else): the aten composite (fp32 upcast, repeat_interleave for GQA, seq x seq scores).

Values: under FakeTensorMode nothing is computed.  With real tensors the numbers are computed by the CPU
kernels with the tracker paused and copied into the emulated buffers, so the real run allocates exactly
what the fake one does.  Dropout inside the fused kernels is not applied to the values (memory is the point).
Not modelled: the efficient kernel's internal fp32 workspace / output accumulator, split-KV buffers, cuDNN.
"""

from __future__ import annotations

import math
from contextlib import nullcontext

import torch
import torch.nn.functional as F

aten = torch.ops.aten
_HALF = (torch.float16, torch.bfloat16)


def _r(x: int, m: int) -> int:
    return -(-x // m) * m


def _is_fake(t: torch.Tensor) -> bool:
    from torch._subclasses.fake_tensor import is_fake

    return is_fake(t)


def _heads_ok(q, k, v, enable_gqa: bool) -> bool:
    hq, hk, hv = q.shape[-3], k.shape[-3], v.shape[-3]
    if hq == hk == hv or hk == hv == 1:  # equal heads, or implicit MQA broadcast (sdp_utils supports_mqa)
        return True
    return enable_gqa and hk == hv and hk > 0 and hq % hk == 0


def select_backend(q, k, v, mask, dropout_p, is_causal, enable_gqa) -> str:
    """CUDA's choice (flash, then efficient, then math) for an sm80+ GPU."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4 or q.dtype != k.dtype or q.dtype != v.dtype:
        return "math"
    if min(q.shape[-2], k.shape[-2]) == 0 or q.shape[0] != k.shape[0] or not _heads_ok(q, k, v, enable_gqa):
        return "math"
    dq, dk, dv = q.shape[-1], k.shape[-1], v.shape[-1]
    last1 = all(t.stride(-1) == 1 for t in (q, k, v))
    if (
        q.dtype in _HALF and mask is None and dq == dk == dv and dq <= 256
        and (not is_causal or q.shape[-2] == k.shape[-2])
        and all(t.stride(-1) == 1 or t.shape[-1] == 1 for t in (q, k, v))
    ):
        return "flash"
    if q.dtype in _HALF + (torch.float32,) and last1 and dq == dk:
        align = 8 if q.dtype in _HALF else 4
        offsets_ok = all((t.storage_offset() % align) == 0 for t in (q, k, v))
        if dq % align == 0 and dv % align == 0 and offsets_ok:
            return "efficient"
    return "math"


def _values(tracker):
    return tracker.pause() if tracker is not None else nullcontext()


class _Flash(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, dropout_p, is_causal, scale, tracker):
        b, h, s_q, _ = q.shape
        out = torch.empty_like(q.transpose(1, 2)).transpose(1, 2)
        lse = q.new_empty((b, h, s_q), dtype=torch.float32)
        if not _is_fake(q):
            with _values(tracker), torch.no_grad():
                o, l_ = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, is_causal, scale=scale)[:2]
                out.copy_(o)
                lse.copy_(l_)
                del o, l_
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.args = (is_causal, scale, tracker)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        is_causal, scale, tracker = ctx.args
        b, h, s_q, d = q.shape
        s_k, h_k = k.shape[-2], k.shape[-3]
        go = grad_out.transpose(1, 2).contiguous().transpose(1, 2)  # kernel wants (b, s, h, d) contiguous
        dq = torch.empty_like(q.transpose(1, 2)).transpose(1, 2)
        dk = torch.empty_like(k.transpose(1, 2)).transpose(1, 2)
        dv = torch.empty_like(v.transpose(1, 2)).transpose(1, 2)
        tmp = [q.new_empty((b, h, _r(s_q, 128)), dtype=torch.float32),  # softmax_d
               q.new_empty((b, _r(s_q, 128), h, _r(d, 32)), dtype=torch.float32)]  # dq_accum
        if h_k != h:  # GQA: dk/dv for all query heads, then summed per group
            tmp += [q.new_empty((b, s_k, h, d)), q.new_empty((b, s_k, h, v.shape[-1]))]
        if not _is_fake(q):
            with _values(tracker), torch.no_grad():
                g = aten._scaled_dot_product_flash_attention_for_cpu_backward(
                    go, q, k, v, out, lse, 0.0, is_causal, scale=scale)
                for dst, src in zip((dq, dk, dv), g):
                    dst.copy_(src)
                del g
        del tmp, go
        return dq, dk, dv, None, None, None, None


class _Efficient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, bias, compute_lse, dropout_p, is_causal, scale, enable_gqa, tracker):
        b, h, s_q, _ = q.shape
        out = q.new_empty((b, s_q, h, v.shape[-1])).transpose(1, 2)
        lse = q.new_empty((b, h, _r(s_q, 32) if compute_lse else 0), dtype=torch.float32)
        if not _is_fake(q):
            with _values(tracker), torch.no_grad():
                o = aten._scaled_dot_product_attention_math(
                    q, k, v, bias, 0.0, is_causal, None, scale=scale, enable_gqa=enable_gqa)[0]
                out.copy_(o)
                del o
        ctx.save_for_backward(q, k, v, bias, out, lse)
        ctx.args = (is_causal, scale, enable_gqa, tracker, bias is not None)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, bias, out, lse = ctx.saved_tensors
        is_causal, scale, enable_gqa, tracker, has_bias = ctx.args
        b, h, s_q, d = q.shape
        dq = torch.empty_like(q.transpose(1, 2)).transpose(1, 2)
        dk = torch.empty_like(k.transpose(1, 2)).transpose(1, 2)
        dv = torch.empty_like(v.transpose(1, 2)).transpose(1, 2)
        dbias = None
        if has_bias and ctx.needs_input_grad[3]:
            dbias = bias.new_empty(bias.shape[:-1] + (_r(bias.shape[-1], 16),))[..., : bias.shape[-1]]
        go_t, out_t = grad_out.transpose(1, 2), out.transpose(1, 2)
        if q.dtype in _HALF:
            delta = q.new_empty((b, h, s_q), dtype=torch.float32)
        else:
            delta = (go_t.float() * out_t.float()).sum(-1).transpose(-2, -1).contiguous()
        tmp = [delta]
        if k.shape[-3] != h:
            tmp += [q.new_empty((b, k.shape[-2], h, d)), q.new_empty((b, k.shape[-2], h, v.shape[-1]))]
        if not _is_fake(q):
            with _values(tracker), torch.enable_grad():
                qq, kk, vv = (t.detach().requires_grad_() for t in (q, k, v))
                bb = bias.detach().requires_grad_(dbias is not None) if has_bias else None
                o = aten._scaled_dot_product_attention_math(
                    qq, kk, vv, bb, 0.0, is_causal, None, scale=scale, enable_gqa=enable_gqa)[0]
                inputs = [qq, kk, vv] + ([bb] if dbias is not None else [])
                g = torch.autograd.grad(o, inputs, grad_out)
                with torch.no_grad():
                    for dst, src in zip([dq, dk, dv] + ([dbias] if dbias is not None else []), g):
                        dst.copy_(src)
                del o, g, inputs, qq, kk, vv, bb
        del tmp, go_t, out_t
        return dq, dk, dv, dbias, None, None, None, None, None, None


def _convert_boolean_mask(mask, dtype):
    if mask is None or mask.dtype != torch.bool:
        return mask
    zero = torch.zeros((), dtype=dtype, device=mask.device)
    return torch.where(mask, zero, torch.full((), -math.inf, dtype=dtype, device=mask.device))


def _preprocess_mask(mask, q, k):
    """attention.cpp preprocess_mask: expand to 4-D, pad the last dim to 16 (or make strides 16-aligned)."""
    m = mask.expand(q.shape[0], q.shape[1], q.shape[2], k.shape[2])
    last = m.shape[-1]
    if last % 16:
        return F.pad(m, (0, 16 - last % 16))[..., :last]
    if m.stride(0) % 16 or m.stride(1) % 16 or m.stride(2) % 16:
        return m.contiguous()
    return m


def _pad8(t):
    d = t.shape[-1]
    return t if d % 8 == 0 else F.pad(t, (0, 8 - d % 8))


def cuda_like_sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False,
                   stats=None, tracker=None):
    backend = select_backend(q, k, v, attn_mask, dropout_p, is_causal, enable_gqa)
    if stats is not None:
        stats[backend] = stats.get(backend, 0) + 1
    if backend == "flash":
        d = q.shape[-1]
        og_scale = scale if scale is not None else 1.0 / math.sqrt(d)
        out = _Flash.apply(_pad8(q), _pad8(k), _pad8(v), dropout_p, is_causal, og_scale, tracker)
        return out if d % 8 == 0 else out[..., :d]
    mask = _convert_boolean_mask(attn_mask, q.dtype)
    if backend == "efficient":
        compute_lse = q.requires_grad or k.requires_grad or v.requires_grad
        if mask is not None:
            mask = _preprocess_mask(mask, q, k)
        return _Efficient.apply(q, k, v, mask, compute_lse, dropout_p, is_causal, scale, enable_gqa, tracker)
    return aten._scaled_dot_product_attention_math(
        q, k, v, mask, dropout_p, is_causal, None, scale=scale, enable_gqa=enable_gqa)[0]
