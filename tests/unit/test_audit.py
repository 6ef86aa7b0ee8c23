"""`gpuplan check`: the audit of a machine for a project (core/audit/checks.py), server files and probing (probe.py),
and the command (cli/check.py) through a typer app of its own."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from gpuplan import api
from gpuplan.api import check_machine
from gpuplan.catalog.hardware import builtin_catalog
from gpuplan.catalog.loader import example_path, load_project, resolve_model
from gpuplan.catalog.server_file import parse_server, read_server_file
from gpuplan.catalog.server_rules import load_server_rules
from gpuplan.cli.check import register
from gpuplan.cli.probe import NO_GPU_NOTE, probe_machine
from gpuplan.core.audit.checks import (
    CHECKLIST,
    AuditResult,
    Disk,
    MachineGpu,
    MachineSpec,
    audit,
    job_gpus,
    layout_for,
    match_gpu,
    on_machine,
)
from gpuplan.core.sizing.speed import tokens_per_sample
from gpuplan.errors import InputError, UnknownNameError
from gpuplan.schema.project import Layout
from gpuplan.units import GIB, MIB

CATALOG = builtin_catalog()
TB = 10**12


def h100(**kw: Any) -> MachineGpu:
    """An H100 SXM as NVML reports it (81,559 MiB)."""
    fields: dict[str, Any] = dict(name="NVIDIA H100 80GB HBM3", catalog_id="h100-sxm-80gb", memory_bytes=81559 * MIB,
                                  ecc=True, power_limit_w=700, pcie_gen=5, pcie_width=16, nvlink_links=18)
    return MachineGpu(**{**fields, **kw})


def rtx4090() -> MachineGpu:
    return MachineGpu(name="NVIDIA GeForce RTX 4090", catalog_id="rtx-4090-24gb", memory_bytes=24564 * MIB,
                      ecc=False, power_limit_w=450, pcie_gen=4, pcie_width=16, nvlink_links=0)


def machine(gpus: list[MachineGpu], ram_gib: float, *, cores: int = 112, disk_tb: float = 30.0,
            read_gb_s: float | None = 25.0) -> MachineSpec:
    return MachineSpec(source="test", cpu_model="2 x Intel Xeon Platinum 8480C", cpu_cores=cores,
                       cpu_threads=2 * cores, ram_bytes=int(ram_gib * GIB), gpus=gpus,
                       disks=[Disk(mount="/data", total_bytes=int(disk_tb * TB), free_bytes=int(disk_tb * TB),
                                   read_gb_s=read_gb_s)])


def run_audit(example: str, m: MachineSpec) -> AuditResult:
    """The pure audit, fed as the command feeds it: the project on the machine's GPUs, in the layout it runs."""
    project, base = load_project(example_path(example))
    tokens = tokens_per_sample(resolve_model(project.model, base).arch, project.workload)
    job = job_gpus(m)
    if job:
        lay = layout_for(project, len(job)) or Layout()
        est = api.estimate(on_machine(project, job[0].catalog_id, len(job), lay), base_dir=base)
    else:
        est = api.estimate(project, base_dir=base)
    return audit(project, m, est, load_server_rules(), CATALOG, job=job, tokens_per_sample=tokens)


def item(result: AuditResult, name: str) -> Any:
    return next(i for i in result.checklist if i.item == name)


# ------------------------------------------------------------------------------------------------ the audit

def test_8x_h100_with_2_tb_ram_passes_the_70b_lora() -> None:
    r = run_audit("llama3-70b-lora", machine([h100()] * 8, 2048))
    assert [i.item for i in r.checklist] == list(CHECKLIST)
    assert r.fits and r.verdict == "fits"
    assert {i.item: i.verdict for i in r.checklist} == {"VRAM validated": "pass", "System synergy": "pass",
                                                       "Bottleneck": "pass", "What to change": "pass"}
    assert r.gpus == 8 and r.gpu == "h100-sxm-80gb" and r.layout["zero"] == 3
    assert r.device_bytes < r.usable_bytes  # type: ignore[operator]
    assert "the GPUs" in item(r, "Bottleneck").reasons[0]


