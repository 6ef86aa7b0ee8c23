"""Storage-level memory tracker: a TorchDispatchMode that mimics the CUDA caching allocator's counters.

Every tensor that comes out of an aten op is looked at; its *storage* is counted once (views share it), rounded
up to 512 bytes (the caching allocator's minimum block), from the moment it first appears until a weakref
finaliser on the storage fires.  `current` and `peak` then follow what `torch.cuda.memory_allocated()` and
`torch.cuda.max_memory_allocated()` report for the same program on a GPU (minus allocations that never become
tensors, see docs/tracer.md).

Category split: storages can be tagged (parameters, gradients, optimizer); running per-category sums are kept
so that the split at each new peak is an O(1) copy.  Untagged storages are "other" (activations, temporaries,
buffers, KV cache, inputs).
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Iterable
from contextlib import contextmanager

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

BLOCK = 512
CATEGORIES = ("parameters", "gradients", "optimizer", "other")

# Tensors made from Python literals (`torch.tensor(0.0)`) enter through lift_fresh.  On a GPU run these are
# host tensors (AdamW's `step` counters, the `torch.tensor(1.0, device="cpu")` it adds to them), so they
# are not device memory: count them nowhere.
_HOST_OPS = {torch.ops.aten.lift_fresh.default, torch.ops.aten.lift_fresh_copy.default}


def round_up(nbytes: int, block: int = BLOCK) -> int:
    return -(-nbytes // block) * block if block > 1 else nbytes


def storage_key(t: torch.Tensor) -> int:
    return t.untyped_storage()._cdata


class MemoryTracker(TorchDispatchMode):
    """Counts live tensor storages.  Use as a context manager (inside FakeTensorMode for fake runs)."""

    def __init__(self, block: int = BLOCK, count_host: bool = False) -> None:
        super().__init__()
        self.block = block
        self.count_host = count_host  # True: count literal tensors too (to compare with MemTracker)
        self.live: dict[int, int] = {}  # storage key -> counted bytes
        self._refs: dict[int, weakref.ref] = {}
        self.tags: dict[int, str] = {}  # storage key -> category (absent: "other")
        self.cat_bytes: dict[str, int] = dict.fromkeys(CATEGORIES, 0)
        self.current = 0
        self.peak = 0
        self.peak_split: dict[str, int] = dict(self.cat_bytes)
        self.phase_peaks: dict[str, int] = {}
        self._phase: str | None = None
        self.paused = 0
        self.host_storages = 0  # literal tensors left out (see _HOST_OPS)

    # ------------------------------------------------------------------ dispatch
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not self.paused:
            host = func in _HOST_OPS and not self.count_host
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor):
                    self.track(t, host=host)
        return out

    @contextmanager
    def pause(self):
        """Ops run inside are not recorded (used to compute real values behind an emulated kernel)."""
        self.paused += 1
        try:
            yield
        finally:
            self.paused -= 1

    # ------------------------------------------------------------------ accounting
    def track(self, t: torch.Tensor, host: bool = False, category: str | None = None) -> None:
        if t.device.type == "meta":
            return
        st = t.untyped_storage()
        key = st._cdata
        nbytes = round_up(st.nbytes(), self.block)
        old = self.live.get(key)
        if old is not None:
            if old != nbytes and old >= 0:  # resized in place (out= ops)
                self._add(key, nbytes - old)
                self.live[key] = nbytes
            if category is not None:
                self.tag(key, category)
            return
        if host:
            self.live[key] = -1  # known, but not device memory
            self.host_storages += 1
        else:
            self.live[key] = nbytes
            if category is not None:
                self.tags[key] = category
            self._add(key, nbytes)
        self._refs[key] = weakref.ref(st, functools.partial(self._freed, key))

    def _add(self, key: int, delta: int) -> None:
        self.current += delta
        self.cat_bytes[self.tags.get(key, "other")] += delta
        if delta > 0:
            if self.current > self.peak:
                self.peak = self.current
                self.peak_split = dict(self.cat_bytes)
            if self._phase is not None and self.current > self.phase_peaks[self._phase]:
                self.phase_peaks[self._phase] = self.current

    def _freed(self, key: int, _ref: object) -> None:
        """The storage `key` was collected (a weakref callback)."""
        self._free(key)

    def _free(self, key: int) -> None:
        nbytes = self.live.pop(key, None)
        self._refs.pop(key, None)
        if nbytes is not None and nbytes >= 0:
            self._add(key, -nbytes)
        self.tags.pop(key, None)

    def tag(self, key: int, category: str) -> None:
        """(Re)categorise a tracked storage; its bytes move between the running sums."""
        nbytes = self.live.get(key)
        if nbytes is None or nbytes < 0:
            return
        old = self.tags.get(key, "other")
        if old == category:
            return
        self.cat_bytes[old] -= nbytes
        self.cat_bytes[category] += nbytes
        if category == "other":
            self.tags.pop(key, None)
        else:
            self.tags[key] = category

    def tag_tensors(self, tensors: Iterable[torch.Tensor], category: str) -> None:
        for t in tensors:
            if isinstance(t, torch.Tensor):
                self.track(t, category=category)

    # ------------------------------------------------------------------ phases
    def reset_peak(self) -> None:
        """Like torch.cuda.reset_peak_memory_stats(): the peak restarts from the current level."""
        self.peak = self.current
        self.peak_split = dict(self.cat_bytes)
        self.phase_peaks = {}

    @contextmanager
    def phase(self, name: str):
        """Record the peak reached while the block runs under `name` (phase_peaks)."""
        prev = self._phase
        self._phase = name
        self.phase_peaks[name] = max(self.phase_peaks.get(name, 0), self.current)
        try:
            yield
        finally:
            self._phase = prev

    def live_bytes(self, tensors: Iterable[torch.Tensor]) -> int:
        """Counted bytes of the distinct storages behind `tensors` (e.g. a KV cache)."""
        seen: dict[int, int] = {}
        for t in tensors:
            st = t.untyped_storage()
            seen[st._cdata] = round_up(st.nbytes(), self.block)
        return sum(seen.values())
