"""Calibrate the speed model's efficiencies on published runs and write them into data/speed.toml.

Fits, in log space, the values that make the speed model's predictions closest (least absolute log error, so that a
few odd runs do not pull the rest; each case weighed 1 / sqrt(its source's cases), so that no one table outweighs
the others) to the calibration cases of benchmarks/speed_cases.py: the matmul efficiency of each generation and
precision that has runs, and the shared shape parameters (micro-batch penalty, attention factor, elementwise passes,
launch cost). Generations without runs get priors from MLPerf Training's Llama-2-70B LoRA times relative to H100
(same workload, 8 GPUs; research/hardware.md s10.3). Then it sets range_low/range_high to the 10th/90th percentiles
of measured/predicted over the calibration cases, and rewrites those values (with their sources) in
src/gpuplan/data/speed.toml; everything else in the file is kept as it is.

Run: python scripts/fit_speed.py [--dry-run]
"""

from __future__ import annotations

import argparse
import datetime
import math
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "scripts"))

from speed_cases import Case, load_cases, predict  # noqa: E402

from gpuplan.catalog.loader import load_speed_model  # noqa: E402
from gpuplan.schema.speed import SpeedModel  # noqa: E402

DATA = ROOT / "src" / "gpuplan" / "data" / "speed.toml"
#: (kind, generation or None, field, lower bound, upper bound)
SCALARS = [
    ("param", None, "matmul_half_tokens", 16.0, 8192.0),
    ("param", None, "attention_factor", 0.2, 1.2),
    ("param", None, "eager_attention_factor", 0.1, 1.2),
    ("param", None, "elementwise_passes", 0.5, 8.0),
    ("param", None, "kernel_launch_s", 1e-6, 4e-5),
    ("param", None, "tp_comm_overlap", 0.0, 0.95),
]
#: MLPerf Training Llama-2-70B LoRA, 8 GPUs, median raw minutes (research/hardware.md s10.3): fp8 runs
MLPERF_LORA_MIN = {"hopper": 29.4, "blackwell": 10.4, "cdna3": 28.2, "gaudi2": 77.9}
MLPERF_PEAK_FP8 = {"hopper": 1979.0, "blackwell": 4500.0, "cdna3": 2614.9, "gaudi2": 865.0}


def _gen_fields(cases: list[Case]) -> list[tuple[str, str, str, float, float]]:
    out = []
    seen = set()
    for c in cases:
        prec = c.workload.precision
        field = "matmul_fp32" if prec == "fp32" else ("matmul_fp8" if prec.startswith("fp8") else "matmul_16bit")
        key = (c.gpu.generation, field)
        if key not in seen:
            seen.add(key)
            out.append(("generation", c.gpu.generation, field, 0.05, 0.95))
    return out


def _get(sm: SpeedModel, kind: str, gen: str | None, field: str) -> float:
    if kind == "param":
        return float(getattr(sm.params, field))
    return float(getattr(sm.generations[gen], field))  # type: ignore[index]


def _set(sm: SpeedModel, kind: str, gen: str | None, field: str, value: float) -> SpeedModel:
    if kind == "param":
        return sm.model_copy(update={"params": sm.params.model_copy(update={field: value})})
    g = sm.generations[gen].model_copy(update={field: value})  # type: ignore[index]
    return sm.model_copy(update={"generations": {**sm.generations, gen: g}})  # type: ignore[dict-item]


def weights(cases: list[Case]) -> list[float]:
    """Each case weighs 1 / sqrt(the cases of its source): a table of many rows of one setup (torchtune's flag
    table: 8 rows of one model on one GPU) does not outweigh the sources with one row, and the fit generalises to
    sources it has not seen (the leave-one-source-out check of benchmarks/speed_accuracy.py)."""
    from speed_cases import source_group

    n: dict[str, int] = {}
    for c in cases:
        n[source_group(c)] = n.get(source_group(c), 0) + 1
    return [1 / math.sqrt(n[source_group(c)]) for c in cases]


def loss(cases: list[Case], sm: SpeedModel) -> float:
    return sum(wt * abs(math.log(predict(c, sm) / c.value)) for c, wt in zip(cases, weights(cases)))