def test_same_server_with_256_gb_ram_warns_on_ram() -> None:
    r = run_audit("llama3-70b-lora", machine([h100()] * 8, 256))
    assert r.fits  # RAM slows, it does not stop the job
    assert r.verdict == "fits, with warnings: RAM"
    assert item(r, "System synergy").verdict == "warn"
    assert any(x.startswith("RAM 256 GB") and "ram_to_vram_ratio" in x for x in item(r, "System synergy").reasons)
    assert item(r, "Bottleneck").reasons[0].startswith("RAM 256 GB")
    change = item(r, "What to change")
    assert change.verdict == "warn" and any(x.startswith("add 1,024 GB RAM") for x in change.reasons)


def test_one_rtx_4090_cannot_hold_the_70b_lora_and_says_what_to_change() -> None:
    m = machine([rtx4090()], 64, cores=16, disk_tb=2.0, read_gb_s=7.0)
    r = run_audit("llama3-70b-lora", m)
    assert not r.fits and r.verdict.startswith("does not fit: needs")
    assert item(r, "VRAM validated").verdict == "fail"
    assert any("ECC off" in x for x in item(r, "VRAM validated").reasons)
    assert item(r, "Bottleneck").reasons[0].startswith("GPU memory")
    change = item(r, "What to change")
    assert change.verdict == "fail"
    assert any(x.startswith("or a GPU with >= ") and "GiB" in x for x in change.reasons)


def test_command_glue_offers_changes_that_fit() -> None:
    """The 8B QLoRA example peaks above a 4090 at micro-batch 4; the command finds that micro-batch 1 fits."""
    m = machine([rtx4090()], 64, cores=16, disk_tb=2.0, read_gb_s=7.0)
    r = check_machine(example_path("llama3-8b-qlora"), m, CATALOG)
    assert not r.fits
    fitting = [a for a in r.alternatives if a.fits]
    assert fitting and all(a.device_bytes <= r.usable_bytes for a in fitting)  # type: ignore[operator]
    assert any("micro-batch 1" in x and x.endswith("fits") for x in item(r, "What to change").reasons)


def test_machine_without_gpu_says_what_a_gpu_needs() -> None:
    r = run_audit("llama3-8b-qlora", machine([], 64, cores=16))
    assert not r.fits and r.gpus == 0 and r.gpu is None
    assert r.verdict.startswith("does not fit: no GPU")
    vram = item(r, "VRAM validated")
    assert vram.verdict == "fail" and "no GPU" in vram.reasons[0]
    assert any("a GPU with >= " in x for x in vram.reasons)
    assert item(r, "What to change").reasons[0].startswith("add a GPU with >= ")
    assert item(r, "System synergy").reasons[0].startswith("no GPU: the host is checked")


def test_disk_too_small_does_not_fit_and_slow_disk_warns() -> None:
    small = run_audit("llama2-7b-pretrain", machine([h100()] * 8, 2048, disk_tb=1.0))  # 4 TB of data
    assert not small.fits
    synergy = item(small, "System synergy")
    assert synergy.verdict == "fail"
    assert any(x.startswith("add >= ") and "NVMe" in x for x in item(small, "What to change").reasons)
    # ImageNet, 150 GB: a slow disk warns unless the page cache holds the dataset
    slow = run_audit("vit-imagenet", machine([h100()] * 8, 256, read_gb_s=1.0))
    read = next(x for x in item(slow, "System synergy").reasons if x.startswith("disk read"))
    assert "8 x 1 GB/s for image" in read
    cached = run_audit("vit-imagenet", machine([h100()] * 8, 2048, read_gb_s=1.0))
    assert any("fits in the page cache" in x for x in item(cached, "System synergy").reasons)
    unmeasured = run_audit("vit-imagenet", machine([h100()] * 8, 2048, read_gb_s=None))
    assert any(x.startswith("disk read rate not measured") for x in item(unmeasured, "System synergy").reasons)


