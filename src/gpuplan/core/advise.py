"""The plan, as one pure function: a project, its resolved model (or its trace) and the loaded bundle of catalogs,
prices and assumptions in; the ranked candidates with their servers and deployment costs, what was rejected and
why, the decision checklist and the answers to the usual questions out. The guide's steps, in order:
size the need (core/sizing), search and rank the servers (core/search, core/server), compare the deployments
(core/cost), answer the checklist (core/checklist.py)."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from functools import cache, partial
from operator import attrgetter
from typing import Any

from gpuplan.core.checklist import build_checklist, build_faq
from gpuplan.core.cost.clusters import rent_rate
from gpuplan.core.cost.deployments import deploy, median_rent, pricing, quotes_by_gpu
from gpuplan.core.cost.growth import training_work
from gpuplan.core.search.evidence import evidence_by_gpu
from gpuplan.core.search.explore import SearchInputs, SearchOutput, memory_headroom, search
from gpuplan.core.search.placement import placement_of
from gpuplan.core.search.ranking import budget_limit, rank, same_cost
from gpuplan.core.search.traced import search_traced
from gpuplan.core.server.builder import build_server, server_price
from gpuplan.core.sizing.params import count_params
from gpuplan.core.sizing.project import grow_arch
from gpuplan.core.verdict import chosen_deployment
from gpuplan.errors import InfeasibleError
from gpuplan.schema.bundle import Bundle
from gpuplan.schema.defaults import Objective
from gpuplan.schema.estimate import Note
from gpuplan.schema.model import ModelArch
from gpuplan.schema.plan import Candidate, Evidence, GrowthRow, PlanResult, Rejected
from gpuplan.schema.project import Project
from gpuplan.schema.trace import CustomTraceResult
from gpuplan.units import fmt_money

#: the rejection codes the binding constraint groups, in the order it reports them
BINDING_ORDER = ("over-budget", "deadline", "latency", "no-fit-after-growth", "no-fit")


def plan(project: Project, bundle: Bundle, *, as_of: datetime.date, arch: ModelArch | None = None,
         traced: CustomTraceResult | None = None, objective: Objective | None = None, top: int | None = None,
         evidence: dict[str, Evidence] | None = None, clock: Callable[[], float] = lambda: 0.0) -> PlanResult:
    """The servers to get for `project` (its model as `arch`, or as `traced`): candidates that fit (with headroom
    and planned growth) and meet the deadline and budget, ranked by the objective, with the decision checklist
    answered. Raises InfeasibleError naming the binding constraint and the gap when nothing qualifies.
    `as_of`: the date the plan is made for (prices older than six months on it are stale). `evidence`: each GPU's
    (`plan_evidence(bundle, as_of)`, which a caller planning often keeps). `clock` (seconds) times the search for
    stats.search_seconds."""
    obj = objective or project.goals.objective
    catalog = bundle.catalog
    currency = plan_currency(project)
    if bundle.currency != currency:
        raise ValueError(f"the bundle's amounts are in {bundle.currency or 'the currencies of their sources'}, the "
                         f"plan's in {currency}: convert it first (gpuplan.catalog.currency.in_currency)")
    groups = project.deployment.price_groups
    inp = SearchInputs(
        project=project, arch=arch,  # type: ignore[arg-type]
        grown_arch=grow_arch(arch, project.growth.model_scale) if arch is not None else None,  # type: ignore[arg-type]
        catalog=catalog, speed=bundle.speed, table=bundle.table, overheads=bundle.overheads,
        build_server=partial(build_server, catalog=catalog, rules=bundle.rules, currency=currency),
        server_price=partial(server_price, catalog=catalog, rules=bundle.rules), currency=currency,
        # the server builder prices the cluster network into each server
        rent_per_gpu_hour=median_rent(bundle.prices, groups.providers),
        checkpoints_kept=int(bundle.rules.checkpoints_kept),
        rent_at=_rent_at(bundle, groups.providers),
        clock=clock, evidence=plan_evidence(bundle, as_of) if evidence is None else evidence,
        serving=bundle.serving,
    )
    out: SearchOutput[Any] = (search_traced(inp, traced, obj) if traced is not None
                              else search(inp, obj, growth_top=top, top=top))
    work = _work(project, arch)  # a training run's grown compute, counted once for the costs and the checklist
    shown, over, picks = _within_budget(project, out, bundle, currency, top, as_of, obj, work)
    if not shown:
        raise InfeasibleError(binding_constraint([*out.rejected, *over], project.workload.task))
    rejected = [*out.rejected, *over]
    checklists = [build_checklist(project, c, catalog, work) for c in shown]
    # the recommendation is the best candidate whose checklist fails nowhere (a hard limit it breaks is no
    # recommendation); the others stay listed in rank order
    best = next((i for i, cl in enumerate(checklists) if all(item.verdict != "fail" for item in cl)), None)
    if best is None:
        raise InfeasibleError("every candidate fails the decision checklist: " + "; ".join(
            f"{shown[0].gpu_id}: {item.item}: {item.reasons[-1]}" for item in checklists[0] if item.verdict == "fail"))
    rec, checklist = shown[best], checklists[best]
    faq = build_faq(project, rec, out.ranked, rejected, catalog, bundle.host_support, bundle.platform_needs, work)
    notes = list(inp.notes)
    if arch is not None:  # GRPO: colocated against separate pools on the recommendation's GPUs
        notes += placement_of(rec, project, arch, catalog.gpus, bundle.speed, bundle.table, bundle.overheads,
                              bundle.serving, memory_headroom(project))
    for kind in ("gpu", "cpu", "platform", "drive", "nic"):
        for rid in catalog.table(kind).overridden():
            notes.append(Note(code="catalog-user-row", message=f"{kind} {rid}: your row replaces the built-in"))
    return PlanResult(project=project.name, objective=obj, recommendation=rec, candidates=shown,
                      rejected=rejected, checklist=checklist, faq=faq,
                      stats=out.stats, notes=notes,
                      headroom=memory_headroom(project), growth_view=_shown_growth(out, shown, picks),
                      currency=currency, as_of=as_of)


def _rent_at(bundle: Bundle, providers: Sequence[str]) -> Callable[[str, int, int], float | None]:
    """SearchInputs.rent_at over the bundle's on-demand quotes in the project's provider classes, memoised."""
    rows = quotes_by_gpu(bundle.prices, providers)
    clusters = bundle.prices.clusters

    @cache
    def at(gpu_id: str, together: int, fabric: int) -> float | None:
        return rent_rate(rows.get(gpu_id, []), clusters, together, fabric)
    return at


def plan_currency(project: Project) -> str:
    """The currency a plan is made in: its budget's, else USD."""
    return project.goals.budget.currency if project.goals.budget else "USD"