def fit(cases: list[Case], sm: SpeedModel, *, quiet: bool = False, rounds: int = 12) -> tuple[SpeedModel, list[str]]:
    """Coordinate descent on multiplicative steps; returns the fitted model and the names it fitted."""
    knobs = _gen_fields(cases) + SCALARS
    best = loss(cases, sm)
    steps = (0.5, 0.7, 0.85, 0.95, 1.05, 1.18, 1.4, 2.0)
    for r in range(rounds):
        improved = False
        for kind, gen, field, lo, hi in knobs:
            cur = _get(sm, kind, gen, field)
            for f in steps:
                v = min(max(cur * f, lo), hi)
                if v == cur:
                    continue
                trial = _set(sm, kind, gen, field, v)
                val = loss(cases, trial)
                if val < best - 1e-9:
                    best, sm, cur, improved = val, trial, v, True
        if not quiet:
            print(f"round {r + 1}: mean |log error| {best / len(cases):.4f}", file=sys.stderr)
        if not improved:
            break
    names = [f"{gen}.{field}" if gen else field for kind, gen, field, *_ in knobs]
    return sm, names


def fit_qlora(sm: SpeedModel) -> tuple[SpeedModel, str]:
    """QLoRA's dequantization cost from LitGPT's QLoRA/LoRA runtime pairs (same model, data and batch on one
    A10G), timed at 362 tokens per sample (between the 256 and 512 LitGPT pads Alpaca2k batches to)."""
    from speed_accuracy import LITGPT_PAIRS
    from speed_cases import model_arch

    from gpuplan.catalog.hardware import builtin_catalog
    from gpuplan.catalog.loader import load_activation_table
    from gpuplan.core.sizing.lora import lora_params
    from gpuplan.core.sizing.params import count_params
    from gpuplan.core.sizing.speed import estimate_training_speed
    from gpuplan.schema.project import Layout, Workload

    gpu = builtin_catalog().gpus.rows["a10g-24gb"]
    table = load_activation_table()

    def err(value: float) -> float:
        trial = _set(sm, "param", None, "qlora_dequant_bytes_per_param", value)
        total = 0.0
        for preset, mbs, lora_min, qlora_min in LITGPT_PAIRS:
            arch = model_arch(preset)
            p = count_params(arch)
            targets = ["query_key_value"] if preset == "falcon-7b" else ["q_proj", "v_proj"]
            t = {}
            for task in ("lora", "qlora"):
                w = Workload(task=task, precision="bf16", micro_batch_size=mbs, sequence_length=362,
                             lora={"rank": 8, "targets": targets})
                t[task] = estimate_training_speed(arch, p, w, Layout(), 1, gpu, trial, table,
                                                  trainable=lora_params(arch, 8, targets)).time.step_seconds
            total += abs(math.log((t["qlora"] / t["lora"]) / (qlora_min / lora_min)))
        return total

    grid = [2.0 * 1.1**k for k in range(40)]
    best = min(grid, key=err)
    today = datetime.date.today().isoformat()
    return _set(sm, "param", None, "qlora_dequant_bytes_per_param", best), (
        f"calibrated by scripts/fit_speed.py on LitGPT's QLoRA/LoRA runtime ratios (Llama-2-7B, Mistral-7B, "
        f"Falcon-7B, Gemma-2B on one A10G; measurements.yaml), {today}: bitsandbytes' NF4 dequantization moves "
        "far more than the 4.5 bytes per parameter a bandwidth-bound kernel would")


def priors(sm: SpeedModel, calibrated: set[str]) -> tuple[SpeedModel, dict[str, str]]:
    """Generations without runs: fp8 efficiency from MLPerf relative times; 16-bit and fp32 keep the
    calibrated generations' fp8 : 16-bit : fp32 proportions."""
    why: dict[str, str] = {}
    h = sm.generations["hopper"]
    for gen in ("blackwell", "cdna3", "gaudi2"):
        if f"{gen}.matmul_fp8" in calibrated:
            continue
        rel = (MLPERF_LORA_MIN["hopper"] / MLPERF_LORA_MIN[gen]) * (MLPERF_PEAK_FP8["hopper"] / MLPERF_PEAK_FP8[gen])
        fp8 = min(h.matmul_fp8 * rel, 0.95)
        sm = _set(sm, "generation", gen, "matmul_fp8", fp8)
        why[gen] = (f"MLPerf Training v4.0-v5.1 Llama-2-70B LoRA on 8 GPUs: {MLPERF_LORA_MIN[gen]} vs "
                    f"{MLPERF_LORA_MIN['hopper']} min on H100 at {MLPERF_PEAK_FP8[gen]:g} vs 1979 fp8 TFLOPS: "
                    f"{rel:.2f} x hopper's fp8 efficiency")
        if f"{gen}.matmul_16bit" not in calibrated:
            sm = _set(sm, "generation", gen, "matmul_16bit", min(h.matmul_16bit * rel, 0.95))
    g2 = sm.generations["gaudi2"]
    sm = _set(sm, "generation", "gaudi3", "matmul_fp8", g2.matmul_fp8)
    sm = _set(sm, "generation", "gaudi3", "matmul_16bit", g2.matmul_16bit)
    why["gaudi3"] = "no Gaudi 3 runs: Gaudi 2's efficiency (MLPerf), same software stack"
    c3 = sm.generations["cdna3"]
    sm = _set(sm, "generation", "cdna2", "matmul_16bit", c3.matmul_16bit)
    sm = _set(sm, "generation", "cdna2", "matmul_fp8", c3.matmul_16bit)
    why["cdna2"] = "no MI250X runs: CDNA3's 16-bit efficiency (MLPerf, ROCm)"
    a = sm.generations["ampere"]
    for gen in ("turing",):
        sm = _set(sm, "generation", gen, "matmul_16bit", a.matmul_16bit)
        sm = _set(sm, "generation", gen, "matmul_fp8", a.matmul_16bit)
        why[gen] = "no T4 runs: Ampere's efficiencies (same CUDA stack; T4 is power-capped at 70 W, so optimistic)"
    ada = sm.generations["ada"]
    if "ada.matmul_fp8" not in calibrated:
        sm = _set(sm, "generation", "ada", "matmul_fp8", ada.matmul_16bit * h.matmul_fp8 / h.matmul_16bit)
    return sm, why


