"""Estimate vs measurements on a real GPU: the JSON files scripts/device_calibration.py writes
(benchmarks/device/*.json) against gpuplan's estimate of the same projects (benchmarks/device_cases.yaml).

For each case: measured and estimated tensor peak (torch.cuda.max_memory_allocated), weights + optimizer
states (allocated after a step), allocator reserve (max_memory_reserved), device total (NVML used at the peak
minus the idle GPU), step time and tokens/s (training) or time to first token, prefill and decoding speed
(inference), each with its signed error (estimate - measured) / measured. Then the median absolute errors,
and the CUDA context measured against data/overheads.toml.

A --smoke file (CPU, 2-layer models) is estimated for the shrunk config and shapes it ran; it has no memory
numbers and its times are a CPU's: it checks the plumbing, never the model.

Run: python benchmarks/device_accuracy.py [FILE.json ...] [--gpu ID] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpuplan.api import estimate
from gpuplan.catalog.loader import load_overheads
from gpuplan.catalog.serving import load_serving
from gpuplan.units import GIB

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CASES = HERE / "device_cases.yaml"
#: the catalog row of a device name (torch.cuda.get_device_properties().name); longest match wins
GPU_OF = {"H200 NVL": "h200-nvl-141gb", "H200": "h200-sxm-141gb", "H100 80GB HBM3": "h100-sxm-80gb",
          "H100 NVL": "h100-nvl-94gb", "H100 PCIe": "h100-pcie-80gb", "A100-SXM4-80GB": "a100-sxm-80gb"}


@dataclass
class Row:
    metric: str
    unit: str  # "GiB", "s", "tok/s", "" (a count)
    measured: float | None
    estimate: float | None

    @property
    def error(self) -> float | None:
        if self.measured in (None, 0) or self.estimate is None:
            return None
        return (self.estimate - self.measured) / self.measured


@dataclass
class CaseReport:
    id: str
    status: str
    note: str = ""
    rows: list[Row] = field(default_factory=list)

    def row(self, metric: str) -> Row | None:
        return next((r for r in self.rows if r.metric == metric), None)


@dataclass
class FileReport:
    path: str
    mode: str
    gpu: str
    device: str
    cases: list[CaseReport]
    context: list[Row]


def _get(d: dict, *keys: str) -> Any:
    for k in keys:
        d = d.get(k) if isinstance(d, dict) else None
    return d


def _gib(v: Any) -> float | None:
    return None if v is None else v / GIB


def gpu_for(doc: dict, override: str | None) -> str:
    if override:
        return override
    name = _get(doc, "environment", "gpu_name") or ""
    hits = [k for k in GPU_OF if k in name]
    return GPU_OF[max(hits, key=len)] if hits else doc.get("gpu_catalog_id") or "h200-sxm-141gb"


def as_run(project: dict) -> dict:
    """A recorded project, with what the script always did and early runs did not write down: it trains on
    the plain eager stack (workload.stack: eager), and transformers' generate() prefills the whole batch's prompts
    in one forward (workload.prefill_tokens: batch x context; a serving engine's default, which the estimate
    takes otherwise, prefills in chunks of its token budget)."""
    project = json.loads(json.dumps(project))
    w = project["workload"]
    if w["task"] != "inference":
        w.setdefault("stack", "eager")
    elif w.get("batch_size") and w.get("context_length"):
        w.setdefault("prefill_tokens", w["batch_size"] * w["context_length"])
    return project


def project_of(entry: dict, smoke: bool, tmp: Path) -> dict:
    """The project that was measured: as recorded; a smoke run's shrunk config and shapes."""
    project = as_run(entry["project"])
    if smoke:
        cfg = tmp / f"{entry['id']}.json"
        cfg.write_text(json.dumps(entry["config_run"]))
        project["model"] = {"hf_config": str(cfg)}
        project["workload"] = {k: v for k, v in entry["workload_run"].items()}
    return project