def test_pcie_x8_and_tensor_parallel_without_nvlink_warn() -> None:
    slow = [h100(pcie_width=8)] + [h100()] * 7
    r = run_audit("llama3-70b-lora", machine(slow, 2048))
    assert any("GPU 0 at Gen5 x8 (50% of its host bandwidth)" in x for x in item(r, "System synergy").reasons)
    assert any(x.startswith("move GPU(s) 0 to Gen5 x16") for x in item(r, "What to change").reasons)
    serving = run_audit("llama3-70b-serving", machine([h100(nvlink_links=0)] * 4, 2048))
    assert any("tensor parallel 4 all-reduces every layer over PCIe" in x
               for x in item(serving, "System synergy").reasons)


def test_layout_on_the_machine() -> None:
    lora, _ = load_project(example_path("llama3-70b-lora"))  # hardware: 8 GPUs, zero 3
    assert layout_for(lora, 8) == Layout(zero=3)
    qlora, _ = load_project(example_path("llama3-8b-qlora"))  # no hardware section
    assert layout_for(qlora, 1) == Layout() and layout_for(qlora, 4) == Layout(zero=3)
    serving, _ = load_project(example_path("llama3-70b-serving"))  # tp 4, batch 64
    assert layout_for(serving, 6) is None  # 6 is no multiple of tp 4: the command tries tp 1, 2, ...
    spread = on_machine(serving, "h100-sxm-80gb", 8, Layout(tp=4))
    assert spread.workload.batch_size == 32 and spread.hardware is not None and spread.hardware.gpus == 8


@pytest.mark.parametrize(("name", "mib", "expected"), [
    ("NVIDIA H100 80GB HBM3", 81559, "h100-sxm-80gb"),
    ("NVIDIA H100 PCIe", 81559, "h100-pcie-80gb"),
    ("NVIDIA H100 NVL", 95830, "h100-nvl-94gb"),
    ("NVIDIA H200", 143771, "h200-sxm-141gb"),
    ("NVIDIA A100-SXM4-40GB", 40960, "a100-sxm-40gb"),
    ("NVIDIA A100-SXM4-80GB", 81920, "a100-sxm-80gb"),
    ("NVIDIA A100 80GB PCIe", 81920, "a100-pcie-80gb"),
    ("NVIDIA GeForce RTX 4090", 24564, "rtx-4090-24gb"),
    ("NVIDIA L40S", 46068, "l40s-48gb"),
    ("NVIDIA L40", 46068, "l40-48gb"),
    ("NVIDIA RTX 6000 Ada Generation", 49140, "rtx-6000-ada-48gb"),
    ("NVIDIA RTX A6000", 49140, "rtx-a6000-48gb"),
    ("Tesla T4", 15360, "t4-16gb"),
    ("NVIDIA A10G", 23028, "a10g-24gb"),
    ("NVIDIA Mystery GPU", 16384, None),
    ("NVIDIA H100 80GB HBM3", 40960, None),  # memory far from any H100 row: not guessed
])
def test_driver_names_match_catalog_rows(name: str, mib: int, expected: str | None) -> None:
    assert match_gpu(name, mib * MIB, CATALOG.gpus.rows.values()) == expected


def test_job_runs_on_the_largest_group_of_one_kind() -> None:
    m = machine([h100(), h100(), rtx4090()], 2048)
    job = job_gpus(m)
    assert len(job) == 2 and job[0].catalog_id == "h100-sxm-80gb"
    r = run_audit("llama3-8b-qlora", m)
    assert any("other 1 GPU(s) are not counted" in n for n in r.notes)


# ------------------------------------------------------------------------------------------------ server files

SERVER = """\
name: offer 42
cpu_model: 2 x AMD EPYC 9654
cpu_cores: 192
ram_gb: 2048
disks:
  - {mount: /data, size_tb: 30.72, read_gb_s: 26}
gpus:
  - {catalog_id: h100-sxm-80gb, count: 8, nvlink_links: 18}
"""


