"""Read a SkyPilot catalog `vms.csv` (github.com/skypilot-org/skypilot-catalog, catalogs/v*/<cloud>/vms.csv) as
`--prices FILE` cloud rows.

Each GPU instance type becomes an on-demand row (Price / AcceleratorCount, USD per GPU-hour) and, where SpotPrice
is set, a spot row. A vms.csv has one line per instance type and region (or zone); the row gpuplan keeps is the
median over those lines, and its notes give the range and the number of regions. AcceleratorName maps to a gpuplan
GPU id through ACCELERATORS (plus per-cloud exceptions in CLOUD_ACCELERATORS); accelerators gpuplan does not
catalog (K80, TPUs, Inferentia...) are skipped, and any other name is an error with a did-you-mean. The cloud is
the file's folder (catalogs/v7/aws/vms.csv: aws), else the file name (aws.csv, aws-vms.csv), else a `Cloud`
column. `as_of` is an `as_of` (or `Date`) column when the file has one, else the file's modification date.
"""

from __future__ import annotations

import csv
import datetime
import io
import math
import re
import statistics
from collections import defaultdict
from pathlib import Path

from gpuplan.errors import CatalogError, clip, suggest
from gpuplan.schema.prices import CloudPrice

#: columns every SkyPilot vms.csv has (v5-v8); the others (vCPUs, MemoryGiB, GpuInfo, SpotPrice, Region,
#: AvailabilityZone) vary by cloud and version
REQUIRED = ("InstanceType", "AcceleratorName", "AcceleratorCount", "Price")

#: SkyPilot AcceleratorName (case-insensitive) -> gpuplan GPU id
ACCELERATORS: dict[str, str] = {
    "A100": "a100-sxm-40gb",  # AWS p4d, GCP a2-highgpu, Azure ND A100 v4: SXM4 40 GB
    "A100-40GB": "a100-sxm-40gb",
    "A100-80GB": "a100-sxm-80gb",  # AWS p4de, GCP a2-ultragpu, Azure ND A100 v4 80GB, Lambda 8x: SXM4
    "A100-80GB-SXM": "a100-sxm-80gb",
    "A100-80GB-PCIE": "a100-pcie-80gb",
    "A100-40GB-PCIE": "a100-pcie-40gb",
    "H100": "h100-sxm-80gb",  # AWS p5, GCP a3-highgpu, Azure ND H100 v5, Lambda: SXM5
    "H100-SXM": "h100-sxm-80gb",
    "H100-MEGA": "h100-sxm-80gb",  # GCP a3-megagpu: the same SXM5 GPU with more network
    "H100-PCIE": "h100-pcie-80gb",
    "H100-NVL": "h100-nvl-94gb",
    "H200": "h200-sxm-141gb",
    "H200-SXM": "h200-sxm-141gb",
    "H200-NVL": "h200-nvl-141gb",
    "B200": "b200-180gb",
    "GB200": "gb200-186gb",
    "B300": "b300-288gb",  # HGX B300 (Blackwell Ultra)
    "GB300": "gb300-288gb",
    "GH200": "gh200-96gb",  # Lambda's 1x GH200: the 96 GB HBM3 superchip
    "H20": "h20-96gb",
    "L20": "l20-48gb",
    "L4": "l4-24gb",
    "L40": "l40-48gb",
    "L40S": "l40s-48gb",
    "A10": "a10-24gb",
    "A10G": "a10g-24gb",
    "A30": "a30-24gb",
    "A40": "a40-48gb",
    "T4": "t4-16gb",
    "V100": "v100-sxm2-16gb",
    "V100-32GB": "v100-sxm2-32gb",
    "V100-PCIE-32GB": "v100-pcie-32gb",
    "A6000": "rtx-a6000-48gb",
    "RTXA6000": "rtx-a6000-48gb",
    "RTX6000-ADA": "rtx-6000-ada-48gb",
    "RTX6000ADA": "rtx-6000-ada-48gb",
    "RTX3090": "rtx-3090-24gb",
    "RTX4090": "rtx-4090-24gb",
    "RTX5090": "rtx-5090-32gb",
    "RTXPRO6000": "rtx-pro-6000-server-96gb",
    "RTX-PRO-6000": "rtx-pro-6000-server-96gb",
    "RTXPRO6000-WS": "rtx-pro-6000-ws-96gb",
    "RTX-PRO-6000-WS": "rtx-pro-6000-ws-96gb",
    "RTXPRO6000-MAXQ": "rtx-pro-6000-maxq-96gb",
    "RTX-PRO-6000-MAXQ": "rtx-pro-6000-maxq-96gb",
    "MI250X": "mi250x-128gb",
    "MI300X": "mi300x-192gb",
    "MI325X": "mi325x-256gb",
    "MI350X": "mi350x-288gb",
    "MI355X": "mi355x-288gb",
    "GAUDI2": "gaudi2-96gb",
    "GAUDI3": "gaudi3-128gb",
}

