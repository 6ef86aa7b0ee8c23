"""The verdict of the Markdown and HTML reports, in the report's language: the action first (buy the server, or
rent the GPUs, from whom, at what cost; the next way and why it lost: core/verdict.py), then the server it rests on,
"if you buy" when renting is the answer."""

from __future__ import annotations

from gpuplan.core.verdict import runner_up
from gpuplan.report.common import chosen_deployment, layout_text, time_text
from gpuplan.report.i18n import t
from gpuplan.report.numbers import Numbers, numbers
from gpuplan.report.translate import tr
from gpuplan.schema.plan import Candidate, PlanResult
from gpuplan.units import GIB


def time_in(c: Candidate, lang: str) -> str:
    return numbers(lang).localize(time_text(c, day=t("unit_day", lang), per_request=t("unit_per_request", lang),
                                            per_billion=t("unit_per_billion", lang)))


def layout_in(c: Candidate, lang: str) -> str:
    return layout_text(c, replicas=t("word_replicas", lang), batch=t("word_batch", lang))


def price_in(c: Candidate, nf: Numbers) -> str:
    """The purchase price in the plan's currency (the candidate's)."""
    return "-" if c.price is None else amount_in(c.price, c.currency, nf)


def amount_in(amount: float, currency: str, nf: Numbers) -> str:
    """An amount as the tables write prices: "$12,345" in US dollars, "12,345 EUR" otherwise (in `nf`'s language)."""
    return nf.usd(amount) if currency == "USD" else nf.money(amount, currency)


def gib_in(n: float, nf: Numbers) -> str:
    return nf.num(n / GIB, 1)


def verdict_lines(result: PlanResult, lang: str) -> list[str]:
    """The action first (buy or rent what, from whom, at what cost; the next way and why it lost), then the
    server it rests on ("if you buy" when renting is the answer)."""
    rec = result.recommendation
    if rec is None:
        return [t("no_recommendation", lang)]
    s = rec.server
    nf = numbers(lang)
    renting = rec.action is not None and rec.action.verb == "rent"  # then the server is what buying would take
    server = t("verdict", lang, label=t("if_you_buy" if renting else "recommended", lang),
               objective=t(f"objective_{result.objective}", lang), servers=rec.servers,
               platform=s.platform_name, gpus=rec.gpus_per_server, gpu=rec.gpu_name, gpu_id=rec.gpu_id,
               layout=layout_in(rec, lang), time=time_in(rec, lang), price=price_in(rec, nf),
               mem=gib_in(rec.memory.device_bytes, nf), grown=gib_in(rec.grown_device_bytes, nf))
    if rec.action is not None:
        return [*_action_lines(rec, lang), server]
    out = [server]
    if rec.deployment is not None:
        d = rec.deployment
        chosen = chosen_deployment(rec)
        if rec.time_hours is not None and chosen is not None and chosen.cost_per_run:
            out.append(t("verdict_deploy_run", lang, option=tr(d.option, lang), provider=tr(d.provider, lang),
                         run=nf.money(chosen.cost_per_run, d.currency), total=nf.money(d.total_cost, d.currency)))
        else:
            out.append(t("verdict_deploy", lang, option=tr(d.option, lang), provider=tr(d.provider, lang),
                         total=nf.money(d.total_cost, d.currency),
                         monthly=nf.num(chosen.running_monthly if chosen is not None else d.monthly_cost)))
    return out


def server_head(rec: Candidate) -> str:
    """The server section's heading: the recommended server, or what buying would take when renting wins."""
    return "h_server_if_buy" if rec.action is not None and rec.action.verb == "rent" else "h_server"


def _action_lines(rec: Candidate, lang: str) -> list[str]:
    """The action of `rec` and its runner-up, in `lang`, from the candidate's own figures."""
    a = rec.action
    assert a is not None
    nf = numbers(lang)
    chosen = chosen_deployment(rec)
    assert chosen is not None
    money, months = a.currency, a.horizon_months
    total = nf.money(a.total_cost, money)
    if a.cost_basis == "per run":
        cost = t("act_per_run", lang, cost=nf.money(a.cost, money), time=time_in(rec, lang), total=total, months=months)
    else:
        cost = t("act_per_month", lang, cost=nf.money(a.cost, money), total=total, months=months)
    now = a.gpus // max(rec.gpus_per_server, 1)  # the servers got now: the first month's growth step with the rest
    first = t("act_first", lang, servers=rec.servers, more=now - rec.servers) if now > rec.servers else ""
    if a.verb == "buy":
        item = t("server_of", lang, servers=now, platform=rec.server.platform_name, gpus=rec.gpus_per_server,
                 gpu=rec.gpu_name) + first
        line = t("act_buy", lang, item=item, price=nf.money(a.cost, money), total=total, months=months)
    elif a.option == "cloud":
        kind = chosen.provider.removeprefix("cloud ")
        line = t("act_cloud", lang, item=tr(a.item, lang) + first, kind=t(f"kind_{kind}", lang),
                 providers=tr(a.provider, lang), cost=cost,
                 rate=nf.money(chosen.price_per_gpu_hour or 0.0, money, 2))
    else:
        line = t("act_managed", lang, item=tr(a.item, lang) + first, gpus=a.gpus, cost=cost)
    other = runner_up(rec, chosen)
    if other is None:
        return [line]
    month = chosen.breakeven_months_vs.get(other.option)
    when = (t("act_dearer", lang) if month == 0.0 else "" if month is None
            else t("act_until", lang, month=nf.num(month, 1)))
    what = t(f"way_{other.option}", lang, provider=tr(other.provider.removeprefix("cloud "), lang))
    return [line, t("act_runner", lang, what=what, total=nf.money(other.total_cost, other.currency), months=months,
                    when=when)]


__all__ = ["amount_in", "gib_in", "layout_in", "price_in", "server_head", "time_in", "verdict_lines"]
