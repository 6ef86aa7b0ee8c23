"""Unit tests of the tracer's parts: the storage tracker, the CUDA emulation (autocast lists, dropout,
SDPA kernel rules) and an independent check against PyTorch's MemTracker."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

LLAMA = dict(model_type="llama", hidden_size=64, intermediate_size=128, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, vocab_size=1000)
pytestmark = pytest.mark.trace


@pytest.mark.parametrize("fake", [False, True])
def test_tracker_counts_storages_once_rounded(fake: bool) -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    from gpuplan.trace.tracker import MemoryTracker

    with FakeTensorMode() if fake else torch.autocast("cpu", enabled=False):
        tr = MemoryTracker()
        with tr:
            a = torch.empty(1000)  # 4000 B -> 4096
            b = a.view(10, 100)  # view: same storage
            c = a + 1
            assert (tr.current, tr.peak) == (8192, 8192)
            del a
            assert tr.current == 8192  # b keeps the storage alive
            del b
            assert tr.current == 4096
            d = torch.tensor(3.0)  # a literal: host memory on a GPU run
            assert tr.current == 4096 and tr.host_storages == 1
            tr.track(c, category="gradients")
            assert tr.cat_bytes["gradients"] == 4096
            del c, d
            assert tr.current == 0 and tr.peak == 8192 and tr.cat_bytes["gradients"] == 0


def test_emulated_autocast_follows_cuda_lists() -> None:
    import torch.nn.functional as F

    from gpuplan.trace.cuda_emulation import cuda_emulation

    x, w = torch.randn(4, 8), torch.randn(8, 8)
    with cuda_emulation(True), torch.autocast("cpu", dtype=torch.bfloat16):
        h = x @ w
        assert h.dtype == torch.bfloat16
        assert F.layer_norm(h, (8,)).dtype == torch.float32  # fp32 list on CUDA, not on CPU
        assert F.softmax(h, -1).dtype == torch.float32  # fp32_set_opt_dtype
        assert torch.pow(h, 3.0).dtype == torch.float32
        assert F.gelu(h).dtype == torch.bfloat16  # not listed: runs in its input dtype
        assert torch.cat([h, h]).dtype == torch.bfloat16  # CPU-only promote entry falls through
        assert torch.arange(4).cumsum(0).dtype == torch.int64
    with torch.autocast("cpu", dtype=torch.bfloat16):  # uninstalled again: CPU lists
        assert F.layer_norm(x @ w, (8,)).dtype == torch.bfloat16


def test_emulated_dropout_keeps_a_bool_mask() -> None:
    import torch.nn.functional as F
    from torch.utils._python_dispatch import TorchDispatchMode

    from gpuplan.trace.cuda_emulation import cuda_emulation

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.seen.append(func)
            return func(*args, **(kwargs or {}))

    x = torch.randn(4, 8, requires_grad=True)
    with cuda_emulation(True), Ops() as ops:
        F.dropout(x, 0.1, True).sum().backward()
    assert torch.ops.aten.native_dropout.default in ops.seen
    assert torch.ops.aten.bernoulli_.float not in ops.seen


def test_sdpa_backend_rules() -> None:
    from gpuplan.trace.sdpa import select_backend

    def qkv(dtype, hq=4, hk=4, d=64, s=16):
        return (torch.empty(2, hq, s, d, dtype=dtype), torch.empty(2, hk, s, d, dtype=dtype),
                torch.empty(2, hk, s, d, dtype=dtype))

    bf, f32 = torch.bfloat16, torch.float32
    mask = torch.ones(2, 1, 16, 16, dtype=torch.bool)
    assert select_backend(*qkv(bf), None, 0.1, True, False) == "flash"  # dropout is fused
    assert select_backend(*qkv(bf, hk=2), None, 0.0, True, True) == "flash"  # GQA
    assert select_backend(*qkv(bf, hk=1), None, 0.0, True, False) == "flash"  # implicit MQA
    assert select_backend(*qkv(bf, hk=2), None, 0.0, True, False) == "math"  # GQA without enable_gqa
    assert select_backend(*qkv(bf), mask, 0.0, False, False) == "efficient"  # masks: not flash
    assert select_backend(*qkv(f32), None, 0.0, True, False) == "efficient"  # fp32: not flash
    assert select_backend(*qkv(bf, d=512), None, 0.0, True, False) == "efficient"  # head_dim > 256
    assert select_backend(*qkv(f32, d=30), None, 0.0, True, False) == "math"  # misaligned head_dim


def test_tracker_agrees_with_pytorch_memtracker() -> None:
    """Independent check on a real CPU step: MemTracker (no rounding off CUDA) sees the same peak."""
    from torch.distributed._tools.mem_tracker import MemTracker
    from transformers import AutoConfig, AutoModelForCausalLM

    from gpuplan.trace.build import hf_patches
    from gpuplan.trace.cuda_emulation import cuda_emulation
    from gpuplan.trace.tracker import MemoryTracker

    torch.manual_seed(0)
    conf = AutoConfig.for_model(**LLAMA)
    model = AutoModelForCausalLM.from_config(conf, attn_implementation="sdpa").train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    theirs, mine = MemTracker(), MemoryTracker(block=1, count_host=True)
    theirs.track_external(model, opt)

    def step():
        ids = torch.randint(0, 1000, (2, 64))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids.clone())["loss"]
        loss.backward()
        del loss
        torch.nn.utils.clip_grad_norm_(list(model.parameters()), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    with hf_patches(), cuda_emulation(True, {}, mine), theirs, mine:
        for p in model.parameters():
            mine.track(p, category="parameters")
        for b in model.buffers():
            mine.track(b)
        step()
        mine.reset_peak()
        theirs.reset_mod_stats()
        step()
    (peak,) = [snap["Total"] for snap in theirs.get_tracker_snapshot("peak").values()]
    assert mine.peak == peak