def plan_evidence(bundle: Bundle, as_of: datetime.date) -> dict[str, Evidence]:
    """How well each GPU's speed and prices are known on `as_of` (core/search/evidence.py): the same for every
    plan of one bundle and date."""
    return evidence_by_gpu(bundle.catalog.gpus.rows.values(), bundle.speed, bundle.prices, as_of)


def _shown_growth(out: SearchOutput[Any], shown: list[Candidate], picks: list[Any]) -> list[GrowthRow]:
    """The growth view of the shown candidates only (one over budget is rejected after the search built it), with
    the rows of those shown from past the search's growth_top (taken when others fell over the budget)."""
    key = attrgetter("gpu_id", "gpus_per_server", "servers")
    keys = {key(c) for c in shown}
    rows = [g for g in out.growth_view if key(g) in keys]
    have = {key(g) for g in rows}
    rows += out.grow([k for k, c in zip(picks, shown) if key(c) not in have])
    place = {key(c): i for i, c in enumerate(shown)}  # in the order shown (a stable sort keeps the factors' order)
    return sorted(rows, key=lambda g: place[key(g)])


def _within_budget(project: Project, out: SearchOutput[Any], bundle: Bundle, currency: str, top: int | None,
                   as_of: datetime.date, objective: str,
                   work: float | None = None) -> tuple[list[Candidate], list[Rejected], list[Any]]:
    """The first `top` ranked candidates (all when None) whose chosen deployment costs no more than goals.budget,
    each with its deployment options: the budget is checked against the very total the report shows. The
    candidates over it are returned as rejections; and the ranked records of those kept."""
    budget, horizon = project.goals.budget, project.growth.horizon_months
    kept: list[Candidate] = []
    picks: list[Any] = []
    over: list[Rejected] = []
    prices = pricing(project, bundle.prices, currency, as_of, bundle.conversion, work=work,
                     no_price={g.id: g.no_price for g in bundle.catalog.gpus.rows.values() if g.no_price})
    for i, k in enumerate(out.ranked):
        c = out.candidates[i] if i < len(out.candidates) else out.materialize(k)
        c = deploy(prices, c)
        chosen = c.deployment
        if budget is not None and chosen is not None and chosen.total_cost > budget_limit(budget, horizon):
            over.append(Rejected(gpu_id=c.gpu_id, gpus_per_server=c.gpus_per_server, servers=c.servers,
                                 code="over-budget", cost=chosen.total_cost,
                                 reason=f"over budget: {chosen.option} ({chosen.provider}) costs "
                                 f"{fmt_money(chosen.total_cost, currency)} over {horizon} months, budget "
                                 f"{fmt_money(budget_limit(budget, horizon), budget.currency)}"))
            continue
        kept.append(c)
        picks.append(k)
    # every candidate within budget is re-ranked (so the first `top` are the first of all, whatever `top`)
    order = by_total(kept, objective, same_cost(budget, horizon))
    return [kept[i] for i in order][:top or None], over, [picks[i] for i in order][:top or None]