def test_server_file_convenience_form(tmp_path: Path) -> None:
    path = tmp_path / "server.yaml"
    path.write_text(SERVER)
    m = read_server_file(path)
    assert m.source == f"{path} (offer 42)"
    assert m.cpu_cores == 192 and m.ram_bytes == 2048 * GIB
    assert m.disks == [Disk(mount="/data", total_bytes=int(30.72 * TB), read_gb_s=26)]
    assert len(m.gpus) == 8 and len(set(m.gpus)) == 1
    g = m.gpus[0]
    row = CATALOG.gpus.rows["h100-sxm-80gb"]
    assert (g.catalog_id, g.memory_bytes, g.ecc, g.pcie_gen, g.nvlink_links) == \
        ("h100-sxm-80gb", int(row.memory_gib * GIB), True, 5, 18)
    assert any("from the catalog row h100-sxm-80gb" in n for n in m.notes)


def test_server_file_full_form() -> None:
    m = parse_server({"cpu_cores": 16, "ram_gb": 64, "gpus": [
        {"name": "NVIDIA GeForce RTX 4090", "memory_gib": 23.99, "pcie_gen": 4, "pcie_width": 8, "count": 2},
        {"name": "Vendor X accelerator", "memory_gib": 48}]}, "offer.yaml", CATALOG)
    assert [g.catalog_id for g in m.gpus] == ["rtx-4090-24gb", "rtx-4090-24gb", None]
    assert m.gpus[0].pcie_width == 8 and m.gpus[2].memory_bytes == 48 * GIB
    assert any("no disks given" in n for n in m.notes)


@pytest.mark.parametrize(("data", "where", "text"), [
    ({"cpu_cores": 8, "ram_gb": 64, "gpus": [{"catalog_id": "h100-sxm-80g"}]}, "gpus[0].catalog_id",
     "did you mean 'h100-sxm-80gb'"),
    ({"cpu_cores": 8, "ram_gbs": 64}, "ram_gbs", "did you mean 'ram_gb'"),
    ({"cpu_cores": 8, "ram_gb": 64, "gpus": [{"catalog_id": "h100", "cout": 8}]}, "gpus[0].cout",
     "did you mean 'count'"),
    ({"cpu_cores": 8, "ram_gb": 64, "gpus": [{"name": "Mystery X1"}]}, "gpus[0].memory_gib", "is required"),
    ({"cpu_cores": 8, "ram_gb": 64, "gpus": [{"count": 2}]}, "gpus[0]", "give catalog_id"),
    ({"cpu_cores": 0, "ram_gb": 64}, "cpu_cores", "greater than 0"),
    (["not", "a", "mapping"], "", "a server file is a mapping"),
])
def test_server_file_errors_name_file_and_field(data: Any, where: str, text: str) -> None:
    with pytest.raises(InputError) as info:
        parse_server(data, "offer.yaml", CATALOG)
    msg = str(info.value)
    assert msg.startswith(f"offer.yaml: {where}" if where else "offer.yaml: ")
    assert text in msg


def test_unknown_catalog_id_carries_suggestions() -> None:
    with pytest.raises(UnknownNameError) as info:
        parse_server({"cpu_cores": 8, "ram_gb": 64, "gpus": [{"catalog_id": "h100-sxm-80g"}]}, "s.yaml", CATALOG)
    assert info.value.suggestions[0] == "h100-sxm-80gb"


def test_missing_server_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        read_server_file(tmp_path / "nope.yaml")


# ------------------------------------------------------------------------------------------------ probing

def test_probe_this_machine() -> None:
    m = probe_machine()
    assert m.cpu_cores >= 1 and m.ram_bytes > 0
    assert m.source.startswith("this machine (")
    if not m.gpus:  # the CI machine: no NVIDIA driver
        assert any(n.startswith(NO_GPU_NOTE) for n in m.notes)
    assert all(g.memory_bytes > 0 for g in m.gpus)


def test_disk_read_test_writes_and_removes_one_file(tmp_path: Path) -> None:
    m = probe_machine(disk_test=True, test_dir=tmp_path, test_bytes=8 * MIB)
    assert list(tmp_path.iterdir()) == []
    note = next(n for n in m.notes if n.startswith("disk read test"))
    assert "8 MiB read back" in note and "can still inflate it" in note
    rated = [d for d in m.disks if d.read_gb_s is not None]
    assert len(rated) == 1 or "is on no listed disk" in note


