"""The few lines the page shows above the report, and side by side when it compares scenarios: the plan's
recommendation as labelled, already formatted text, so the page itself does no arithmetic (pure)."""

from __future__ import annotations

from pydantic import BaseModel

from gpuplan.core.layout_text import candidate_layout_text
from gpuplan.report.common import price_text, time_text
from gpuplan.report.i18n import t
from gpuplan.report.numbers import numbers
from gpuplan.report.translate import french_number, tr
from gpuplan.report.verdict import time_in, verdict_lines
from gpuplan.schema.plan import PlanResult
from gpuplan.units import GIB


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


def summarize(result: PlanResult, lang: str = "en") -> PlanSummary:
    """The summary in `lang` (report/i18n.py's fixed strings, the core's words through report/translate.py)."""
    rec = result.recommendation
    assert rec is not None  # api.plan raises InfeasibleError before a plan without one exists
    s = rec.server
    mem = rec.memory
    nf = numbers(lang)
    renting = rec.action is not None and rec.action.verb == "rent"
    money = french_number if lang == "fr" else str  # "12,345 EUR" -> "12 345 €"
    rows = [
        ("gpu", t("s_gpus", lang), f"{rec.gpus_per_server} x {rec.gpu_name}"
                                   + (t("s_in_servers", lang, n=rec.servers) if rec.servers > 1 else "")),
        ("server", t("tx_server", lang), t("s_server", lang, platform=s.platform_name, sockets=s.cpu_sockets,
                                           cpu=s.cpu_model, cores=s.cpu_cores, ram=nf.num(s.ram_bytes / GIB),
                                           tb=nf.num(s.storage_bytes / 1e12, 1))),
        ("layout", t("col_layout", lang).capitalize(),
         candidate_layout_text(rec.layout, replicas=t("word_replicas", lang), batch=t("word_batch", lang))),
        ("memory", t("tx_memory", lang), t("s_memory", lang, now=nf.num(mem.device_bytes / GIB, 1),
                                           grown=nf.num(rec.grown_device_bytes / GIB, 1),
                                           dominant=tr(mem.dominant, lang))),
        ("time", t("col_time", lang).capitalize(), time_text(rec) if lang == "en" else time_in(rec, lang)),
        ("price", t("s_price_if_buy" if renting else "s_price", lang), money(price_text(rec))),
        ("power", t("s_power", lang), t("s_power_value", lang, kw=nf.num(s.power_w / 1000, 1),
                                        btu=nf.num(s.cooling_btu_h), cooling=tr(s.cooling, lang))),
    ]
    if rec.deployment is not None:
        d = rec.deployment
        rows.append(("deployment", t("s_deployment", lang),
                     t("s_deployment_value", lang, option=tr(d.option, lang), provider=tr(d.provider, lang),
                       total=money(f"{d.total_cost:,.0f} {d.currency}"),
                       monthly=money(f"{d.monthly_cost:,.0f} {d.currency}"))))
    if rec.action is not None:
        head = rec.action.text if lang == "en" else " ".join(verdict_lines(result, lang)[:-1])
    else:
        head = t("server_of", lang, servers=rec.servers, platform=s.platform_name, gpus=rec.gpus_per_server,
                 gpu=rec.gpu_name)
    verdict = head + t("s_ranked", lang, objective=result.objective if lang == "en"
                       else t(f"objective_{result.objective}", lang))
    return PlanSummary(project=result.project, objective=result.objective, gpu_id=rec.gpu_id, gpu_name=rec.gpu_name,
                       gpus_per_server=rec.gpus_per_server, servers=rec.servers, verdict=verdict,
                       rows=[SummaryRow(key=k, label=label, value=v) for k, label, v in rows])
