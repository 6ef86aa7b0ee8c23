"""The few lines the page shows above the report, and side by side when it compares scenarios: the plan's
recommendation as labelled, already formatted text, so the page itself does no arithmetic (pure)."""

from __future__ import annotations

from pydantic import BaseModel

from gpuplan.core.layout_text import candidate_layout_text
from gpuplan.report.common import price_text, time_text
from gpuplan.schema.plan import PlanResult
from gpuplan.units import GIB, fmt_ram_gb


class SummaryRow(BaseModel):
    key: str
    label: str
    value: str


class PlanSummary(BaseModel):
    project: str
    objective: str
    gpu_id: str
    gpu_name: str
    gpus_per_server: int
    servers: int
    verdict: str
    rows: list[SummaryRow]


def summarize(result: PlanResult) -> PlanSummary:
    rec = result.recommendation
    assert rec is not None  # api.plan raises InfeasibleError before a plan without one exists
    s = rec.server
    mem = rec.memory
    renting = rec.action is not None and rec.action.verb == "rent"
    rows = [
        ("gpu", "GPUs", f"{rec.gpus_per_server} x {rec.gpu_name}"
                        + (f" in each of {rec.servers} servers" if rec.servers > 1 else "")),
        ("server", "Server", f"{s.platform_name}: {s.cpu_sockets} x {s.cpu_model} ({s.cpu_cores} cores), "
                             f"{fmt_ram_gb(s.ram_bytes)} RAM, {s.storage_bytes / 1e12:,.1f} TB NVMe"),
        ("layout", "Layout", candidate_layout_text(rec.layout)),
        ("memory", "Memory per GPU", f"{mem.device_bytes / GIB:,.1f} GiB now, {rec.grown_device_bytes / GIB:,.1f} GiB "
                                     f"after the planned growth ({mem.dominant} dominate)"),
        ("time", "Time", time_text(rec)),
        ("price", "If you buy: hardware price" if renting else "Hardware price", price_text(rec)),
        ("power", "Power and cooling", f"{s.power_w / 1000:,.1f} kW, {s.cooling_btu_h:,.0f} BTU/h ({s.cooling})"),
    ]
    if rec.deployment is not None:
        d = rec.deployment
        rows.append(("deployment", "Deployment", f"{d.option} ({d.provider}): {d.total_cost:,.0f} {d.currency} "
                                                 f"over the horizon, {d.monthly_cost:,.0f} {d.currency}/month"))
    verdict = (rec.action.text if rec.action is not None else
               f"{rec.servers} x {s.platform_name} with {rec.gpus_per_server} x {rec.gpu_name}") + \
        f" (ranked by {result.objective})"
    return PlanSummary(project=result.project, objective=result.objective, gpu_id=rec.gpu_id, gpu_name=rec.gpu_name,
                       gpus_per_server=rec.gpus_per_server, servers=rec.servers, verdict=verdict,
                       rows=[SummaryRow(key=k, label=label, value=v) for k, label, v in rows])