class _FakeNvml:
    """NVML as pynvml exposes it, for two H100s and a GeForce card: the driver cannot run on a CI machine."""

    class NVMLError(Exception):
        pass

    class NVMLError_NotSupported(NVMLError):
        pass

    NVML_FEATURE_ENABLED = 1
    NVML_NVLINK_MAX_LINKS = 18
    GPUS = [("NVIDIA H100 80GB HBM3", 81559, True, 700_000, 5, 16, 18),
            ("NVIDIA H100 80GB HBM3", 81559, True, 500_000, 5, 8, 18),
            (b"NVIDIA GeForce RTX 4090", 24564, None, 450_000, 4, 16, 0)]

    def __init__(self, fail_init: bool = False) -> None:
        self.fail_init, self.shut = fail_init, False

    def nvmlInit(self) -> None:
        if self.fail_init:
            raise self.NVMLError("Driver Not Loaded")

    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.54.15"

    def nvmlDeviceGetCount(self) -> int:
        return len(self.GPUS)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetName(self, h: int) -> str | bytes:
        return self.GPUS[h][0]

    def nvmlDeviceGetMemoryInfo(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(total=self.GPUS[h][1] * MIB)

    def nvmlDeviceGetEccMode(self, h: int) -> tuple[int, int]:
        if self.GPUS[h][2] is None:
            raise self.NVMLError_NotSupported("Not Supported")
        return (1, 1)

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        return self.GPUS[h][3]

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: int) -> int:
        return self.GPUS[h][4]

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: int) -> int:
        return self.GPUS[h][5]

    def nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int:
        if link >= self.GPUS[h][6]:
            raise self.NVMLError_NotSupported("Not Supported")
        return 1


def test_probe_reads_gpus_through_nvml() -> None:
    nvml = _FakeNvml()
    m = probe_machine(nvml=nvml)
    assert nvml.shut and m.gpu_driver == "550.54.15"
    a, b, c = m.gpus
    assert (a.catalog_id, a.memory_bytes, a.ecc, a.power_limit_w, a.pcie_gen, a.pcie_width, a.nvlink_links) == \
        ("h100-sxm-80gb", 81559 * MIB, True, 700, 5, 16, 18)
    assert (b.power_limit_w, b.pcie_width) == (500, 8)
    assert (c.name, c.catalog_id, c.ecc, c.nvlink_links) == ("NVIDIA GeForce RTX 4090", "rtx-4090-24gb", False, 0)
    r = run_audit("llama3-70b-lora", m.model_copy(update={"ram_bytes": 2048 * GIB}))
    reasons = item(r, "System synergy").reasons
    assert any("GPU 1 at Gen5 x8" in x for x in reasons) and any("GPU 1 500 W" in x for x in reasons)


def test_probe_without_driver_has_no_gpus_and_says_so() -> None:
    m = probe_machine(nvml=_FakeNvml(fail_init=True))
    assert m.gpus == [] and m.gpu_driver is None
    assert any(n.startswith(NO_GPU_NOTE) and "Driver Not Loaded" in n for n in m.notes)


# ------------------------------------------------------------------------------------------------ the command

@pytest.fixture(scope="module")
def app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """A test app: `check` as a subcommand, as in gpuplan.cli."""

    register(app)
    return app


def invoke(app: typer.Typer, *args: str) -> Any:
    result = CliRunner().invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result


def test_check_this_machine_without_gpu_exits_1(app: typer.Typer) -> None:
    r = invoke(app, "check", "--example", "llama3-8b-qlora", "--this-machine")
    if "GPU: none" not in r.output:
        pytest.skip("this machine has an NVIDIA GPU")
    assert r.exit_code == 1
    assert "does not fit: no GPU" in r.output and "a GPU with >=" in r.output


def test_check_this_machine_json(app: typer.Typer) -> None:
    r = invoke(app, "check", "--example", "llama3-8b-qlora", "--this-machine", "--format", "json")
    out = json.loads(r.output)
    assert r.exit_code == (0 if out["fits"] else 1)
    assert [i["item"] for i in out["checklist"]] == list(CHECKLIST)
    assert out["machine"]["cpu_cores"] >= 1 and out["estimate"]["memory"]["device_bytes"] > 0


