"""How well each GPU's numbers are known, for the ranking: the speed model is calibrated on published runs of some
GPU generations and only extrapolated (a prior) for others; prices come from a number of quotes of some kinds and
ages. A candidate resting on one stale quote or on an extrapolated speed is not adequate evidence for a purchase:
the search recommends it only when no adequate candidate qualifies. Pure: `today` is passed in."""

from __future__ import annotations

import datetime
from collections.abc import Iterable

from gpuplan.schema.hardware import Gpu
from gpuplan.schema.plan import Evidence
from gpuplan.schema.prices import CloudPrice, HostingOffer, PriceBook
from gpuplan.schema.speed import SpeedModel

#: a quote older than this many days is stale (the report flags it, the evidence discounts it)
STALE_DAYS = 183


def is_stale(as_of: datetime.date, today: datetime.date) -> bool:
    return (today - as_of).days > STALE_DAYS


def evidence_by_gpu(gpus: Iterable[Gpu], speed: SpeedModel, book: PriceBook,
                    today: datetime.date) -> dict[str, Evidence]:
    """`gpu_evidence` of every GPU, the price lists read once."""
    cloud: dict[str, list[CloudPrice]] = {}
    hosting: dict[str, list[HostingOffer]] = {}
    for p in book.cloud:
        cloud.setdefault(p.gpu_id, []).append(p)
    for h in book.hosting:
        hosting.setdefault(h.gpu_id, []).append(h)
    return {g.id: gpu_evidence(g, speed, cloud.get(g.id, []), hosting.get(g.id, []), today) for g in gpus}


def gpu_evidence(gpu: Gpu, speed: SpeedModel, cloud: list[CloudPrice], hosting: list[HostingOffer],
                 today: datetime.date) -> Evidence:
    """The evidence behind a candidate on `gpu`: its speed basis and its quotes (`cloud`, `hosting`: the price rows
    for this GPU)."""
    gen = speed.generations[gpu.generation]
    calibrated = gen.basis != "prior"
    quotes: dict[str, int] = {}
    dates: list[datetime.date] = []
    providers: set[str] = set()
    fresh = 0
    for p in cloud:
        quotes[f"cloud {p.kind}"] = quotes.get(f"cloud {p.kind}", 0) + 1
        dates.append(p.as_of)
        providers.add(p.provider)
        fresh += not is_stale(p.as_of, today)
    for h in hosting:
        quotes["managed"] = quotes.get("managed", 0) + 1
        dates.append(h.as_of)
        providers.add(h.provider)
        fresh += not is_stale(h.as_of, today)
    if gpu.price is not None:
        quotes["purchase"] = 1
    if fresh:
        price = "quoted"
    elif len(providers) >= 2 or gpu.price is not None:
        price = "dated"
    else:
        price = "thin"
    measured = gpu.measured_here is not None
    calibrated = calibrated or measured  # the user's own measurement calibrates this GPU
    reasons = [f"speed measured here: {gpu.measured_here}" if measured else
               f"speed {'calibrated on published runs of' if calibrated else 'extrapolated (a prior) for'} "
               f"{gen.id} GPUs"]
    if dates:
        reasons.append(f"{sum(v for k, v in quotes.items() if k != 'purchase')} price quote(s) from "
                       f"{len(providers)} provider(s), {fresh} younger than {STALE_DAYS // 30} months, newest "
                       f"{max(dates)}")
    else:
        reasons.append("no cloud or managed-hosting quote in the price lists")
    if gpu.price is not None:
        reasons.append(f"purchase price {gpu.price.kind} ({gpu.price.as_of})")
    adequate = calibrated and price != "thin"
    if not adequate:
        reasons.append("not adequate evidence for a purchase: "
                       + " and ".join(w for w, bad in (("the speed is extrapolated", not calibrated),
                                                       ("the price rests on one old quote or none", price == "thin"))
                                      if bad))
    return Evidence(speed="measured" if measured else "calibrated" if calibrated else "extrapolated", price=price,
                    quotes=quotes, providers=len(providers), newest_quote=max(dates) if dates else None,
                    adequate=adequate, reasons=reasons)


__all__ = ["STALE_DAYS", "evidence_by_gpu", "gpu_evidence", "is_stale"]