#: names that differ by cloud: RunPod suffixes its SXM parts, so its plain names are the PCIe cards
CLOUD_ACCELERATORS: dict[str, dict[str, str]] = {
    "runpod": {"A100-80GB": "a100-pcie-80gb", "H100": "h100-pcie-80gb"},
}

#: SkyPilot accelerators gpuplan has no catalog row for: skipped, not an error
NOT_IN_CATALOG = re.compile(
    r"^(K80|K520|M60|M4|P4|P40|P100|T4G|RADEON.*|INFERENTIA.*|TRAINIUM.*|TPU.*|GAUDI HL-205|A16|A2|"
    r"RTX.*4000.*|RTX.*2000.*|RTX.*5000.*|A4000|A4500|A5000|RTX3070|RTX3080.*|RTX4070.*|RTX4080.*|L40-.*|"
    r"MI210|MI250)$", re.IGNORECASE)

_DISPLAY = {"aws": "AWS", "gcp": "GCP", "azure": "Azure", "oci": "Oracle Cloud", "lambda": "Lambda",
            "runpod": "RunPod", "ibm": "IBM Cloud", "do": "DigitalOcean", "vast": "Vast.ai",
            "fluidstack": "Fluidstack", "paperspace": "Paperspace", "cudo": "Cudo", "nebius": "Nebius",
            "hyperbolic": "Hyperbolic", "vsphere": "vSphere", "scp": "Samsung Cloud", "kubernetes": "Kubernetes"}
_TIER = {"aws": "hyperscaler", "gcp": "hyperscaler", "azure": "hyperscaler", "oci": "hyperscaler",
         "vast": "marketplace"}


def modified(path: Path) -> datetime.date:
    """The file's modification date: the `as_of` of a vms.csv without an as_of column."""
    return datetime.date.fromtimestamp(path.stat().st_mtime)


def is_skypilot_header(fieldnames: list[str] | None) -> bool:
    """A CSV header that is a SkyPilot vms.csv (and not gpuplan's own `table` CSV)."""
    names = {f.strip() for f in fieldnames or [] if f}
    return "table" not in names and all(c in names for c in REQUIRED)


def looks_like(text: str) -> bool:
    """The CSV text starts with a SkyPilot vms.csv header (False for text that is not CSV at all)."""
    try:
        return is_skypilot_header(next(csv.reader(io.StringIO(text[:65536])), None))
    except csv.Error:
        return False


def cloud_of(path: Path, rows: list[dict[str, str]]) -> str:
    """The cloud a vms.csv lists: its folder, else its file name, else a `Cloud` column."""
    folder = path.parent.name.lower()
    if folder in _DISPLAY:
        return folder
    stem = path.stem.lower().removesuffix("-vms").removesuffix("_vms")
    if stem in _DISPLAY:
        return stem
    column = {(r.get("Cloud") or "").strip().lower() for r in rows} - {""}
    if len(column) == 1:
        return column.pop()
    if stem != "vms":
        return stem
    raise CatalogError(str(path), "cannot tell which cloud this SkyPilot vms.csv lists: put it in a folder named "
                       "after the cloud (aws/vms.csv), name it after the cloud (aws.csv) or add a Cloud column")


def gpu_id(name: str, cloud: str, path: str, line: int) -> str | None:
    """The gpuplan GPU id of a SkyPilot AcceleratorName; None for an accelerator gpuplan does not catalog."""
    key = name.strip().upper()
    hit = {k.upper(): v for k, v in CLOUD_ACCELERATORS.get(cloud, {}).items()}.get(key)
    hit = hit or ACCELERATORS.get(key)
    if hit or NOT_IN_CATALOG.match(key):
        return hit
    hint = suggest(key, ACCELERATORS)
    raise CatalogError(path, f"unknown SkyPilot AcceleratorName {clip(name, 60)}"
                       + (f"; did you mean {hint[0]!r}?" if hint else "")
                       + " (known: gpuplan.catalog.skypilot.ACCELERATORS)", row=line, field="AcceleratorName")


