"""Invariants of the balanced-server builder (core/server/builder.py) over random projects and every GPU count the
built-in catalog can house.

Where a platform cannot meet a rule (a rack with soldered memory below 2x VRAM, a CPU the platform fixes),
the builder says so in a warning; the invariants below hold whenever no such warning names the rule.
"""

from __future__ import annotations

import math

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gpuplan.catalog.hardware import builtin_catalog
from gpuplan.catalog.server_rules import load_server_rules
from gpuplan.core.server.builder import build_server, server_price
from gpuplan.schema.plan import ServerNeeds
from gpuplan.units import GIB

CATALOG, RULES = builtin_catalog(), load_server_rules()
TB = 10**12
MODALITIES = ["text", "tabular", "image", "audio", "video"]


def _needs(gpu_id: str, n: int, **kw) -> ServerNeeds:
    base = dict(servers=1, modality="text", purpose="experiment", dataset_bytes=1e12, checkpoint_bytes=1e11,
                weights_bytes=1e10)
    return ServerNeeds(gpu_id=gpu_id, gpus_per_server=n, **{**base, **kw})


#: every (gpu, GPUs per server) the catalog can house
HOUSED = [(g, n) for g in sorted(CATALOG.gpus.rows) for n in (*range(1, 11), 72)
          if build_server(_needs(g, n), CATALOG, RULES)[0] is not None]


@st.composite
def projects(draw, gpu_n=None) -> ServerNeeds:
    gpu_id, n = gpu_n if gpu_n is not None else draw(st.sampled_from(HOUSED))
    checkpoint = draw(st.floats(0, 5 * TB))
    return _needs(
        gpu_id, n, servers=draw(st.integers(1, 64)), modality=draw(st.sampled_from(MODALITIES)),
        purpose=draw(st.sampled_from(["experiment", "production"])), dataset_bytes=draw(st.floats(0, 60 * TB)),
        checkpoint_bytes=checkpoint, weights_bytes=checkpoint / draw(st.sampled_from([1, 4, 8])),
        offload_bytes=draw(st.one_of(st.just(0.0), st.floats(0, 4096 * GIB))),
        data_read_bytes_per_s=draw(st.one_of(st.just(0.0), st.floats(1e6, 40e9))),
        tensor_parallel=draw(st.sampled_from([1, 2, 4, 8])), multi_node=draw(st.booleans()),
    )


def _built(needs: ServerNeeds):
    spec, why = build_server(needs, CATALOG, RULES)
    assume(spec is not None)
    assert why is None
    return spec


def _warned(spec, text: str) -> bool:
    return any(text in w for w in spec.warnings)


def test_the_catalog_houses_most_gpus():
    assert len({g for g, _ in HOUSED}) >= 25


@settings(max_examples=300, deadline=None)
@given(projects())
def test_ram_is_at_least_twice_vram(needs):
    spec = _built(needs)
    gpu = CATALOG.gpus.rows[needs.gpu_id]
    platform = CATALOG.platforms.rows[spec.platform_id]
    if platform.fixed:  # an appliance as shipped (issue 28): the vendor's RAM, with a note where the rule asks more
        assert platform.shipped_ram_gb is not None and spec.ram_bytes == platform.shipped_ram_gb * GIB
        assert spec.ram_bytes >= needs.offload_bytes
        if spec.ram_bytes < RULES.ram_to_vram_ratio * needs.gpus_per_server * gpu.memory_gb * GIB:
            assert any(r.startswith("RAM") and "note" in r for r in spec.reasons)
    elif not _warned(spec, "below the"):
        assert spec.ram_bytes >= RULES.ram_to_vram_ratio * needs.gpus_per_server * gpu.memory_gb * GIB
        assert spec.ram_bytes >= needs.offload_bytes
    else:  # only a platform that takes no more: the RAM is its ceiling
        platform = CATALOG.platforms.rows[spec.platform_id]
        assert platform.memory_max_gb is not None and spec.ram_bytes == platform.memory_max_gb * GIB


@settings(max_examples=300, deadline=None)
@given(projects())
def test_cores_meet_the_rule(needs):
    spec = _built(needs)
    need = max(RULES.min_cpu_cores, math.ceil(RULES.cpu_cores_per_gpu[needs.modality] * needs.gpus_per_server))
    assert spec.cpu_cores >= need or _warned(spec, "CPU cores short")


