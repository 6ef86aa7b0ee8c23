"""Issue #13, point 5: `plan --have` starts from the server the team has. The answer comes from the pure core
(core/owned/): every way to run the job on the machine's GPUs re-estimated and timed, then what to add, rent or
buy for the rest, priced from the plan's own rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplan import api
from gpuplan.api import check_machine
from gpuplan.catalog.hardware import builtin_catalog
from gpuplan.catalog.loader import example_path
from gpuplan.catalog.server_file import parse_server, read_server_file
from gpuplan.core.audit.machine import MachineSpec
from gpuplan.core.owned.tries import memory_tries
from gpuplan.schema.plan import PlanResult
from gpuplan.schema.project import Layout
from gpuplan.units import GIB

SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "servers" / "4x-rtx-4090.yaml"
MISTRAL = ("name: mistral-7b-full-finetune\nmodel: {preset: mistral-7b}\n"
           "workload: {task: full-finetune, precision: bf16-mixed, optimizer: adamw, micro_batch_size: 1,"
           " sequence_length: 2048, gradient_checkpointing: true, epochs: 1}\ndata: {samples: 20000}\n")
#: what gpuplan's own estimate says fits a Mistral-7B full fine-tune on 4 x RTX 4090 (the issue's words)
FITS = {"zero-3-offload-optimizer", "zero-3-offload-params", "pure-bf16-adamw-8bit", "adamw-8bit", "pure-bf16"}


@pytest.fixture(scope="module")
def mistral(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("owned") / "mistral.yaml"
    path.write_text(MISTRAL)
    return path


@pytest.fixture(scope="module")
def on_4090(mistral: Path) -> PlanResult:
    return api.plan(mistral, have=SERVER)


def test_the_4x_4090_can_fine_tune_mistral_and_says_how(on_4090: PlanResult) -> None:
    h = on_4090.have
    assert h is not None and h.can_do and h.gpus == 4 and h.gpu == "rtx-4090-24gb"
    by_code = {w.code: w for w in h.ways}
    assert not by_code["as-written"].runs  # 29.6 GiB per GPU as written: the question is how
    for code in FITS:
        w = by_code[code]
        assert w.runs and w.device_bytes <= w.usable_bytes, code
        assert w.time_hours is not None and w.time_hours > 0 and w.tokens_per_s, code  # each one timed
    # the recipe kept first: offloading the optimizer moves bytes, an 8-bit optimizer changes the training
    assert h.how is not None and h.how.code == "zero-3-offload-optimizer" and not h.how.changes_recipe
    assert by_code["adamw-8bit"].changes_recipe and by_code["adamw-8bit"].workload_changes == {
        "optimizer": "adamw-8bit"}
    assert h.verdict.startswith("yes: your 4 x rtx-4090-24gb can do it: ZeRO-3 with the optimizer states offloaded")
    # ways that run come before those that do not
    runs = [w.runs for w in h.ways]
    assert runs == sorted(runs, reverse=True)


def test_offload_is_timed_and_a_much_faster_change_is_named(on_4090: PlanResult) -> None:
    """Offload moves the optimizer states over PCIe and steps on the CPU: never faster than the same layout on the
    GPUs. When it is much slower than an 8-bit optimizer, the verdict names that too (the team may prefer it)."""
    h = on_4090.have
    assert h is not None
    by_code = {w.code: w for w in h.ways}
    plain, off = by_code["as-written"], by_code["zero-3-offload-optimizer"]
    assert off.time_hours is not None and plain.time_hours is not None and off.time_hours >= plain.time_hours
    eight = by_code["adamw-8bit"]
    named = "faster if the training may change: 8-bit AdamW (bitsandbytes)" in h.verdict
    assert named == (off.time_hours >= 1.25 * (eight.time_hours or 0.0))


def test_offload_is_checked_against_the_machines_ram(on_4090: PlanResult, mistral: Path) -> None:
    h = on_4090.have
    assert h is not None
    opt = next(w for w in h.ways if w.code == "zero-3-offload-optimizer")
    params = next(w for w in h.ways if w.code == "zero-3-offload-params")
    # fp32 master weights and Adam moments (12 B) and fp32 gradients (4 B) of 7.2 B parameters on the host: 16 B a
    # parameter, DeepSpeed's own count for offload_optimizer (stage3.py estimate_zero3_model_states_mem_needs), ~108 GiB
    assert 95 * GIB < opt.host_ram_bytes < 120 * GIB and params.host_ram_bytes > opt.host_ram_bytes
    assert opt.ram_ok and any("host RAM" in n for n in opt.notes)
    small = SERVER.read_text().replace("ram_gb: 256", "ram_gb: 64")
    machine = parse_server(__import__("yaml").safe_load(small), "small.yaml", builtin_catalog())
    h64 = api.plan(mistral, have=machine).have
    assert h64 is not None and h64.can_do
    short = next(w for w in h64.ways if w.code == "zero-3-offload-optimizer")
    assert short.fits and not short.ram_ok and not short.runs
    assert h64.how is not None and h64.how.layout.get("offload", "none") == "none"  # a way without offload wins


def test_options_run_it_there_rent_or_replace_cheapest_first(on_4090: PlanResult) -> None:
    h = on_4090.have
    assert h is not None
    kinds = [o.kind for o in h.options]
    assert {"keep", "rent", "replace"} <= set(kinds)
    costs = [o.cost for o in h.options if o.cost is not None]
    assert costs == sorted(costs)
    best = [o for o in h.options if o.best]
    assert len(best) == 1 and best[0].kind == "keep"  # the server is paid for: electricity only
    keep = best[0]
    assert keep.cost is not None and 0 < keep.cost < 100 and keep.cost_basis == "per run"
    assert any("electricity only" in r for r in keep.reasons)
    replace = next(o for o in h.options if o.kind == "replace")
    rec = on_4090.recommendation
    assert rec is not None and rec.gpu_id in replace.what


def test_every_fix_check_confirms_is_a_way_plan_have_runs(mistral: Path) -> None:
    """`check` and `plan --have` try the same changes (core/owned/tries.py): what check says fits, plan --have
    lists as a way that fits."""
    catalog = builtin_catalog()
    audit = check_machine(mistral, read_server_file(SERVER, catalog), catalog)
    confirmed = {a.change for a in audit.alternatives if a.fits and not a.needs_hardware}
    have = api.plan(mistral, have=SERVER).have
    assert have is not None
    assert confirmed and confirmed <= {w.change for w in have.ways if w.fits}
    what = next(i for i in audit.checklist if i.item == "What to change")
    listed = "\n".join(what.reasons)
    assert all(c in listed for c in confirmed)  # every confirmed fix is suggested, not the first three


def test_missing_the_deadline_rents_the_rest() -> None:
    """llama3-70b-lora on 4 x RTX 4090 runs (with offload) but takes about three weeks against a 10-day deadline:
    train there until the handoff, then finish on a rented server."""
    result = api.plan(example_path("llama3-70b-lora"), have=SERVER)
    h = result.have
    assert h is not None and not h.can_do and h.how is not None and h.how.meets_target is False
    assert h.verdict.startswith("not in time:")
    by_kind = {o.kind: o for o in h.options}
    rest, keep, rent = by_kind["rent-rest"], by_kind["keep"], by_kind["rent"]
    assert rest.meets_target and rest.time_hours == pytest.approx(10 * 24)
    assert keep.meets_target is False and not keep.best
    assert rest.cost is not None and keep.cost is not None and rent.cost is not None
    assert keep.cost < rest.cost < rent.cost  # part of the run on the paid-for server
    assert next(o for o in h.options if o.best).meets_target


def test_a_machine_without_gpu_gets_a_clear_answer(mistral: Path) -> None:
    machine = MachineSpec(source="this machine (ci), probed 2026-12-01T10:00", cpu_model="AMD EPYC", cpu_cores=2,
                          ram_bytes=24 * GIB)
    h = api.plan(mistral, have=machine).have
    assert h is not None and not h.can_do and h.gpus == 0 and h.gpu is None and not h.ways
    assert h.verdict.startswith("no: the machine has no GPU to run it on; the job needs ")
    kinds = {o.kind for o in h.options}
    assert {"rent", "replace"} <= kinds
    assert sum(o.best for o in h.options) == 1


def test_a_gpu_not_in_the_catalog_is_judged_by_its_memory(mistral: Path) -> None:
    machine = parse_server({"cpu_cores": 16, "ram_gb": 512, "gpus": [{"name": "Acme X1", "memory_gib": 64,
                                                                      "count": 2}]}, "acme.yaml", builtin_catalog())
    h = api.plan(mistral, have=machine).have
    assert h is not None and h.gpu == "Acme X1" and h.gpus == 2
    assert all(w.time_hours is None for w in h.ways)
    assert any("not in the catalog" in n for n in h.notes)


def test_a_plan_without_have_keeps_its_json(mistral: Path) -> None:
    plain = api.plan(mistral)
    assert plain.have is None and "have" not in plain.model_dump(mode="json")


def test_memory_tries_are_data() -> None:
    """What to try is data over the project (no estimate): the offload tries keep the recipe, the savers do not."""
    from gpuplan.catalog.loader import parse_project

    proj = parse_project(__import__("yaml").safe_load(MISTRAL))
    tries = {t.code: t for t in memory_tries(proj, 4, Layout(zero=3), "decoder")}
    assert {"adamw-8bit", "pure-bf16", "pure-bf16-adamw-8bit", "zero-3-offload-optimizer", "zero-3-offload-params",
            "half-sequence", "qlora", "gpus-8"} <= set(tries)
    assert not tries["zero-3-offload-optimizer"].changes_recipe and tries["pure-bf16"].changes_recipe
    assert tries["gpus-8"].needs_hardware and tries["gpus-8"].gpus == 8


def test_nothing_to_buy_within_budget_but_the_owned_server_does_it(tmp_path: Path) -> None:
    """With --have, a plan whose search finds nothing to buy or rent (a 1 USD budget) still answers for the owned
    server when it can do the job (no recommendation, the binding constraint as a note); without it, exit 1."""
    from gpuplan.errors import InfeasibleError

    path = tmp_path / "tiny.yaml"
    path.write_text(MISTRAL + "goals: {budget: {amount: 1, currency: USD}}\n")
    with pytest.raises(InfeasibleError):
        api.plan(path)
    result = api.plan(path, have=SERVER)
    assert result.recommendation is None and not result.candidates
    assert result.have is not None and result.have.can_do
    assert any(n.code == "no-candidate" and "budget" in n.message for n in result.notes)
    no_gpu = MachineSpec(source="this machine", cpu_cores=2, ram_bytes=24 * GIB)
    with pytest.raises(InfeasibleError):
        api.plan(path, have=no_gpu)  # the owned machine cannot do it either: the error stands


def test_a_deadline_the_offload_misses_picks_the_smallest_change_that_meets_it(tmp_path: Path) -> None:
    """7.2 hours for the 20,000-sample fine-tune: the offload (PCIe traffic and a CPU optimizer step) misses it,
    the 8-bit optimizer meets it, and of the changes that meet it within 10% of each other the least risky is
    chosen (8-bit AdamW, not every saver at once, not QLoRA, which changes the method)."""
    path = tmp_path / "deadline.yaml"
    path.write_text(MISTRAL + "goals: {deadline_days: 0.3}\n")
    h = api.plan(path, have=SERVER).have
    assert h is not None
    by_code = {w.code: w for w in h.ways}
    off, eight = by_code["zero-3-offload-optimizer"], by_code["adamw-8bit"]
    if off.meets_target or not eight.meets_target:
        pytest.skip("the speed model times this offload within the deadline")
    assert h.can_do and h.how is not None and h.how.code == "adamw-8bit"
    assert h.ways[0].code == "adamw-8bit" and "task" not in h.how.workload_changes


def test_this_machine_with_gpus_probed_through_nvml(mistral: Path) -> None:
    """`--this-machine` on a machine with NVIDIA GPUs: the probe (NVML, faked here: the driver cannot run on CI)
    gives the GPUs, and the answer is for the largest group of one kind."""
    from gpuplan.cli.probe import probe_machine
    from tests.unit.test_audit import _FakeNvml

    machine = probe_machine(nvml=_FakeNvml())
    h = api.plan(mistral, have=machine).have
    assert h is not None and h.gpus == 2 and h.gpu is not None and h.gpu.startswith("h100")
    assert h.how is not None and h.how.time_hours is not None
    assert any("other 1 GPU(s) are not counted" in n for n in h.notes)


def test_check_marks_an_offload_the_ram_cannot_hold(mistral: Path) -> None:
    """`check` on the same box with 64 GB of RAM: the optimizer offload fits the GPUs but needs ~80 GB of host
    RAM, so it is suggested as a hardware change with what it needs, not as a setting that fits."""
    catalog = builtin_catalog()
    small = __import__("yaml").safe_load(SERVER.read_text().replace("ram_gb: 256", "ram_gb: 64"))
    audit = check_machine(mistral, parse_server(small, "small.yaml", catalog), catalog)
    off = next(a for a in audit.alternatives if a.change.startswith("ZeRO-3 with the optimizer states offloaded"))
    assert off.needs_hardware and "of host RAM; this machine has 64 GB" in off.change
    eight = next(a for a in audit.alternatives if a.change == "8-bit AdamW (bitsandbytes)")
    assert eight.fits and not eight.needs_hardware