#: where a generation's efficiency comes from when a fold has no runs of it (leave-one-source-out): the
#: nearest generation with runs, in this order
NEAREST = {"volta": ("ampere", "hopper"), "ampere": ("hopper", "ada"), "ada": ("ampere", "hopper"),
           "hopper": ("ampere", "blackwell"), "blackwell": ("hopper",)}
FIELDS = ("matmul_16bit", "matmul_fp8", "matmul_fp32")
#: generations whose only runs, and whose priors, come from MLPerf (benchmarks/speed_cases.yaml section 4)
MLPERF_ONLY = ("cdna2", "cdna3", "cdna4", "gaudi2", "gaudi3")


#: parameters data/speed.toml sets from one source's rows (not fitted here), and the value each takes in a fold
#: without that source: (source id, parameter, prior, why)
SET_FROM = [
    ("torchtune", "compile_speedup", 6667 / 5762, "torchtitan Table 1: FSDP eager 5,762 -> compile 6,667 tokens/s/GPU"),
    ("torchtune", "logits_fp32_passes", 8.0, "the standard loss's fp32 passes counted: upcast, log-softmax, gradient"),
    ("torchtune", "offload_overlap", 0.8, "comm_overlap: DDP/FSDP overlap of collectives with compute"),
]


def fit_fold(cases: list[Case], sm: SpeedModel) -> SpeedModel:
    """The speed model fitted on `cases` alone, as scripts/fit_speed.py would fit it if they were all the runs:
    every generation field without a run in `cases` is reset to a prior from the nearest generation that has
    runs, once that fold is fitted (so nothing fitted on the left-out runs leaks into it)."""
    from speed_cases import source_group

    have = {(g, f) for _, g, f, *_ in _gen_fields(cases)}
    sources = {source_group(c) for c in cases}
    for src, name, prior, _ in SET_FROM:
        if src not in sources:
            sm = _set(sm, "param", None, name, prior)
    sm, names = fit(cases, sm, quiet=True)
    for gen, near in NEAREST.items():
        for field in FIELDS:
            if (gen, field) in have:
                continue
            src = next((n for n in near if (n, field) in have), None)
            if src is not None:
                sm = _set(sm, "generation", gen, field, _get(sm, "generation", src, field))
    sm, _ = priors(sm, set(names))
    if "mlperf" not in sources:  # the MLPerf priors are that source's own numbers: a fold without it takes the
        for gen in MLPERF_ONLY:  # datacenter generation with the most runs (no leak of the left-out runs)
            for field in FIELDS:
                if (gen, field) not in have:
                    sm = _set(sm, "generation", gen, field, _get(sm, "generation", "hopper", field))
    return sm


def spread(cases: list[Case], sm: SpeedModel) -> tuple[float, float]:
    ratios = sorted(c.value / predict(c, sm) if c.metric == "tokens_per_s_per_gpu" else predict(c, sm) / c.value
                    for c in cases)  # measured speed / predicted speed

    def q(p: float) -> float:
        k = (len(ratios) - 1) * p
        lo, hi = math.floor(k), math.ceil(k)
        return ratios[lo] + (ratios[hi] - ratios[lo]) * (k - lo)

    return q(0.1), q(0.9)


def _source(sm: SpeedModel, pid: str) -> str:
    return str(sm.sources.get(pid, ""))