def case_rows(entry: dict, est: Any, baseline: int | None) -> list[Row]:
    m, t = entry.get("memory", {}), entry.get("timing", {})
    em = est.memory

    def device(nvml: int | None) -> float | None:
        return _gib(nvml - baseline) if nvml is not None and baseline is not None else None

    lora = entry["project"]["workload"]["task"] in ("lora", "qlora")
    # the model as built: a LoRA model's parameters include its adapters
    rows = [Row("parameters", "", _get(entry, "model", "parameters"),
                est.model.parameters + (est.model.trainable_parameters if lora else 0))]
    if est.time is not None or "step_seconds_median" in t:
        rows += [
            Row("trainable parameters", "", _get(entry, "model", "trainable_parameters"),
                est.model.trainable_parameters),
            Row("tensor peak", "GiB", _gib(m.get("peak_allocated_bytes")), _gib(em.peak_tensor_bytes)),
            Row("weights + optimizer states", "GiB", _gib(m.get("after_step_allocated_bytes")),
                _gib(em.weights_bytes + em.optimizer_bytes)),
            Row("reserved", "GiB", _gib(m.get("peak_reserved_bytes")), _gib(em.reserved_bytes)),
            Row("device (NVML)", "GiB", device(m.get("nvml_used_peak_bytes")), _gib(em.device_bytes)),
            Row("step time", "s", t.get("step_seconds_median"), est.time.step_seconds if est.time else None),
            Row("tokens/s", "tok/s", t.get("tokens_per_s"), est.time.tokens_per_s_per_gpu if est.time else None),
        ]
    else:
        inf = est.inference
        # the estimate is a serving engine's decoding; transformers' eager generate() is not that
        how = "" if t.get("decode") == "static-compiled" else " (eager generate)"
        # the estimate's KV cache holds prompt and output tokens in the engine's blocks; after prefill only the
        # prompt's tokens are there
        w = est.workload
        ctx, out = w.get("context_length"), w.get("output_tokens") or 256
        block = load_serving().engine.block_size_tokens
        kv_prefill = em.kv_cache_bytes * ctx / (math.ceil((ctx + out) / block) * block) if ctx else None
        rows += [
            Row("prefill tensor peak", "GiB", _gib(m.get("prefill_peak_allocated_bytes")), _gib(em.peak_tensor_bytes)),
            Row("KV cache after prefill", "GiB", _gib(m.get("kv_cache_prefill_bytes")), _gib(kv_prefill)),
            Row("decode tensor peak", "GiB", _gib(m.get("peak_allocated_bytes")), None),
            Row("prefill reserved", "GiB", _gib(m.get("prefill_peak_reserved_bytes")), _gib(em.reserved_bytes)),
            Row("prefill device (NVML)", "GiB", device(m.get("prefill_nvml_used_bytes")), _gib(em.device_bytes)),
            Row("time to first token" + how, "s", t.get("time_to_first_token_s"),
                inf.time_to_first_token_s if inf else None),
            Row("batch prefill", "s", t.get("batch_prefill_seconds_median"), inf.batch_prefill_s if inf else None),
            Row("decode tok/s per request" + how, "tok/s", t.get("decode_tokens_per_s_per_request"),
                inf.decode_tokens_per_s_per_request if inf else None),
            Row("decode tok/s aggregate" + how, "tok/s", t.get("aggregate_tokens_per_s"),
                inf.aggregate_tokens_per_s if inf else None),
        ]
    return rows


def context_rows(doc: dict) -> list[Row]:
    """The CUDA context and cuBLAS workspace measured, against data/overheads.toml; and the memory outside
    torch's reserve at each case's peak (context grown by lazily loaded kernels, NCCL-free)."""
    oh = load_overheads()
    ctx = doc.get("cuda_context", {})
    base = ctx.get("nvml_used_before_init_bytes")
    outside = []
    for c in doc.get("cases", []):
        m = c.get("memory", {})
        if (c.get("status") == "ok" and base is not None and m.get("nvml_used_peak_bytes")
                and m.get("peak_reserved_bytes")):
            outside.append(m["nvml_used_peak_bytes"] - base - m["peak_reserved_bytes"])
    return [
        Row("CUDA context (after init)", "GiB", _gib(ctx.get("context_bytes")), _gib(oh.cuda_context_bytes)),
        Row("CUDA context + cuBLAS (after a matmul)", "GiB", _gib(ctx.get("context_with_cublas_bytes")),
            _gib(oh.cuda_context_bytes)),
        Row("cuBLAS workspace (in torch's reserve)", "GiB", _gib(ctx.get("cublas_workspace_in_reserved_bytes")),
            _gib(oh.cublas_workspace_bytes)),
        Row("outside torch's reserve at the peak (median of cases)", "GiB",
            _gib(statistics.median(outside)) if outside else None,
            _gib(oh.cuda_context_bytes)),
    ]


