"""Which cloud quotes can rent a configuration that spans servers (issue #28's price groups, and the buyer's
question behind them: can this be rented at all?). A training run across servers, or a serving replica spanning
them, needs the servers on an RDMA fabric (InfiniBand, RoCE, EFA): rented, that is a provider's multi-node cluster
offer (data/clusters.toml), not the same provider's single pods or a marketplace's, and no larger than the largest
cluster that provider states it rents (`max_gpus`). Replicas that each fit a server need no fabric between servers.
Pure."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from gpuplan.schema.prices import CloudPrice, ClusterOffer


def needs_cluster(servers: int, gpus_per_server: int, training: bool, model_parallel: int = 1) -> bool:
    """Whether a configuration of `servers` servers needs them on one fabric: training on more than one, or a
    serving replica (tp x pp = `model_parallel` GPUs) larger than a server."""
    return servers > 1 and (training or model_parallel > gpus_per_server)


def clustered(rows: Sequence[CloudPrice], clusters: Sequence[ClusterOffer], gpus: int = 0) -> list[CloudPrice]:
    """The quotes whose provider offers their GPU as a multi-node cluster of `gpus` GPUs (0: of any size)."""
    offers: dict[str, list[ClusterOffer]] = {}  # by GPU id: the offers that name it (each quote asks those alone)
    out = []
    for p in rows:
        mine = offers.get(p.gpu_id)
        if mine is None:
            mine = offers[p.gpu_id] = [c for c in clusters if p.gpu_id in c.gpu_ids]
        if any(c.covers(p.gpu_id, p.provider, gpus) for c in mine):
            out.append(p)
    return out


def rent_rate(rows: Sequence[CloudPrice], clusters: Sequence[ClusterOffer], together: int,
              fabric: int) -> float | None:
    """The median on-demand price per GPU-hour a configuration rents at, as its deployments price it
    (core/cost/tco.py): the quotes for instances that hold the `together` GPUs sharing a machine (or of unstated
    size), and when `fabric` GPUs (0: none) share one fabric across servers, from providers renting the GPU as a
    cluster that large; None without one."""
    got = [p.price_per_gpu_hour for p in (clustered(rows, clusters, int(fabric)) if fabric else rows)
           if p.kind == "on-demand" and (p.instance_gpus is None or p.instance_gpus >= together)]
    return statistics.median(got) if got else None


def cluster_gap(gpu_id: str, servers: int, gpus_per_server: int, rows: Sequence[CloudPrice],
                clusters: Sequence[ClusterOffer]) -> str | None:
    """Why the cloud does not price a configuration across servers, when it does not: the providers quoted for the
    GPU and that none rents it as a cluster, or none as one that large (each one's largest named, "provider: GPUs").
    None when one does, or when no quote exists at all (said elsewhere)."""
    gpus = servers * gpus_per_server
    if not rows or clustered(rows, clusters, gpus):
        return None
    what = f"cloud: {servers} servers of {gpus_per_server} x {gpu_id} on one fabric are not priced: "
    some = clustered(rows, clusters)
    if some:  # rented as clusters, only smaller ones
        sizes = sorted({(c.max_gpus, c.provider) for c in clusters for p in some
                        if c.covers(p.gpu_id, p.provider)}, reverse=True)
        return (what + f"{gpus} GPUs are more than any provider quoted rents {gpu_id} as one cluster ("
                + ", ".join(f"{name}: {n:,}" for n, name in sizes) + "; data/clusters.toml `max_gpus`); "
                "fewer GPUs, or your provider's larger offer as a `cluster` row with --prices")
    names = sorted({p.provider for p in rows})
    return (what + f"none of the providers quoted ({', '.join(names[:4])}{', ...' if len(names) > 4 else ''}) "
            f"rents {gpu_id} as a multi-node cluster (data/clusters.toml; add your provider's offer as a `cluster` "
            "row with --prices)")


__all__ = ["cluster_gap", "clustered", "needs_cluster", "rent_rate"]