def test_check_server_file(app: typer.Typer, tmp_path: Path) -> None:
    path = tmp_path / "server.yaml"
    path.write_text(SERVER)
    r = invoke(app, "check", "--example", "llama3-70b-lora", "--server", str(path))
    assert r.exit_code == 0, r.output
    assert "fits" in r.output and "8 x h100-sxm-80gb" in r.output
    path.write_text(SERVER.replace("h100-sxm-80gb", "rtx-4090-24gb").replace("count: 8", "count: 1"))
    r = invoke(app, "check", "--example", "llama3-70b-lora", "--server", str(path))
    assert r.exit_code == 1 and "does not fit" in r.output


@pytest.mark.parametrize(("args", "text"), [
    (["--example", "llama3-8b-qlora"], "give exactly one of --this-machine"),
    (["--example", "llama3-8b-qlora", "--this-machine", "--server", "x.yaml"], "give exactly one of --this-machine"),
    (["--example", "llama3-8b-qlora", "--server", "x.yaml", "--disk-test"], "--disk-test"),
    (["--example", "llama3-8b-qlor", "--this-machine"], "did you mean 'llama3-8b-qlora'"),
    (["--this-machine"], "give a project file or --example NAME"),
    (["--example", "llama3-8b-qlora", "--server", "no-such-server.yaml"], "no such file"),
])
def test_check_bad_input_exits_2(app: typer.Typer, args: list[str], text: str) -> None:
    r = invoke(app, "check", *args)
    assert r.exit_code == 2 and text in r.output


def test_check_bad_server_file_names_file_and_field(app: typer.Typer, tmp_path: Path) -> None:
    path = tmp_path / "server.yaml"
    path.write_text(SERVER.replace("h100-sxm-80gb", "h100-sxm-80g"))
    r = invoke(app, "check", "--example", "llama3-70b-lora", "--server", str(path))
    assert r.exit_code == 2
    assert f"{path}: gpus[0].catalog_id: unknown gpu 'h100-sxm-80g'; did you mean 'h100-sxm-80gb'" in \
        r.output.replace("\n", "")


def test_a_4x_rtx_4090_box_gets_every_fix_the_estimator_confirms(tmp_path: Path) -> None:
    """Issue #13: a Mistral-7B full fine-tune on the team's 4 x RTX 4090 does not fit as written; `check` suggests
    the training stack's own savers the estimate confirms (8-bit AdamW, pure bf16, CPU offload), not only QLoRA,
    more GPUs or a bigger card. Each suggestion is re-estimated on this machine."""
    project = tmp_path / "mistral.yaml"
    project.write_text("name: mistral-7b-full-finetune\nmodel: {preset: mistral-7b}\n"
                       "workload: {task: full-finetune, precision: bf16-mixed, optimizer: adamw, micro_batch_size: 1,"
                       " sequence_length: 2048, gradient_checkpointing: true, epochs: 1}\ndata: {samples: 20000}\n")
    server = Path(__file__).resolve().parents[1] / "fixtures" / "servers" / "4x-rtx-4090.yaml"
    catalog = builtin_catalog()
    result = check_machine(project, read_server_file(server, catalog), catalog)
    assert not result.fits and result.gpus == 4
    by_change = {a.change: a for a in result.alternatives}
    for change in ("8-bit AdamW (bitsandbytes)", "pure bf16: bf16 weights, gradients and optimizer states",
                   "pure bf16 with 8-bit AdamW"):
        assert change in by_change and by_change[change].fits and not by_change[change].needs_hardware, change
    offload = [a for a in result.alternatives if "offloaded to CPU RAM" in a.change]
    assert len(offload) == 2 and all(a.device_bytes < result.device_bytes for a in offload)
    # each is an estimate of that change on these GPUs: an 8-bit optimizer keeps 2 bytes of state per parameter
    # instead of 8, so it needs less than the plan as written and more than pure bf16 with it
    assert by_change["pure bf16 with 8-bit AdamW"].device_bytes < by_change["8-bit AdamW (bitsandbytes)"].device_bytes