def _write(sm: SpeedModel, names: list[str], why: dict[str, str], n: int, lo: float, hi: float,
           qlora_src: str, ranges_only: bool = False) -> None:
    text = DATA.read_text()
    today = datetime.date.today().isoformat()
    src = f"calibrated by scripts/fit_speed.py on {n} published runs (benchmarks/speed_cases.py), {today}"

    def set_param(t: str, pid: str, value: float, source: str) -> str:
        pat = re.compile(r'(\[\[param\]\]\nid = "' + re.escape(pid) + r'"\nvalue = )([^\n]+)\nsource = "[^"\n]*"\n'
                         r'as_of = [^\n]+')
        val = f"{value:.4g}" if abs(value) >= 1e-3 else f"{value:.3e}"
        new, k = pat.subn(lambda m: f'{m.group(1)}{val}\nsource = "{source}"\nas_of = {today}', t)
        assert k == 1, pid
        return new

    kept = " (constants of the last fit kept: scripts/fit_speed.py --range-only)" if ranges_only else ""
    text = set_param(text, "range_low", lo,
                     f"10th percentile of measured/predicted speed on the {n} calibration runs, {today}{kept}")
    text = set_param(text, "range_high", hi,
                     f"90th percentile of measured/predicted speed on the {n} calibration runs, {today}{kept}")
    if ranges_only:
        DATA.write_text(text)
        return
    for name in names:
        if "." not in name:
            text = set_param(text, name, _get(sm, "param", None, name), src)
    text = set_param(text, "qlora_dequant_bytes_per_param", sm.params.qlora_dequant_bytes_per_param, qlora_src)
    for gen, g in sm.generations.items():
        fitted = [n_.split(".")[1] for n_ in names if n_.startswith(gen + ".")]
        # a generation whose runs all come from one source (MLPerf: CDNA, Gaudi) stays a prior: leaving that source out
        # leaves nothing to check it on, and its 16-bit efficiency is still extrapolated
        basis = "calibrated" if fitted and gen not in MLPERF_ONLY else "prior"
        source = (f"{', '.join(fitted)} {src}" if fitted else why.get(gen, "prior"))
        if fitted and gen in why:
            source += f"; others: {why[gen]}"
        pat = re.compile(r'(\[\[generation\]\]\nid = "' + gen + r'"\n)(.*?)(?=\n\n|\Z)', re.S)
        body = "\n".join([
            f"network_gbs_per_gpu = {g.network_gbs_per_gpu}",
            f"matmul_16bit = {g.matmul_16bit:.3f}", f"matmul_fp8 = {g.matmul_fp8:.3f}",
            f"matmul_fp32 = {g.matmul_fp32:.3f}", f"bandwidth = {g.bandwidth:.2f}",
            f'basis = "{basis}"', f'source = "{source}"'])
        text, k = pat.subn(lambda m, body=body: m.group(1) + body, text)
        assert k == 1, gen
    DATA.write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--range-only", action="store_true",
                    help="keep the fitted constants; set range_low/high to their spread on the calibration runs")
    a = ap.parse_args()
    cases = [c for c in load_cases() if c.calibration]
    sm0 = load_speed_model()
    if a.range_only:
        lo, hi = spread(cases, sm0)
        print(f"{len(cases)} calibration runs, constants kept: range {lo:.4g}-{hi:.4g}")
        if not a.dry_run:
            _write(sm0, [], {}, len(cases), lo, hi, _source(sm0, "qlora_dequant_bytes_per_param"), ranges_only=True)
            print(f"wrote {DATA.relative_to(ROOT)}")
        return
    sm, names = fit(cases, sm0)
    sm, qlora_src = fit_qlora(sm)
    sm, names = fit(cases, sm, quiet=True)
    sm, why = priors(sm, set(names))
    for gen in MLPERF_ONLY:
        if f"{gen}.matmul_fp8" in names:
            why[gen] = ("basis stays prior: one source only (MLPerf Training v5.1, AMD's Llama-2-70B LoRA logs, "
                        "benchmarks/speed_cases.yaml section 4), so a leave-one-source-out fold has no run of it "
                        "(it takes Hopper's efficiencies); 16-bit, fp32 and bandwidth keep their priors")
    lo, hi = spread(cases, sm)
    errs = [abs(predict(c, sm) / c.value - 1) for c in cases]
    print(f"{len(cases)} cases: median |error| {100 * statistics.median(errs):.1f}%, range {lo:.2f}-{hi:.2f}; "
          f"qlora_dequant_bytes_per_param {sm.params.qlora_dequant_bytes_per_param:.3g}")
    for name in names:
        gen, _, field = name.rpartition(".")
        print(f"  {name} = {_get(sm, 'generation' if gen else 'param', gen or None, field):.4g}")
    if not a.dry_run:
        _write(sm, names, why, len(cases), lo, hi, qlora_src)
        print(f"wrote {DATA.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
