"""data/clusters.toml: the providers' multi-node cluster offers, each sourced and dated, naming GPUs the catalog
knows and price rows that exist (an offer no price row matches prices nothing); a user's `cluster` row joins them."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplan.catalog.hardware import builtin_catalog
from gpuplan.catalog.prices import load_prices
from gpuplan.core.cost.clusters import cluster_gap, clustered, needs_cluster, rent_rate
from gpuplan.errors import CatalogError

BOOK = load_prices()


def cluster_rented() -> set[str]:
    """The GPUs a configuration of 8-GPU servers on one fabric is rented at (core/cost/clusters.rent_rate)."""
    gpus = {p.gpu_id for p in BOOK.cloud}
    return {g for g in gpus
            if rent_rate([p for p in BOOK.cloud if p.gpu_id == g], BOOK.clusters, 8, True) is not None}


def test_every_offer_is_sourced_and_names_known_gpus_and_priced_providers() -> None:
    gpus = builtin_catalog().gpus.rows
    assert len(BOOK.clusters) >= 10
    for offer in BOOK.clusters:
        assert len(offer.source) > 40 and offer.as_of.year >= 2024, offer.provider
        assert set(offer.gpu_ids) <= set(gpus), offer.provider
        # its price-list names match rows of the price list (a misspelt name would silently price nothing)
        assert any(p.provider.startswith(tuple(offer.price_providers)) for p in BOOK.cloud), offer.provider
    # and the offers price clusters of the GPUs teams train across servers on
    assert {"h100-sxm-80gb", "h200-sxm-141gb", "b200-180gb", "a100-sxm-80gb"} <= cluster_rented()


def test_a_marketplace_pod_is_not_a_cluster() -> None:
    """RunPod's Instant Clusters take B200, H200, H100 and A100 (its docs, 2026-08-20), not A40: a 64-server A40
    rental is not priced; AWS, Azure and the other clouds rent H100 clusters."""
    a40 = [p for p in BOOK.cloud if p.gpu_id == "a40-48gb"]
    assert a40 and not clustered(a40, BOOK.clusters)
    gap = cluster_gap("a40-48gb", 64, 8, a40, BOOK.clusters)
    assert gap is not None and "RunPod" in gap and "multi-node cluster" in gap
    h100 = [p for p in BOOK.cloud if p.gpu_id == "h100-sxm-80gb"]
    providers = {p.provider.split()[0] for p in clustered(h100, BOOK.clusters)}
    assert {"AWS", "Azure"} <= providers and "Vast.ai" not in providers and "Akash" not in providers
    assert "a40-48gb" not in cluster_rented()
    assert cluster_gap("h100-sxm-80gb", 8, 8, h100, BOOK.clusters) is None


@pytest.mark.parametrize(("servers", "per_server", "training", "mp", "needs"), [
    (1, 8, True, 1, False), (2, 8, True, 1, True), (4, 8, False, 4, False), (2, 8, False, 16, True)])
def test_what_needs_a_fabric(servers: int, per_server: int, training: bool, mp: int, needs: bool) -> None:
    assert needs_cluster(servers, per_server, training, mp) is needs


def test_a_users_cluster_row_joins_the_offers(tmp_path: Path) -> None:
    f = tmp_path / "quotes.yaml"
    f.write_text("cluster:\n  - provider: Our GPU host\n    price_providers: [RunPod]\n    gpu_ids: [a40-48gb]\n"
                 "    fabric: RoCE 200 Gb/s\n    source: our quote 2026-11\n    as_of: 2026-11-20\n")
    book = load_prices([f], gpu_ids=list(builtin_catalog().gpus.rows))
    assert clustered([p for p in book.cloud if p.gpu_id == "a40-48gb"], book.clusters)
    f.write_text("cluster:\n  - provider: Our GPU host\n    price_providers: [RunPod]\n    gpu_ids: [a40-48]\n"
                 "    fabric: RoCE\n    source: our quote\n    as_of: 2026-11-20\n")
    with pytest.raises(CatalogError, match="did you mean 'a40-48gb'"):
        load_prices([f], gpu_ids=list(builtin_catalog().gpus.rows))


def test_a_pretraining_across_servers_rents_from_cluster_providers_only() -> None:
    """llama2-7b-pretrain on 8 servers: its cloud options name only providers with a cluster offer for the GPU;
    forced onto A40s, which no provider rents as a cluster, the cloud is not priced and the plan says why (it
    recommended 512 RunPod A40 pods for 97,384 USD before)."""
    from gpuplan import api
    from gpuplan.catalog.loader import example_path

    result = api.plan(example_path("llama2-7b-pretrain"))
    rec = result.recommendation
    assert rec is not None and rec.servers > 1
    for d in rec.deployments:
        if d.option == "cloud":
            assert all(any(o.covers(rec.gpu_id, name) for o in BOOK.clusters) for name in d.providers), d.providers
            assert any("on one fabric" in a for a in d.assumptions)
    import yaml

    flat = yaml.safe_load(example_path("llama2-7b-pretrain").read_text())
    flat.pop("hardware", None)
    flat["constraints"] = {"gpus": ["a40-48gb"]}
    flat["goals"]["budget"] = {"amount": 20_000_000, "currency": "USD"}
    a40 = api.plan(flat).recommendation
    assert a40 is not None and a40.servers > 1
    assert not [d for d in a40.deployments if d.option == "cloud"]
    assert a40.deployment is not None and any("multi-node cluster" in g for g in a40.deployment.gaps)


@pytest.mark.parametrize("name", ["llama2-7b-pretrain", "llama3-70b-lora", "llama3-8b-dpo", "vit-imagenet"])
def test_the_search_ranks_on_the_rate_the_deployments_price(name: str) -> None:
    """The rental a candidate is ranked on is the on-demand rate its deployments price: quotes for instances that
    hold its GPUs (instance_gpus), from cluster providers across servers. The search ranked on the median of every
    quote (1-GPU instances and marketplace pods included) while the deployments left them out."""
    from gpuplan import api
    from gpuplan.catalog.loader import example_path

    result = api.plan(example_path(name), top=12)
    checked = 0
    for c in result.candidates:
        od = next((d for d in c.deployments if d.provider == "cloud on-demand"), None)
        if od is None or c.rent is None or c.time is None or not c.time.gpu_hours:
            continue
        assert c.rent / c.time.gpu_hours == pytest.approx(od.price_per_gpu_hour, rel=1e-9), (c.gpu_id, c.servers)
        checked += 1
    assert checked >= 3


def test_a_cluster_larger_than_every_offer_is_not_rented() -> None:
    """Issue 28: a provider rents clusters up to the size it states (`max_gpus`; RunPod's Instant Clusters up to
    512 GPUs, Verda's 128, their docs): a configuration larger than every offer for its GPU is not rented as a
    cluster, in the search's rate (rent_rate) and the deployments' quotes (clustered) alike, and the gap names each
    provider's largest."""
    from gpuplan.schema.prices import ClusterOffer

    h200 = [p for p in BOOK.cloud if p.gpu_id == "h200-sxm-141gb" and p.provider.startswith(("Nebius", "RunPod"))]
    assert {p.provider.split()[0] for p in h200} == {"Nebius", "RunPod"}
    offers = [ClusterOffer(provider="Nebius", price_providers=["Nebius"], gpu_ids=["h200-sxm-141gb"], fabric="IB",
                           max_gpus=128, source="test", as_of="2026-12-01"),
              ClusterOffer(provider="RunPod", price_providers=["RunPod"], gpu_ids=["h200-sxm-141gb"], fabric="IB",
                           max_gpus=64, source="test", as_of="2026-12-01")]
    both, nebius = rent_rate(h200, offers, 8, 64), rent_rate(h200, offers, 8, 128)
    assert both is not None and nebius is not None and both != nebius  # at 128 GPUs RunPod's quotes drop out
    assert {p.provider.split()[0] for p in clustered(h200, offers, 128)} == {"Nebius"}
    assert rent_rate(h200, offers, 8, 136) is None and not clustered(h200, offers, 136)
    assert rent_rate(h200, offers, 8, 0) is not None  # replicas on separate servers need no cluster
    gap = cluster_gap("h200-sxm-141gb", 17, 8, h200, offers)
    assert gap is not None and "136 GPUs are more than any provider" in gap and "Nebius: 128, RunPod: 64" in gap
    assert cluster_gap("h200-sxm-141gb", 16, 8, h200, offers) is None
    # an offer of unstated size (0) is not limited: no figure, no claim
    unstated = [offers[0].model_copy(update={"max_gpus": 0})]
    assert rent_rate(h200, unstated, 8, 10_000) is not None


def test_every_stated_cluster_size_is_enforced_in_a_plan() -> None:
    """A plan's deployments and its search's ranking read the same limit: llama2-7b-pretrain's 64 x H100 SXM,
    priced against offers that stop at 32 GPUs, has no cloud option and says why."""
    from gpuplan import api
    from gpuplan.catalog.loader import example_path, load_project
    from gpuplan.core.cost.deployments import deploy, pricing

    result = api.plan(example_path("llama2-7b-pretrain"))
    rec = result.recommendation
    assert rec is not None and rec.servers * rec.gpus_per_server > 32
    small = tuple(o.model_copy(update={"max_gpus": 32}) for o in BOOK.clusters if rec.gpu_id in o.gpu_ids)
    book = BOOK.model_copy(update={"clusters": list(small)})
    project = load_project(example_path("llama2-7b-pretrain"))[0]
    got = deploy(pricing(project, book, "USD", result.as_of), rec)
    assert not [d for d in got.deployments if d.option == "cloud"]
    assert got.deployment is not None and any("more than any provider" in g for g in got.deployment.gaps)


def test_every_provider_of_the_price_list_was_searched_for_clusters() -> None:
    """Issue 28: no provider's row says 'not searched' (Civo, Qubrid, OVHcloud, Oblivus and openrelay were searched
    on 2026-12-03: none states a multi-node RDMA offer for a named GPU); the hyperscalers' B200 RDMA fabrics (GCP A4
    on RoCE, OCI BM.GPU.B200.8) are recorded."""
    for offer in BOOK.clusters:
        assert "not searched" not in (offer.fabric + offer.source).lower(), offer.provider
    by = {o.provider: o for o in BOOK.clusters}
    assert {"Civo", "Qubrid", "OVHcloud", "Oblivus", "openrelay"} <= set(by)
    assert "b200-180gb" in by["GCP"].gpu_ids and "b200-180gb" in by["Oracle Cloud"].gpu_ids
    oci = [p for p in BOOK.cloud if p.gpu_id == "b200-180gb" and p.provider.startswith("Oracle")]
    assert oci and clustered(oci, BOOK.clusters, 64) == oci