def compare_file(path: Path, cases_path: Path = CASES, gpu: str | None = None) -> FileReport:
    doc = json.loads(Path(path).read_text())
    smoke = doc.get("mode") == "smoke"
    gpu_id = gpu_for(doc, gpu)
    current = {c["id"]: c["project"] for c in yaml.safe_load(cases_path.read_text())["cases"]}
    baseline = _get(doc, "cuda_context", "nvml_used_before_init_bytes")
    reports = []
    with tempfile.TemporaryDirectory() as tmp:
        for entry in doc.get("cases", []):
            rep = CaseReport(entry["id"], entry["status"])
            if entry["id"] not in current:
                rep.note = "not in the case file any more"
            elif current[entry["id"]] != as_run(entry["project"]):
                rep.note = "the case file changed since this run: estimated what was run"
            if entry["status"] != "ok":
                rep.note = (rep.note + "; " if rep.note else "") + str(entry.get("error"))
                m = _get(entry, "memory", "at_error") or {}
                proj = project_of(entry, smoke, Path(tmp)) if not smoke else None
                if proj is not None:  # an OOM is a measurement too: what did we say?
                    est = estimate(proj, gpu=gpu_id, base_dir=cases_path.parent)
                    rep.rows = [Row("tensor peak", "GiB", _gib(m.get("peak_allocated_bytes")),
                                    _gib(est.memory.peak_tensor_bytes)),
                                Row("device (NVML)", "GiB",
                                    _gib(m["nvml_used_bytes"] - baseline) if m.get("nvml_used_bytes") and baseline
                                    else None, _gib(est.memory.device_bytes))]
                reports.append(rep)
                continue
            est = estimate(project_of(entry, smoke, Path(tmp)), gpu=gpu_id, base_dir=cases_path.parent)
            rep.rows = case_rows(entry, est, baseline)
            reports.append(rep)
    env = doc.get("environment", {})
    device = env.get("gpu_name") or env.get("device", "?")
    return FileReport(str(path), doc.get("mode", "?"), gpu_id, device, reports, context_rows(doc))


SUMMARY = {"tensor peak": ("tensor peak", "prefill tensor peak"),
           "device (NVML)": ("device (NVML)", "prefill device (NVML)"),
           "training step time": ("step time",),
           "decode tok/s per request (compiled, static cache)": ("decode tok/s per request",),
           "decode tok/s per request (eager generate: not what the estimate models)":
               ("decode tok/s per request (eager generate)",),
           "time to first token (eager generate)": ("time to first token (eager generate)",),
           "time to first token (compiled, static cache)": ("time to first token",)}


def summary(rep: FileReport) -> list[tuple[str, int, float | None, float | None]]:
    """(what, cases, median |error|, worst signed error) over the cases measured."""
    out = []
    for name, metrics in SUMMARY.items():
        errs = [r.error for c in rep.cases if c.status == "ok" for r in c.rows
                if r.metric in metrics and r.error is not None]
        out.append((name, len(errs), statistics.median(abs(e) for e in errs) if errs else None,
                    max(errs, key=abs) if errs else None))
    return out


