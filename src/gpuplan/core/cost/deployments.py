"""Each shown candidate's ways to get it (buy and host on-premises, rent managed dedicated servers, cloud GPUs),
priced over the horizon from the price book (core/cost/tco.py), and the reference rent the search ranks with.
Pure: the date prices are judged stale against (the plan's `as_of`) is passed in."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass

from gpuplan.core.cost.clusters import cluster_gap, clustered, needs_cluster, rent_rate
from gpuplan.core.cost.growth import mean_load, planned_work, serving_additions
from gpuplan.core.cost.inputs import Assumptions, Usage, resolve_assumptions
from gpuplan.core.cost.inputs import Config as TcoConfig
from gpuplan.core.cost.tco import choose, compare, shape_gap
from gpuplan.core.search.evidence import is_stale
from gpuplan.core.verdict import action_of
from gpuplan.schema.plan import Candidate, Deployment
from gpuplan.schema.prices import CloudPrice, ClusterOffer, HostingOffer, PriceBook
from gpuplan.schema.project import Project
from gpuplan.units import HOURS_PER_MONTH

#: the deployment settings a project may set to replace the assumptions of data/tco.toml
OVERRIDES = ("pue", "electricity_per_kwh", "utilization", "depreciation_years", "residual_value_fraction",
             "staff_fte_per_server", "staff_cost_per_fte_year", "colocation_per_kw_month", "support_fraction_per_year")


def quotes_by_gpu(book: PriceBook, providers: Sequence[str] = ()) -> dict[str, list[CloudPrice]]:
    """The cloud quotes by GPU, in the provider classes asked for (deployment.price_groups.providers; empty: all)."""
    out: dict[str, list[CloudPrice]] = {}
    for p in book.cloud:
        if not providers or p.tier in providers:
            out.setdefault(p.gpu_id, []).append(p)
    return out


def median_rent(book: PriceBook, providers: Sequence[str] = ()) -> dict[str, float]:
    """Median on-demand cloud price per GPU-hour by GPU, in the price book's currency: what renting the GPUs for a
    run costs; `providers`: only these provider classes (deployment.price_groups.providers; empty: all)."""
    rates = {gid: rent_rate(rows, (), 1, 0) for gid, rows in quotes_by_gpu(book, providers).items()}
    return {gid: r for gid, r in rates.items() if r is not None}


def cost_assumptions(proj: Project, book: PriceBook, currency: str) -> Assumptions:
    """The cost model's inputs for `proj` in `currency` (the price book's: it is converted into the plan's): the
    project's `deployment` values over data/tco.toml's."""
    dep = proj.deployment
    production = proj.goals.purpose == "production"
    data = {k: (a.value, f"{a.source}, {a.as_of}") for k, a in book.assumptions.items()}
    overrides = {k: getattr(dep, k) for k in OVERRIDES}
    if currency == "EUR" and overrides["electricity_per_kwh"] is None and "electricity_eur_per_kwh" in book.assumptions:
        # a European budget pays European power prices
        data["electricity_usd_per_kwh"] = data["electricity_eur_per_kwh"]
    return resolve_assumptions(overrides, data, production)


@dataclass(frozen=True, slots=True)
class Pricing:
    """What the deployments of one plan's candidates share, read from the price book once: the cost model's
    inputs, the quotes by GPU, and each GPU's warning of quotes older than six months on the plan's date."""

    project: Project
    assumptions: Assumptions
    cloud: dict[str, list[CloudPrice]]
    hosting: dict[str, list[HostingOffer]]
    #: by GPU id: "prices older than 6 months: <provider> (<date>), ..." (no entry: none is stale)
    stale: dict[str, str]
    #: every amount's currency (the price book's, the plan's)
    currency: str
    #: how the amounts were converted into it (gpuplan.catalog.currency), cited in every deployment's assumptions
    conversion: str | None = None
    #: training: the compute the horizon holds against one planned run, the grown model on the grown data
    #: (core/cost/growth.training_work)
    work: float = 1.0
    #: the providers' multi-node cluster offers (data/clusters.toml): who rents a configuration across servers
    clusters: tuple[ClusterOffer, ...] = ()
    #: by GPU id: why the catalog has no purchase price for it (data/gpus.toml `no_price`), said where buying is
    #: not priced
    no_price: dict[str, str] | None = None


def pricing(proj: Project, book: PriceBook, currency: str, as_of: datetime.date,
            conversion: str | None = None, work: float | None = None,
            no_price: dict[str, str] | None = None) -> Pricing:
    """The `Pricing` of a plan made on `as_of`, every amount in `currency` (the price book's, converted into the
    plan's currency as `conversion` says). `work`: a training run's growth in compute over the horizon
    (core/cost/growth.training_work; default growth.data_scale x growth.model_scale)."""
    # deployment.price_groups: only the provider classes asked for
    cloud = quotes_by_gpu(book, proj.deployment.price_groups.providers)
    hosting: dict[str, list[HostingOffer]] = {}
    old: dict[str, set[str]] = {}
    for p in (p for rows in cloud.values() for p in rows):
        if is_stale(p.as_of, as_of):
            old.setdefault(p.gpu_id, set()).add(f"{p.provider} ({p.as_of})")
    for h in book.hosting:
        hosting.setdefault(h.gpu_id, []).append(h)
        if is_stale(h.as_of, as_of):
            old.setdefault(h.gpu_id, set()).add(f"{h.id} ({h.as_of})")
    # every stale quote is named, none cut off (issue 28: no price older than six months without its age line)
    stale = {gid: "prices older than 6 months: " + ", ".join(sorted(names)) for gid, names in old.items()}
    g = proj.growth
    return Pricing(project=proj, assumptions=cost_assumptions(proj, book, currency), cloud=cloud, hosting=hosting,
                   stale=stale, currency=currency, conversion=conversion,
                   work=work if work is not None else planned_work(g.model_scale, g.data_scale), no_price=no_price,
                   clusters=tuple(book.clusters))


def with_deployments(proj: Project, cands: list[Candidate], book: PriceBook, currency: str, as_of: datetime.date,
                     conversion: str | None = None) -> list[Candidate]:
    """Each candidate with its deployment options (on-premises, managed, cloud) and the one chosen; quotes older
    than six months on `as_of` are flagged. Every amount is in `currency`, the price book's (converted into the
    plan's currency as `conversion` says, which each deployment's assumptions then cite)."""
    prices = pricing(proj, book, currency, as_of, conversion)
    return [deploy(prices, c) for c in cands]


def deploy(prices: Pricing, c: Candidate) -> Candidate:
    """`c` with its deployment options (on-premises, managed, cloud) and the one chosen."""
    proj, assumptions = prices.project, prices.assumptions
    dep = proj.deployment
    horizon = proj.growth.horizon_months
    serving = proj.workload.task == "inference"
    util = assumptions.get("utilization")
    wall = c.time.wall_hours if c.time is not None else None
    if not serving and wall and dep.utilization is None:
        # training: the compute of the grown model on the grown data (growth.model_scale, data_scale: about their
        # product in runs as planned), over the horizon
        util = min(1.0, prices.work * wall / (horizon * HOURS_PER_MONTH))
    scale = proj.growth.users_scale
    additions = serving_additions(c.inference, c.layout, c.gpus_per_server, c.servers, scale, horizon) \
        if serving else []
    use = Usage(horizon_months=horizon, production=proj.goals.purpose == "production", serving=serving,
                utilization=util, run_hours=wall,
                tokens_per_s=c.inference.aggregate_tokens_per_s if c.inference is not None else None,
                storage_bytes=c.storage_need_bytes, additions=tuple(additions),
                load_mean=mean_load(scale) if serving else 1.0,
                growth_note=f"users x{scale:g} by month {horizon}, linearly" if serving and scale > 1 else None,
                cloud_kinds=tuple(dep.price_groups.commitments))
    # the GPUs that must share one machine: a training server's, a serving replica's (tp x pp, within a server)
    together = min(c.gpus_per_server, c.layout.tp * c.layout.pp) if serving else c.gpus_per_server
    cfg = TcoConfig(gpu_id=c.gpu_id, gpus_per_server=c.gpus_per_server, servers=c.servers, price=c.price,
                    power_w=c.server.power_w, together=together)
    rows = prices.cloud.get(c.gpu_id, [])
    # servers on one fabric (a training run across them, a replica spanning them): a provider's cluster offer only
    fabric = needs_cluster(c.servers, c.gpus_per_server, not serving, c.layout.tp * c.layout.pp)
    quotes = clustered(rows, prices.clusters, c.servers * c.gpus_per_server) if fabric else rows
    deps = compare(cfg, use, quotes, prices.hosting.get(c.gpu_id, []),
                   assumptions, prices.currency, list(dep.options), stale=prices.stale.get(c.gpu_id),
                   note=prices.conversion)
    if fabric:
        line = (f"{c.servers} servers on one fabric: priced from the providers that rent {c.gpu_id} as a multi-node "
                f"cluster of {c.servers * c.gpus_per_server} GPUs (data/clusters.toml)")
        deps = [d.model_copy(update={"assumptions": [*d.assumptions, line]}) if d.option == "cloud" else d
                for d in deps]
    asked = groups_asked(proj)
    if asked:  # each cloud cost says it was priced within the groups the project asked for
        line = f"priced within the price groups deployment.price_groups asks for: {asked}"
        deps = [d.model_copy(update={"assumptions": [*d.assumptions, line]}) if d.option == "cloud" else d
                for d in deps]
    choice = choose(deps, use)
    gaps = _gaps(c.gpu_id, list(dep.options), deps, (prices.no_price or {}).get(c.gpu_id), asked,
                 (cluster_gap(c.gpu_id, c.servers, c.gpus_per_server, rows, prices.clusters) if fabric else None)
                 or shape_gap(c.gpu_id, together, rows))
    if choice is not None and gaps:
        choice = choice.model_copy(update={"gaps": gaps, "reasons": [*choice.reasons, *gaps]})
    priced = c.model_copy(update={"deployments": deps, "deployment": choice})
    return priced.model_copy(update={"action": action_of(priced, horizon)})


def groups_asked(proj: Project) -> str | None:
    """The cloud price groups the project restricts its costs to (deployment.price_groups), in words; None: all."""
    g = proj.deployment.price_groups
    parts = ([f"providers {', '.join(g.providers)}"] if g.providers else []) + \
        ([f"commitments {', '.join(g.commitments)}"] if g.commitments else [])
    return "; ".join(parts) if parts else None


def _gaps(gpu_id: str, options: list[str], deps: list[Deployment], no_price: str | None = None,
          asked: str | None = None, shape: str | None = None) -> list[str]:
    """The deployment options asked for that no price covers for this GPU, said next to the others; buying, with
    the catalog's reason when it gives one (data/gpus.toml `no_price`): ownership is never priced as rental."""
    have = {d.option for d in deps}
    what = {"managed": "no managed price (no monthly dedicated-server offer)", "cloud": "no cloud GPU-hour price"}
    out = []
    for o in options:
        if o in have:
            continue
        if o == "on-prem":
            out.append(f"on-prem: no purchase price for {gpu_id} in the catalog"
                       + (f" ({no_price})" if no_price else "") + "; buying is not priced, and not replaced by "
                       "rental (add your quote with --catalog)")
        elif o == "cloud" and shape:
            out.append(shape)
        elif o == "cloud" and asked:
            out.append(f"cloud: no cloud GPU-hour price for {gpu_id} in the price groups deployment.price_groups asks "
                       f"for ({asked}); widen them or add one with --prices")
        else:
            out.append(f"{o}: {what[o]} for {gpu_id} in the price lists (add one with --prices)")
    return out


__all__ = ["OVERRIDES", "Pricing", "cost_assumptions", "deploy", "groups_asked", "median_rent", "pricing",
           "quotes_by_gpu", "with_deployments"]
