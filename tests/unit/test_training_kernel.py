"""The training search's kernel (core/search/training.py over core/sizing/layout_memory.py, step.py and step_time.py):
each configuration's memory, grown memory and step time equal what the estimate and the speed model give for its
workload built alone, and the plan's stats count what the search computed: each configuration's memory once, each
timing once."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache

import pytest

from gpuplan.api import PLAN_TOP, plan
from gpuplan.catalog.hardware import builtin_catalog
from gpuplan.catalog.loader import example_path, load_activation_table, load_overheads, load_speed_model
from gpuplan.core.search import explore
from gpuplan.core.search.shapes import Config
from gpuplan.core.search.training import TrainingSpace
from gpuplan.core.sizing.memory import estimate_memory
from gpuplan.core.sizing.project import grown_workload
from gpuplan.core.sizing.step import StepWork
from gpuplan.core.sizing.step_time import step_time

TABLE, OH, SM = load_activation_table(), load_overheads(), load_speed_model()
GPUS = builtin_catalog().gpus.rows
TRAINING = ["llama2-7b-pretrain", "llama3-70b-lora", "llama3-8b-full-finetune", "llama3-8b-qlora", "vit-imagenet"]
#: (GPUs, GPUs per server) of the grid the kernel is checked on
SHAPES = [(1, 1), (2, 2), (4, 4), (8, 8), (16, 8), (8, 4)]


@cache
def searched(name: str) -> explore._Search:
    """The search behind `plan` of an example (its state kept: the configurations it made, its counts)."""
    made: list[explore._Search] = []

    class Kept(explore._Search):
        def __init__(self, *a: object, **k: object) -> None:
            super().__init__(*a, **k)  # type: ignore[arg-type]
            made.append(self)

    mp = pytest.MonkeyPatch()
    mp.setattr(explore, "_Search", Kept)
    try:
        result = plan(example_path(name), top=PLAN_TOP)
    finally:
        mp.undo()
    s = made[-1]
    s.result = result  # type: ignore[attr-defined]
    # what it counted and made, before the tests below ask more of it
    sp = space(s)
    s.counted = (s.evaluated, s.timed, sp.computed, sp.timed,  # type: ignore[attr-defined]
                 {id(c) for cs in sp.families.values() for c in cs}, sum(len(cs) for cs in sp.families.values()),
                 {id(c) for shape in s.configs.values() for c in shape.configs})
    return s


def space(s: explore._Search) -> TrainingSpace:
    assert s.space is not None
    return s.space


def grid(s: explore._Search) -> Iterator[Config]:
    for n, ps in SHAPES:
        yield from space(s).configs(n, ps)


@pytest.mark.parametrize("name", TRAINING)
def test_each_configurations_memory_is_the_estimates(name: str) -> None:
    s = searched(name)
    for c in grid(s):
        want = estimate_memory(s.arch, s.p, c.workload, c.layout, c.n, TABLE, OH)
        assert c.device_bytes == want.device_bytes, (c.n, c.layout, c.batch, c.gradient_checkpointing)


@pytest.mark.parametrize("name", TRAINING)
def test_grown_memory_is_the_estimate_of_the_grown_model(name: str) -> None:
    s = searched(name)
    for factor in (1.0, 1.5):
        grown = s.grown_models.at(factor)
        for c in list(grid(s))[::5]:
            w = grown_workload(c.workload, s.proj, s.arch)
            want = estimate_memory(grown.arch, grown.params, w, c.layout, c.n, TABLE, OH).device_bytes
            if factor == 1.0 and not s.grows:
                want = c.device_bytes  # nothing grows: the planned memory
            assert space(s).grown_bytes(c, factor) == want, (factor, c.n, c.layout, c.batch)


@pytest.mark.parametrize("name", TRAINING)
def test_the_kernel_times_each_configuration_as_step_time(name: str) -> None:
    """TrainingSpace.fastest on one configuration gives step_time of a work built from the configuration's own
    workload, to the last bit, on several GPU types and node sizes."""
    s = searched(name)
    sp = space(s)
    for c in list(grid(s))[::3]:
        for gpu_id in ("h100-sxm-80gb", "a100-pcie-40gb", "rtx-4090-24gb", "mi300x-192gb", "v100-sxm2-16gb"):
            gpu = GPUS[gpu_id]
            for node in sorted({1, min(c.n, 8)}):
                got = sp.fastest([c], gpu, node)
                work = StepWork(s.arch, s.p, c.workload, c.layout, c.n, SM, TABLE, s.ctx.trainable)
                want = step_time(work, gpu, SM, total_tokens=s.ctx.total_tokens, gpus_per_node=node)
                assert got.step == want, (gpu_id, node, c.n, c.layout, c.batch)
                metric = want.wall if want.wall is not None else 1e9 / want.tokens_per_s / 3600
                assert got.metric == metric


@pytest.mark.parametrize("name", TRAINING)
def test_stats_count_what_the_search_computed(name: str) -> None:
    """candidates_evaluated is the configurations whose memory the search computed (each once, whatever the
    server sizes that share its layout) and the timings it made (each configuration on each GPU type once)."""
    s = searched(name)
    evaluated, timed, computed, space_timed, families, made, shown = s.counted  # type: ignore[attr-defined]
    assert made == len(families)  # no configuration made twice
    assert shown <= families  # the shapes' configurations are the layouts' own
    assert evaluated == computed == made
    assert timed == space_timed > 0
    assert s.result.stats.candidates_evaluated == evaluated + timed  # type: ignore[attr-defined]


def test_a_layout_is_made_once_for_every_server_size_that_allows_it() -> None:
    """8 GPUs in servers of 4 or of 8: the layouts both allow (tensor parallel up to 4) are the same objects, and
    computed once."""
    sp = space(searched("llama3-8b-full-finetune"))
    before = sp.computed
    in_8 = sp.configs(32, 8)
    after_8 = sp.computed
    in_4 = sp.configs(32, 4)
    assert sp.computed == after_8  # every layout of 32 GPUs in servers of 4 was made for servers of 8
    assert after_8 - before <= len(in_8)
    assert {id(c) for c in in_4} < {id(c) for c in in_8}


@pytest.mark.parametrize("name", TRAINING)
def test_a_shape_picks_out_the_first_layouts_that_fit(name: str) -> None:
    """ShapeConfigs.fitting (the layouts a GPU's usable memory holds) is the first `limit`
    configurations in timing order within the usable bytes, for every usable that changes the answer."""
    s = searched(name)
    assert s.configs
    for shape in s.configs.values():
        assert [c.order for c in shape.configs] == sorted(c.order for c in shape.configs)
        device = [c.device_bytes for c in shape.configs]
        assert shape.smallest == min(device, default=None)
        for usable in {0, *device, *(b - 1 for b in device)}:
            for limit in (1, 24):
                want = [c for c in shape.configs if c.device_bytes <= usable][:limit]
                assert shape.fitting(usable, limit) == want