def _fmt(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    if unit == "GiB":
        return f"{v:.2f}"
    if unit == "s":
        return f"{v:.3f}" if v < 100 else f"{v:,.0f}"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _pct(e: float | None) -> str:
    return "-" if e is None else f"{100 * e:+.1f}%"


def render(rep: FileReport, markdown: bool = False) -> str:
    lines = []
    title = f"{rep.path}: {rep.device} vs {rep.gpu}"
    if rep.mode == "smoke":
        title += "  [SMOKE: CPU, 2-layer models; not a measurement]"
    header = ("case", "metric", "measured", "estimate", "error")
    table = []
    for c in rep.cases:
        if not c.rows:
            table.append((c.id, f"{c.status}: {c.note}", "", "", ""))
        for i, r in enumerate(c.rows):
            label = f"{r.metric} ({r.unit})" if r.unit else r.metric
            table.append((c.id if i == 0 else "", label, _fmt(r.measured, r.unit), _fmt(r.estimate, r.unit),
                          _pct(r.error)))
        if c.rows and c.note:
            table.append(("", f"note: {c.note}", "", "", ""))
    ctx = [("CUDA context", f"{r.metric} ({r.unit})", _fmt(r.measured, r.unit), _fmt(r.estimate, r.unit), _pct(r.error))
           for r in rep.context]
    summ = [(name, f"{n} cases", "-" if med is None else f"median |error| {100 * med:.1f}%",
             "" if worst is None else f"worst {_pct(worst)}", "") for name, n, med, worst in summary(rep)]
    if markdown:
        lines.append(f"**{title}**\n")
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        lines += ["| " + " | ".join(r) + " |" for r in table + ctx]
        lines.append("")
        lines += [f"- {a}: {b}, {c} {d}".rstrip() for a, b, c, d, _ in summ]
    else:
        lines.append(title)
        rows = [header, *table, *ctx]
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
        lines += [f"{a}: {b}, {c} {d}".rstrip() for a, b, c, d, _ in summ]
    return "\n".join(lines)


COMPACT = (("tensor peak", ("tensor peak", "prefill tensor peak")), ("reserved", ("reserved", "prefill reserved")),
           ("device (NVML)", ("device (NVML)", "prefill device (NVML)")), ("step time", ("step time",)))


def render_compact(rep: FileReport) -> str:
    """One Markdown row per case: measured GiB or s, and the estimate's signed error, for the levels that matter."""
    lines = [f"{rep.device} ({rep.gpu}), `{Path(rep.path).name}`:", "",
             "| case | " + " | ".join(name for name, _ in COMPACT) + " |", "|---|" + "---|" * len(COMPACT)]
    for c in rep.cases:
        cells = []
        for _, metrics in COMPACT:
            r = next((c.row(m) for m in metrics if c.row(m) is not None), None)
            cells.append("-" if r is None or r.measured is None else f"{_fmt(r.measured, r.unit)} {r.unit}, "
                                                                       f"{_pct(r.error)}")
        lines.append(f"| {c.id} | " + " | ".join(cells) + " |")
    lines.append("")
    lines += [f"- {name}: {n} cases"
              + ("" if med is None else f", median |error| {100 * med:.1f}%, worst {_pct(worst)}")
              for name, n, med, worst in summary(rep)]
    lines += [f"- CUDA context, {r.metric}: {_fmt(r.measured, r.unit)} GiB measured, {_fmt(r.estimate, r.unit)} GiB "
              f"in data/overheads.toml" for r in rep.context]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="GPU measurements vs gpuplan's estimates")
    ap.add_argument("files", nargs="*", type=Path, help="default: benchmarks/device/*.json")
    ap.add_argument("--cases", type=Path, default=CASES)
    ap.add_argument("--gpu", default=None, help="catalog id to estimate for (default: from the device name)")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--compact", action="store_true", help="one Markdown row per case (docs/accuracy.md)")
    a = ap.parse_args(argv)
    files = a.files or sorted((HERE / "device").glob("*.json"))
    if not files:
        print("no measurement files: run scripts/device_calibration.py on a GPU and save its JSON under "
              "benchmarks/device/", file=sys.stderr)
        return 1
    for f in files:
        rep = compare_file(f, a.cases, a.gpu)
        print(render_compact(rep) if a.compact else render(rep, a.markdown))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
