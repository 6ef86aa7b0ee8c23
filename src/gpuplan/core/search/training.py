"""The training side of the search's kernel: every layout of a workload on n GPUs with its micro-batches
(`TrainingSpace.configs`), their memory after the planned growth (`grown_bytes`) and the fastest of a few on one GPU
type (`fastest`).

Each layout (GPU count, tensor and pipeline parallel degrees, ZeRO stage, recomputation) is a `LayoutGroup` made once
per search, its micro-batches sized by the memory kernel (core/sizing/layout_memory.py) in one call per family of
layouts (n GPUs at one tensor and pipeline parallel degree): a few multiplications each.
A configuration's step work (core/sizing/step.StepWork: what a step asks of each GPU whatever the GPU) is made once,
when it is first timed, and timed on each GPU type with its rates (core/sizing/step_time.py). `computed` and `timed`
count what was computed: each configuration's memory once, each timing once. Pure."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from gpuplan.core.search.shapes import Config, LayoutGroup, layout_of, order_key, pow2_upto
from gpuplan.core.sizing.grpo import rollout_device_bytes, rollout_engine_memory, rollout_share, timed_step
from gpuplan.core.sizing.grpo_pools import engine_utilization
from gpuplan.core.sizing.grpo_share import equivalent_bytes
from gpuplan.core.sizing.layout_memory import Allocator, AmpCasts, LayoutMemory, device_bytes_of, step_peaks
from gpuplan.core.sizing.params import ParamCount, count_params
from gpuplan.core.sizing.project import grow_arch
from gpuplan.core.sizing.step import StepWork, WorkCache
from gpuplan.core.sizing.step_time import GpuRates, StepTime, timed
from gpuplan.core.sizing.training_memory import MemoryCache, layout_memory
from gpuplan.schema.estimate import ActivationTable, MemoryBreakdown, Overheads
from gpuplan.schema.framework import FrameworkCaps
from gpuplan.schema.hardware import Gpu
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Layout, Workload
from gpuplan.schema.serving import ServingData
from gpuplan.schema.speed import SpeedModel


class FamilyKey(NamedTuple):
    """The layouts of n GPUs with one tensor and pipeline parallel degree (their ZeRO stages and recomputation
    choices)."""

    n: int
    tp: int
    pp: int


class Timed:
    """The fastest configuration of a few on one GPU type: wall hours (hours per billion tokens without a token
    count), the configuration, its work and its step."""

    __slots__ = ("config", "metric", "step", "work")

    def __init__(self, metric: float, config: Config, work: StepWork, step: StepTime) -> None:
        self.metric = metric
        self.config = config
        self.work = work
        self.step = step


class GrownModel(NamedTuple):
    """The model `factor` times the planned growth (`GrownModels.at`)."""

    arch: ModelArch
    params: ParamCount


class GrownModels:
    """The model grown by the planned growth (`model_scale`), and `factor` times that (the growth view's 1.5 and 2),
    made once per factor."""

    __slots__ = ("arch", "models", "scale")

    def __init__(self, arch: ModelArch, model_scale: float, planned: GrownModel) -> None:
        self.arch, self.scale = arch, model_scale
        self.models: dict[float, GrownModel] = {1.0: planned}

    def at(self, factor: float) -> GrownModel:
        hit = self.models.get(factor)
        if hit is None:
            a = grow_arch(self.arch, self.scale * factor)
            hit = self.models[factor] = GrownModel(a, count_params(a))
        return hit


class TrainingSpace:
    """A training search's layouts, their memory (as planned and grown) and their timed work."""

    def __init__(self, arch: ModelArch, p: ParamCount, w: Workload, gbs: int, table: ActivationTable, oh: Overheads,
                 sm: SpeedModel, trainable: int, total_tokens: float | None, *, memory: MemoryCache, grows: bool,
                 grown_models: GrownModels, grown_workload: Callable[[Workload], Workload],
                 framework: FrameworkCaps | None = None, serving: ServingData | None = None,
                 headroom: float = 0.0) -> None:
        """`memory`: the parts of the layouts' memory (the search's, which its shown candidates' estimates read too);
        `grows`: whether the planned growth changes any layout's memory; `grown_models`: the grown model, the
        search's; `grown_workload(w)`: `w` with the planned growth of the context; `framework`: what the project's
        framework can run (None: every layout), so only those layouts are made."""
        if w.grpo is not None and w.grpo.placement == "separate":  # sized colocated; core/search/placement.py then
            w = w.model_copy(update={"grpo": w.grpo.model_copy(update={  # compares the splits into separate pools
                "placement": "colocated", "rollout_gpus": None, "gpu_memory_utilization": None})})
        self.arch, self.p, self.w, self.gbs, self.table, self.sm = arch, p, w, gbs, table, sm
        self.trainable, self.total_tokens, self.grows = trainable, total_tokens, grows
        self.grown_models, self.grown_workload = grown_models, grown_workload
        self.alloc = Allocator.of(oh)
        self.oh = oh
        #: the search's workload with and without recomputation (what a layout's memory and work read of it)
        self.workloads = {ckpt: w.model_copy(update={"gradient_checkpointing": ckpt}) for ckpt in (False, True)}
        self.memory = memory
        self.works = WorkCache()
        #: each (n, tp, pp)'s configurations, over its ZeRO stages and recomputation choices
        self.families: dict[FamilyKey, list[Config]] = {}
        #: what grown layouts share: their workloads by recomputation, their memory parts by the model's factor
        self.grown_workloads: dict[bool, Workload] = {}
        self.grown_memory: dict[float, MemoryCache] = {}
        self.rates: dict[str, GpuRates] = {}  # each GPU's, for the workload's precision
        #: configurations whose memory was computed, and timings
        self.computed = self.timed = 0
        self._cnn, self._decoder = arch.kind == "cnn", arch.kind == "decoder"
        self.framework = framework
        self.serving = serving
        self.headroom = headroom  # GRPO: the rollout's figure is compared as the search compares (grpo_share.py)
        #: GRPO: each (n, layout)'s trainer memory kept through the rollout (device bytes) and what its engine needs
        #: to start; each configuration's training phase (device bytes), by (n, layout, recomputation, micro-batch)
        self.rollout_need: dict[tuple[int, Layout], tuple[int, int]] = {}
        self.train_device: dict[tuple[int, Layout, bool, int], int] = {}
        #: the ZeRO stages the framework runs with several data-parallel ranks, and with pipeline stages
        self._zeros = tuple(z for z in (0, 1, 2, 3) if framework is None or z in framework.zero)
        self._pp_zeros = tuple(z for z in self._zeros if framework is None or z in framework.pp_zero)
        self._tp_ok = framework is None or w.task in framework.tp
        self._pp_ok = framework is None or w.task in framework.pp

    # ------------------------------------------------------------------------------------------ memory
    def configs(self, n: int, per_server: int) -> list[Config]:
        """Every layout of n GPUs (tensor parallel inside a server of `per_server`) with each micro-batch that
        divides the global batch: the layouts made so far in the search are shared (a layout of n GPUs is the
        same in servers of 4 or of 8)."""
        out: list[Config] = []
        arch, layers = self.arch, self.arch.num_layers + self.arch.num_decoder_layers
        for tp in pow2_upto(min(per_server, 8)):
            if tp > 1 and (self._cnn or arch.num_heads % tp or not self._tp_ok):
                continue
            for pp in pow2_upto(min(8, n // tp)):
                if pp > 1 and (layers < 2 * pp or not self._decoder or not self._pp_ok):
                    continue
                if n % (tp * pp) or n // (tp * pp) > self.gbs:
                    continue
                key = FamilyKey(n, tp, pp)
                family = self.families.get(key)
                if family is None:
                    family = self.families[key] = self._family(n, tp, pp)
                out += family
        return out

    def _family(self, n: int, tp: int, pp: int) -> list[Config]:
        """The layouts of n GPUs at (tp, pp): each ZeRO stage (data parallel only) with and without recomputation
        (not for CNNs), each with a configuration per micro-batch that divides the global batch."""
        arch, p, cache, workloads = self.arch, self.p, self.memory, self.workloads
        dp = n // (tp * pp)
        share = self.gbs // dp
        # (micro-batch, micro-batches per step) for each micro-batch that divides each GPU's share of the batch:
        # powers of two, the project's own and the whole share (one micro-batch a step), up to 64 or the project's
        # own if larger (a ViT's 128 images; 24 of 192 sequences on 8 GPUs; 12 each on 16). Few, as the search
        # times only a shape's first layouts in `proxy` order. (A DPO policy's: whole pairs, an even number.)
        even = workloads[False].dpo is not None
        own = self.w.micro_batch_size
        top = min(share, max(64, own))
        tried = sorted({*pow2_upto(top), *(b for b in (own, share) if b <= top)})
        steps = [(mbs, share // mbs) for mbs in tried if not share % mbs and not (even and mbs % 2)]
        ckpts = (False, True) if not self._cnn else (False,)
        terms = [cache.tp_terms(arch, p, workloads[ckpt], tp, self.table) for ckpt in ckpts]
        peaks: list[tuple[int, int]] = []  # each layout's micro-batches', in the order of `made`
        made: list[tuple[Layout, bool]] = []  # (layout, recomputation)
        amps: list[AmpCasts] = []  # autocast's copies are divided by dp only under ZeRO-3
        for zero in ((self._zeros if pp == 1 else self._pp_zeros) if dp > 1 else (0,)):  # what the framework runs
            lay = layout_of(zero, tp, pp)
            states = cache.layout_states(arch, p, self.w, lay, dp)  # whatever the recomputation
            if zero in (0, 3) or not amps:  # ZeRO 1 and 2 share stage 0's copies
                amps = [cache.amp_casts(arch, p, workloads[ckpt], lay, dp) for ckpt in ckpts]
            for ckpt, t, amp in zip(ckpts, terms, amps):
                step_peaks(states, t, amp, pp, ckpt, steps, None, peaks)
                made.append((lay, ckpt))
        w = self.w
        out = [Config(n, lay, w, ckpt, mbs, mbs * dp * k, 0, order_key(ckpt, tp * pp, lay.zero, mbs), k, group)
               for lay, ckpt in made for group in (LayoutGroup(n, lay, workloads[ckpt]),) for mbs, k in steps]
        rollout = self._rollout_bytes(n, made, dp) if w.grpo is not None and self.serving is not None else None
        for c, device in zip(out, device_bytes_of(peaks, self.alloc, n, tp, pp)):
            c.device_bytes = device
            if rollout is not None:  # GRPO: the rollout's figure as the search compares it; the training phase's kept
                self.train_device[(n, c.layout, c.gradient_checkpointing, c.batch)] = device
                c.device_bytes = max(device, rollout[c.layout])
        self.computed += len(out)
        return out

    def _rollout_bytes(self, n: int, made: list[tuple[Layout, bool]], dp: int) -> dict[Layout, int]:
        """GRPO: each layout's rollout phase as the search compares it with a GPU's usable bytes: the trainer's kept
        memory (weights, optimizer states, reference) beside the colocated engine's share of the GPU, which must
        hold the engine's weights, temporaries and one sequence's KV cache (core/sizing/grpo_share.py
        equivalent_bytes: the share is a fraction of each GPU, this figure is the same for every GPU type)."""
        assert self.serving is not None and self.w.grpo is not None
        spec = self.w.grpo
        out: dict[Layout, int] = {}
        for lay, _ in made:
            if lay in out:
                continue
            st = self.memory.layout_states(self.arch, self.p, self.w, lay, dp)
            kept = MemoryBreakdown(weights_bytes=st.weights, gradients_bytes=0, optimizer_bytes=st.optimizer,
                                   activations_bytes=0, kv_cache_bytes=0, other_bytes=0, reference_bytes=st.reference)
            eng = rollout_engine_memory(self.arch, self.p, spec, lay, n, self.oh, self.serving.engine)
            start = rollout_share(eng, spec, lay, n, 0, self.serving.engine).start_bytes
            kept_device = rollout_device_bytes(kept, self.oh, n, lay)[2]
            self.rollout_need[(n, lay)] = (kept_device, start)
            out[lay] = equivalent_bytes(kept_device, start, engine_utilization(spec, self.serving.engine),
                                        self.headroom)
        return out

    def _rollout_on(self, c: Config, usable: int, grown: int) -> int:
        """GRPO: the peak bytes per GPU of `c` on the GPU whose usable bytes are `usable`: the larger of the training
        phase's (`grown`: as planned, or after the growth) and the rollout's (the trainer's kept memory beside the
        engine's share of that GPU, or what the engine needs to start if its share is smaller)."""
        assert self.w.grpo is not None and self.serving is not None
        kept, start = self.rollout_need[(c.n, c.layout)]
        gpu_bytes = usable / (1.0 - self.headroom) if self.headroom < 1 else 0.0
        share = engine_utilization(self.w.grpo, self.serving.engine)
        return max(grown, kept + max(int(gpu_bytes * share), start))

    def grown_bytes(self, c: Config, factor: float, usable: int = 0) -> int:
        """Peak bytes per GPU of `c` after the planned growth, with the model `factor` times the planned size; GRPO
        (given the GPU's `usable` bytes): with the rollout phase on that GPU (its engine's share is the GPU's)."""
        if (c.n, c.layout) in self.rollout_need and usable:
            if factor == 1.0 and not self.grows:
                grown = self.train_device[(c.n, c.layout, c.gradient_checkpointing, c.batch)]
            else:
                grown = self._grown_training(c, factor, keep=False)  # c.grown would hide the rollout from explore
            return self._rollout_on(c, usable, grown)
        return self._grown_training(c, factor)

    def _grown_training(self, c: Config, factor: float, keep: bool = True) -> int:
        """The training phase's peak bytes per GPU of `c` after the planned growth (`grown_bytes`)."""
        if factor == 1.0:
            if not self.grows:
                return c.device_bytes  # nothing grows: the layout's own memory
            if c.grown is not None:
                return c.grown
        group = c.group
        assert group is not None, "a training configuration"
        grown = group.grown
        if grown is None:
            grown = group.grown = {}
        at = grown.get(factor)
        if at is None:
            at = grown[factor] = (self._grown_layout(group, factor), {})
        mem, by_batch = at
        hit = by_batch.get(c.batch)
        if hit is None:
            hit = by_batch[c.batch] = mem.device_bytes(c.batch, c.microbatches)
        if factor == 1.0 and keep:
            c.grown = hit
        return hit

    def _grown_layout(self, group: LayoutGroup, factor: float) -> LayoutMemory:
        """The memory kernel of `group`'s layout with the model `factor` times the planned growth, and the planned
        growth of the context."""
        ckpt = group.workload.gradient_checkpointing
        gw = self.grown_workloads.get(ckpt)  # every layout's workload is the search's
        if gw is None:
            gw = self.grown_workloads[ckpt] = self.grown_workload(group.workload)
        cache = self.grown_memory.get(factor)
        if cache is None:
            cache = self.grown_memory[factor] = MemoryCache()
        model = self.grown_models.at(factor)
        return layout_memory(model.arch, model.params, gw, group.layout, group.n, self.table, self.alloc, cache)

    # ------------------------------------------------------------------------------------------ speed
    def fastest(self, cs: list[Config], gpu: Gpu, node: int) -> Timed:
        """The fastest of the configurations `cs` on `gpu` in servers of `node` GPUs; the first of equals."""
        self.timed += len(cs)
        rates = self.rates.get(gpu.id)
        if rates is None:
            w = self.workloads[False]
            rates = self.rates[gpu.id] = GpuRates(gpu, self.sm, w.precision, w.tf32)
        total = self.total_tokens
        best: tuple[float, Config, StepWork, StepTime] | None = None
        for c in cs:
            work = c.work  # made once, when the configuration is first timed
            if work is None:
                group = c.group
                assert group is not None, "a training configuration"
                work = c.work = StepWork(self.arch, self.p, group.workload, c.layout, c.n, self.sm, self.table,
                                         self.trainable, self.works, micro_batch=c.batch, global_batch=c.global_batch)
            st = timed(work, rates, total, node)
            if self.serving is not None:  # GRPO: the rollout and the log-probability forwards
                st = timed_step(st, work, rates, self.arch, self.p, self.sm, self.serving, node, total)
            metric = st.wall if st.wall is not None else 1e9 / st.tokens_per_s / 3600
            if best is None or metric < best[0]:
                best = (metric, c, work, st)
        assert best is not None
        return Timed(best[0], best[1], best[2], best[3])


__all__ = ["FamilyKey", "GrownModel", "GrownModels", "Timed", "TrainingSpace"]