@settings(max_examples=300, deadline=None)
@given(projects())
def test_storage_holds_dataset_and_kept_checkpoints(needs):
    spec = _built(needs)
    kept = needs.dataset_bytes + RULES.checkpoints_kept * needs.checkpoint_bytes
    platform = CATALOG.platforms.rows[spec.platform_id]
    if platform.fixed and platform.shipped_drives:  # the vendor's drives, with a note where they fall short
        shipped = sum(s.count * CATALOG.drives.rows[s.id].capacity_tb * 1e12 for s in platform.shipped_drives)
        assert spec.storage_bytes == int(shipped)
        if spec.storage_bytes < kept * (1 + RULES.scratch_fraction) * (1 - 1e-12):
            assert any(r.startswith("NVMe") and "shared storage" in r for r in spec.reasons)
    elif not _warned(spec, "NVMe short"):
        assert spec.storage_bytes >= kept * (1 + RULES.scratch_fraction) * (1 - 1e-12)
        assert spec.storage_read_gb_s >= needs.data_read_bytes_per_s / 1e9
        if needs.data_read_bytes_per_s > 0:
            floor = RULES.nvme_read_gbs_per_gpu[needs.modality] * needs.gpus_per_server
            assert spec.storage_read_gb_s >= floor * (1 - 1e-12)


@settings(max_examples=300, deadline=None)
@given(projects())
def test_heat_power_and_supplies_agree(needs):
    spec = _built(needs)
    assert spec.cooling_btu_h == spec.power_w * 3.412
    fixed = CATALOG.platforms.rows[spec.platform_id].fixed
    assert spec.psu_w is not None and (spec.psu_w >= spec.power_w * RULES.psu_headroom * (1 - 1e-12) or (
        fixed and any(r.startswith("PSU") and "as shipped" in r for r in spec.reasons)))
    gpu = CATALOG.gpus.rows[needs.gpu_id]
    assert spec.power_w > needs.gpus_per_server * gpu.tdp_w
    if gpu.tdp_w > RULES.liquid_above_gpu_tdp_w:
        assert spec.cooling == "liquid"
    assert spec.reasons and all("\n" not in r for r in spec.reasons)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_more_gpus_never_less_power(data):
    # On the same platform with the same memory, one more GPU adds at least its TDP. Across a change of
    # platform or memory population the rest of the machine changes too (another CPU, 16 x 256 GB DIMMs in
    # place of 32 x 96 GB), and a 70 W card does not outweigh that; those pairs are not compared.
    gpu_id, n = data.draw(st.sampled_from([(g, n) for g, n in HOUSED if (g, n + 1) in HOUSED]))
    needs = data.draw(projects(gpu_n=(gpu_id, n)))
    small = _built(needs)
    big = _built(needs.model_copy(update={"gpus_per_server": n + 1}))
    assume(big.platform_id == small.platform_id and big.ram_bytes == small.ram_bytes)
    assert big.power_w >= small.power_w + CATALOG.gpus.rows[gpu_id].tdp_w


@settings(max_examples=200, deadline=None)
@given(projects())
def test_production_never_fewer_psu_watts_than_experiment(needs):
    production = _built(needs.model_copy(update={"purpose": "production"}))
    experiment = _built(needs.model_copy(update={"purpose": "experiment"}))
    assert production.psu_w >= experiment.psu_w


@settings(max_examples=200, deadline=None)
@given(projects())
def test_multi_node_gets_a_nic_per_gpu(needs):
    spec = _built(needs)
    gpu = CATALOG.gpus.rows[needs.gpu_id]
    if needs.multi_node and gpu.interconnect.kind != "roce-on-die":
        assert spec.nics >= needs.gpus_per_server
        assert spec.network_gbit_s >= needs.gpus_per_server * RULES.network_gbps_per_gpu[gpu.generation]


@st.composite
def any_needs(draw) -> ServerNeeds:
    """Needs over every GPU and count, housed or not, training or serving."""
    gpu_n = (draw(st.sampled_from(sorted(CATALOG.gpus.rows))), draw(st.sampled_from([*range(1, 11), 16, 72])))
    needs = draw(projects(gpu_n=gpu_n))
    return needs.model_copy(update={"serving": draw(st.booleans())})


@settings(max_examples=400, deadline=None)
@given(any_needs())
def test_the_figures_alone_are_the_full_build_without_its_lines(needs):
    # the search's first pass (reasons=False) decides the same server, or fails for the same reason
    full, why = build_server(needs, CATALOG, RULES)
    fast, fast_why = build_server(needs, CATALOG, RULES, reasons=False)
    assert fast_why == why
    # and what the search compares of it (server_price: no spec made) is that server's price, or the same reason
    assert server_price(needs, CATALOG, RULES) == ((False, None, why) if full is None else
                                                  (True, full.price, None))
    if full is None:
        assert fast is None
        return
    assert fast is not None and fast.reasons == [] and fast.warnings == []
    assert fast.model_dump_json() == full.model_copy(update={"reasons": [], "warnings": []}).model_dump_json()