def _number(value: str | None, path: str, line: int, field: str) -> float | None:
    if value is None or not value.strip():
        return None
    try:
        x = float(value)
    except ValueError:
        raise CatalogError(path, f"not a number: {clip(value, 40)}", row=line, field=field) from None
    if not math.isfinite(x) or x < 0:
        raise CatalogError(path, f"must be a finite number >= 0, got {clip(value, 40)}", row=line, field=field)
    return x


def _as_of(row: dict[str, str], default: datetime.date, path: str, line: int) -> datetime.date:
    for col in ("as_of", "Date"):
        if (row.get(col) or "").strip():
            try:
                return datetime.date.fromisoformat(row[col].strip()[:10])
            except ValueError:
                raise CatalogError(path, f"not an ISO date: {clip(row[col], 40)}", row=line, field=col) from None
    return default


def parse(text: str, path: Path, modified: datetime.date) -> list[CloudPrice]:
    """The cloud rows of a SkyPilot vms.csv: one on-demand and (where priced) one spot row per GPU instance type,
    each the median over the file's regions. `modified`: the file's modification date (the default `as_of`)."""
    name = str(path)
    try:
        reader = csv.DictReader(io.StringIO(text))
        rows = list(reader)
    except csv.Error as exc:
        raise CatalogError(name, f"not valid CSV: {clip(str(exc))}", row=reader.line_num or None) from None
    for line, row in enumerate(rows, start=2):
        if None in row:
            raise CatalogError(name, f"{len(row[None])} more cell(s) than the header has columns", row=line)
    cloud = cloud_of(path, rows)
    prices: dict[tuple[str, str, str, datetime.date], list[tuple[float, str]]] = defaultdict(list)
    counts: dict[str, int] = {}  # GPUs per instance type (AcceleratorCount): the quote's instance shape
    for line, row in enumerate(rows, start=2):  # line 1 is the header
        accel = (row.get("AcceleratorName") or "").strip()
        count = _number(row.get("AcceleratorCount"), name, line, "AcceleratorCount")
        if not accel or not count:
            continue  # a CPU-only instance type
        gid = gpu_id(accel, cloud, name, line)
        if gid is None or count < 1:
            continue  # not a catalog GPU, or a fraction of one (a shared slice is not a GPU-hour)
        as_of = _as_of(row, modified, name, line)
        region = (row.get("Region") or row.get("AvailabilityZone") or "").strip()
        itype = (row.get("InstanceType") or "").strip() or accel
        counts[itype] = max(counts.get(itype, 0), int(count))
        for kind, col in (("on-demand", "Price"), ("spot", "SpotPrice")):
            price = _number(row.get(col), name, line, col)
            if price:
                prices[(gid, itype, kind, as_of)].append((price / count, region))
    return [_row(cloud, name, key, found, counts.get(key[1])) for key, found in sorted(prices.items())]


def _row(cloud: str, path: str, key: tuple[str, str, str, datetime.date],
         found: list[tuple[float, str]], instance_gpus: int | None = None) -> CloudPrice:
    gid, itype, kind, as_of = key
    per_gpu = [p for p, _ in found]
    median = round(statistics.median(per_gpu), 4)
    regions = sorted({r for _, r in found if r})
    spread = f"; {min(per_gpu):g}-{max(per_gpu):g} across them" if len(set(per_gpu)) > 1 else ""
    plural = "s" if len(found) > 1 else ""
    try:
        return CloudPrice(
            gpu_id=gid, provider=f"{_DISPLAY.get(cloud, cloud)} {itype}", kind=kind, price_per_gpu_hour=median,
            currency="USD", tier=_TIER.get(cloud, "specialist"),
            source=f"SkyPilot catalog {Path(path).name} ({cloud}), {kind} price per instance-hour / AcceleratorCount",
            as_of=as_of, instance_gpus=instance_gpus or None,
            notes=f"median over {len(found)} SkyPilot row{plural} ({len(regions)} regions or zones){spread}")
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise CatalogError(path, f"{itype}: {exc.errors()[0]['msg'] if hasattr(exc, 'errors') else exc}",
                           row=itype, field="Price") from None


__all__ = ["ACCELERATORS", "CLOUD_ACCELERATORS", "is_skypilot_header", "looks_like", "modified", "parse"]
