"""Make a CPU (or fake CPU) run allocate like the CUDA code path does.

Installed for the duration of a trace by `cuda_emulation()` (torch.library registrations, removed on exit):

* dropout: `aten::dropout` in training takes CUDA's fused path, `native_dropout`, which keeps a *bool* mask
  (the CPU composite keeps a mask in the input dtype).
* autocast: while CPU autocast is on, ops follow CUDA's autocast lists (aten/src/ATen/autocast_mode.h):
  fp32 ops (layer_norm, pow, exp, softmax-with-dtype, nll_loss, ...) upcast, promote ops promote, and the
  CPU-only entries (cat/stack promotion, cross_entropy_loss in fp32, ...) behave as on CUDA (no autocast).
  Lower-precision ops that both lists share keep the C++ kernel (and its weight-cast cache).
* scaled_dot_product_attention: see sdpa.py (CUDA backend choice and kernel footprints).
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager

import torch

aten = torch.ops.aten
_AUTOCAST_CPU = torch._C.DispatchKey.AutocastCPU
_EXCLUDE = torch._C.DispatchKeySet(_AUTOCAST_CPU)

# CUDA autocast policy by op base name (autocast_mode.h + what this torch registers for AutocastCUDA).
_LOWER = set(
    "_convolution conv1d conv2d conv3d conv_tbc conv_transpose1d conv_transpose2d conv_transpose3d convolution "
    "prelu addmm addmv addr matmul einsum mm mv linalg_vecdot linear addbmm baddbmm bmm chain_matmul "
    "linalg_multi_dot _thnn_fused_lstm_cell _thnn_fused_gru_cell lstm_cell gru_cell rnn_tanh_cell rnn_relu_cell "
    "_scaled_dot_product_flash_attention scaled_dot_product_attention cudnn_convolution "
    "cudnn_convolution_transpose".split()
)
_FP32 = set(
    "acos asin cosh erfinv exp expm1 log log10 log2 log1p reciprocal rsqrt sinh tan pow softplus layer_norm "
    "native_layer_norm group_norm rms_norm frobenius_norm nuclear_norm cosine_similarity poisson_nll_loss "
    "cosine_embedding_loss nll_loss nll_loss2d hinge_embedding_loss kl_div l1_loss smooth_l1_loss huber_loss "
    "mse_loss margin_ranking_loss multilabel_margin_loss soft_margin_loss triplet_margin_loss multi_margin_loss "
    "binary_cross_entropy_with_logits dist pdist cdist renorm logsumexp upsample_nearest1d "
    "_upsample_nearest_exact1d upsample_nearest2d _upsample_nearest_exact2d upsample_nearest3d "
    "_upsample_nearest_exact3d upsample_linear1d upsample_bilinear2d _upsample_bilinear2d_aa upsample_trilinear3d "
    "upsample_bicubic2d _upsample_bicubic2d_aa".split()
)
_FP32_SET_OPT_DTYPE = set(
    "prod softmax log_softmax cumprod cumsum linalg_vector_norm linalg_matrix_norm sum".split()
)
_FP32_APPEND_DTYPE = {"norm"}
_PROMOTE = set("addcdiv addcmul atan2 bilinear cross dot vdot grid_sampler index_put tensordot scatter_add".split())
_BANNED = {"binary_cross_entropy"}


def cuda_policy(qualname: str) -> str | None:
    base = qualname.split("::")[-1].split(".")[0]
    for policy, names in (
        ("lower", _LOWER),
        ("fp32", _FP32),
        ("fp32_set_opt_dtype", _FP32_SET_OPT_DTYPE),
        ("fp32_append_dtype", _FP32_APPEND_DTYPE),
        ("promote", _PROMOTE),
        ("banned", _BANNED),
    ):
        if base in names:
            return policy
    return None


def _registered(key: str) -> set[str]:
    return {
        n for n in torch._C._dispatch_get_all_op_names()
        if n.startswith("aten::") and torch._C._dispatch_has_kernel_for_dispatch_key(n, key)
    }


def _op(qualname: str):
    name = qualname.split("::")[1]
    base, _, overload = name.partition(".")
    return getattr(getattr(aten, base), overload or "default")


def _eligible(t) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != torch.float64


def _cast(x, dtype):
    if _eligible(x) and x.dtype != dtype:
        return x.to(dtype)
    if isinstance(x, (list, tuple)) and x and all(isinstance(e, torch.Tensor) or e is None for e in x):
        return type(x)(_cast(e, dtype) for e in x)
    return x


def _make_kernel(op, policy: str):
    schema_args = [a.name for a in op._schema.arguments]

    def call_excluded(args, kwargs):
        with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
            return op(*args, **kwargs)

    if policy == "passthrough":
        def passthrough(keyset, *args, **kwargs):  # CUDA has no autocast kernel: fall through, autocast stays on
            return op.redispatch(keyset.remove(_AUTOCAST_CPU), *args, **kwargs)
        return passthrough

    def kernel(keyset, *args, **kwargs):
        if policy == "lower":
            dtype = torch.get_autocast_dtype("cpu")
            return call_excluded([_cast(a, dtype) for a in args], {k: _cast(v, dtype) for k, v in kwargs.items()})
        if policy == "fp32":
            f = torch.float32
            return call_excluded([_cast(a, f) for a in args], {k: _cast(v, f) for k, v in kwargs.items()})
        if policy == "promote":
            dtype = torch.get_autocast_dtype("cpu")
            for a in list(args) + list(kwargs.values()):
                for t in (a if isinstance(a, (list, tuple)) else [a]):
                    if _eligible(t):
                        dtype = torch.promote_types(dtype, t.dtype)
            return call_excluded([_cast(a, dtype) for a in args], {k: _cast(v, dtype) for k, v in kwargs.items()})
        if policy == "fp32_set_opt_dtype":
            if args and _eligible(args[0]) and "dtype" in schema_args:
                i = schema_args.index("dtype")
                if len(args) > i:
                    if args[i] is None:
                        args = args[:i] + (torch.float32,) + args[i + 1:]
                elif kwargs.get("dtype") is None:
                    kwargs = {**kwargs, "dtype": torch.float32}
            return call_excluded(args, kwargs)
        if policy == "fp32_append_dtype":
            if args and _eligible(args[0]):
                target = aten.norm.ScalarOpt_dtype if len(args) + len(kwargs) <= 2 else aten.norm.ScalarOpt_dim_dtype
                with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
                    return target(*args, **kwargs, dtype=torch.float32)
            return call_excluded(args, kwargs)
        if policy == "banned":
            raise RuntimeError(f"{op} is unsafe to autocast (banned by CUDA autocast)")
        raise AssertionError(policy)

    return kernel


def _register_autocast(lib) -> None:
    cuda_ops, cpu_ops = _registered("AutocastCUDA"), _registered("AutocastCPU")
    for qualname in sorted(cuda_ops | cpu_ops):
        policy = cuda_policy(qualname) if qualname in cuda_ops else "passthrough"
        if policy is None:  # a newer torch autocasts an op these lists do not know: leave it as on CPU
            warnings.warn(f"gpuplan.trace: no CUDA autocast policy known for {qualname}; CPU behaviour kept",
                          stacklevel=1)
            continue
        if policy == "lower" and qualname in cpu_ops:
            continue  # same policy on CPU: keep the C++ kernel and its weight-cast cache
        try:
            op = _op(qualname)
        except AttributeError:
            continue
        lib.impl(qualname.split("::")[1], _make_kernel(op, policy), "AutocastCPU", with_keyset=True)


def _dropout(input, p, train):
    # at::dropout on CUDA: the fused kernel (bool mask) when training with 0 < p < 1; else the composite path.
    if train and 0.0 < p < 1.0 and input.numel() > 0:
        return aten.native_dropout(input, p, train)[0]
    if not train or p == 0.0 or input.numel() == 0:
        return input
    return input * torch.zeros((), dtype=input.dtype, device=input.device)


@contextmanager
def cuda_emulation(enabled: bool = True, sdpa_stats: dict | None = None, tracker=None):
    """Install the CUDA-like kernels for the duration of the block (no-op when disabled)."""
    if not enabled:
        yield
        return
    from .sdpa import cuda_like_sdpa

    lib = torch.library.Library("aten", "IMPL")
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="(?s).*Overriding a previously registered kernel")
            lib.impl("dropout", _dropout, "CompositeImplicitAutograd")

            def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
                return cuda_like_sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa,
                                      stats=sdpa_stats, tracker=tracker)

            lib.impl("scaled_dot_product_attention", sdpa, "CompositeImplicitAutograd")
            _register_autocast(lib)
        yield
    finally:
        lib._destroy()