class _Total:
    """A candidate as the final ranking reads it: its cost is the total of the way it is got (its chosen deployment,
    over the horizon), not the search's cheaper of a bare purchase price and a rental."""

    __slots__ = ("c", "cost", "i", "servers")

    def __init__(self, c: Candidate, i: int) -> None:
        self.c, self.i = c, i  # the candidate and its place in the search's order
        self.cost = c.deployment.total_cost if c.deployment is not None else None
        # the servers it comes to by the horizon, its growth steps' with it: fewer GPUs means fewer in the end (four
        # GPUs bought now and eight more as the users grow are not the simpler machine beside one server of eight)
        chosen = chosen_deployment(c)
        self.servers = c.servers + (sum(st.servers for st in chosen.growth) if chosen is not None else 0)

    @property
    def time_hours(self) -> float | None:
        return self.c.time_hours

    @property
    def request_latency_s(self) -> float | None:
        return self.c.request_latency_s

    @property
    def gpus_per_server(self) -> int:
        return self.c.gpus_per_server


def by_total(cands: list[Candidate], objective: str, same: float) -> list[int]:
    """The order of `cands` (deployed) by the objective on what each costs as it is got: buying a server counts its
    power, hosting, support and staff less its resale, as the deployment comparison does, where the search ranked
    on its purchase price alone (a 37,122 EUR H100 PCIe server ranked under a 51,636 EUR H100 NVL rental that its
    own 67,956 EUR ownership, or its 52,436 EUR rental, costs more than). Each candidate's score and Pareto flag
    become this ranking's."""
    out = []
    for v, score, front in rank([_Total(c, i) for i, c in enumerate(cands)], objective, same,
                                adequate=lambda v: v.c.evidence is None or v.c.evidence.adequate):
        cands[v.i] = v.c.model_copy(update={"score": score, "pareto": front})
        out.append(v.i)
    return out


def _work(project: Project, arch: ModelArch | None) -> float | None:
    """A training run's compute over the horizon against one planned run: the model grown by growth.model_scale (its
    parameters used per token, grown by whole layers) on growth.data_scale x the data; None (the scales' product)
    when the model is known by its trace only."""
    g = project.growth
    if arch is None or project.workload.task == "inference":
        return None
    return training_work(count_params(arch).active, count_params(grow_arch(arch, g.model_scale)).active, g.data_scale)


def binding_constraint(rejected: list[Rejected], task: str = "full-finetune") -> str:
    """One sentence: what binds, by how much, and what could be changed for the project's `task` (a service changes
    its load or objectives; a LoRA/QLoRA run is not told to use LoRA)."""
    serving = task == "inference"
    kinds: dict[str, list[Rejected]] = {code: [] for code in BINDING_ORDER}
    for r in rejected:
        if r.code in kinds:
            kinds[r.code].append(r)
    if kinds["over-budget"]:  # the cheapest way that works, whether bought or rented
        r = min(kinds["over-budget"], key=lambda x: x.cost if x.cost is not None else float("inf"))
        options = ("raise goals.budget, serve less load (users, arrival_rate) or looser objectives, fp8 weights, or "
                   "a smaller model" if serving else
                   "raise goals.budget, fewer tokens (workload.epochs, tokens), or a smaller model"
                   if task in ("lora", "qlora") else "raise goals.budget, use LoRA/QLoRA, or a smaller model")
        return f"nothing fits the budget: the cheapest way that works, {r.servers} x {r.gpus_per_server} x " \
               f"{r.gpu_id}, is {r.reason}; options: {options}"
    if kinds["deadline"]:
        r = min(kinds["deadline"], key=lambda x: x.reason)
        return f"nothing meets the deadline: {r.servers} x {r.gpus_per_server} x {r.gpu_id} {r.reason}; options: " \
               "more GPUs (constraints.max_servers), fewer tokens, or a later goals.deadline_days"
    if kinds["latency"]:
        r = kinds["latency"][0]
        return f"nothing meets the latency objectives: {r.gpu_id} {r.reason}; options: looser objectives " \
               "(workload.slo, target_latency_s), fewer output tokens, a smaller model or fp8 weights"
    if kinds["no-fit-after-growth"]:
        r = kinds["no-fit-after-growth"][0]
        return f"nothing fits after the planned growth: {r.gpu_id} x{r.gpus_per_server}: {r.reason}; options: " \
               "lower growth.*, more GPUs, or plan to replace the servers when the model grows"
    if kinds["no-fit"]:
        best = kinds["no-fit"][0]
        options = ("tensor parallel over more GPUs, fp8 or int4 weights, a shorter context, or a larger GPU "
                   "(constraints.gpus)" if serving else "ZeRO-3 over more GPUs, gradient checkpointing, "
                   + ("" if task == "qlora" else "QLoRA, ") + "a shorter sequence, or a larger GPU (constraints.gpus)")
        return f"no allowed GPU holds the job: {best.gpu_id} {best.reason}; options: {options}"
    if rejected:
        return f"no candidate: {rejected[0].gpu_id}: {rejected[0].reason}"
    return "no GPU is allowed by the constraints (constraints.gpus, exclude_gpus, datacenter_only)"


__all__ = ["BINDING_ORDER", "binding_constraint", "plan", "plan_currency", "plan_evidence"]
