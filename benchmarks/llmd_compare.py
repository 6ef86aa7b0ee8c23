"""gpuplan's serving capacity beside llm-d's capacity planner, on the setups of benchmarks/serving_cases.yaml.

For each distinct setup (model, GPU, GPUs, TP, weights dtype, prompt + output length) it prints llm-d's
`planner.capacity_planner.calculate_capacity` figures (KV cache per token, memory left for the KV cache per
GPU, maximum concurrent requests of max_model_len = prompt + output tokens at vLLM's default 90% memory
utilisation) next to gpuplan's (the requests its KV cache holds at once, `inference.kv_cache_requests`, from
`gpuplan.api.estimate`, the KV cache per GPU there, and `inference.concurrency` when the API has it).

Optional dependency, not one of gpuplan's: `pip install llm-d-planner` (tested with 0.3.3; it needs
transformers, which gpuplan's `trace` extra already brings). Runs offline:
- the model config is a local config.json (../shared/hf-configs when it has the model, else gpuplan's preset
  config, with `architectures` set from its model_type), loaded by llm-d's own `get_model_config_from_hf`
  (transformers' AutoConfig on a local folder);
- llm-d reads parameter counts per dtype from the Hugging Face Hub (safetensors metadata); here
  `model_params_by_dtype` is given gpuplan's preset parameter count in the case's weights dtype instead, the
  only network call replaced;
- GPU memory is llm-d's own catalog value (memory_gb) where llm-d lists the GPU, else gpuplan's, in GB.
llm-d sizes the KV cache at the model's dtype (it has no KV-dtype input), so both sides are run with a 16-bit KV
cache here, whatever the published row used.

Run: python benchmarks/llmd_compare.py [--markdown | --json]
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from serving_accuracy import load_cases

from gpuplan import api
from gpuplan.catalog.hardware import builtin_catalog
from gpuplan.catalog.loader import load_presets
from gpuplan.units import GIB

HF_CONFIGS = Path(__file__).resolve().parents[1].parent / "shared" / "hf-configs"
GPU_MEMORY_UTILIZATION = 0.9  # vLLM's default, what llm-d applies
BLOCK_SIZE = 16  # vLLM's default KV block, llm-d's default
#: gpuplan GPU id -> llm-d gpu_catalog.json gpu_type
LLMD_GPU = {"h100-sxm-80gb": "H100", "h200-sxm-141gb": "H200", "a100-sxm-80gb": "A100-80", "mi300x-192gb": "MI300X"}
#: architectures for preset configs that lack the key (llm-d picks its activation profile by it)
ARCH = {"llama": "LlamaForCausalLM", "mixtral": "MixtralForCausalLM", "mistral": "MistralForCausalLM",
        "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}
KV16 = {"fp8": "bf16", "bf16": "bf16", "fp16": "fp16"}


def _import_planner() -> Any:
    try:
        logging.getLogger("planner").setLevel(logging.ERROR)
        from planner import capacity_planner
    except ImportError as exc:
        sys.exit(f"llm-d's planner is not installed ({exc}): pip install llm-d-planner")
    return capacity_planner


def _config_dir(model: str, root: Path) -> Path:
    """A folder with the model's config.json, for AutoConfig."""
    folder = root / model
    if not folder.exists():
        folder.mkdir(parents=True)
        shared = HF_CONFIGS / f"{model}.json"
        config = json.loads(shared.read_text()) if shared.exists() else dict(load_presets()[model].config)
        config.setdefault("architectures", [ARCH.get(config["model_type"], "LlamaForCausalLM")])
        (folder / "config.json").write_text(json.dumps(config))
    return folder


def setups(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[tuple, dict[str, Any]] = {}
    for c in cases:
        key = (c["model"], c["gpu"], c["gpus"], c["tp"], c["weights_dtype"], c["prompt_tokens"], c["output_tokens"])
        seen.setdefault(key, c)
    return list(seen.values())


def gpu_memory_gb(gpu: str, llmd_catalog: dict[str, float]) -> float:
    if gpu in LLMD_GPU and LLMD_GPU[gpu] in llmd_catalog:
        return llmd_catalog[LLMD_GPU[gpu]]
    return round(builtin_catalog().gpus.rows[gpu].memory_gib * GIB / 1e9)


def llmd_capacity(cp: Any, case: dict[str, Any], root: Path, memory_gb: float) -> dict[str, Any]:
    params = load_presets()[case["model"]].parameters
    dtype = {"fp8": "F8_E4M3", "bf16": "BF16", "fp16": "F16"}[case["weights_dtype"]]
    cp.model_params_by_dtype = lambda name, token=None: {dtype: params}  # the Hub lookup, replaced
    out = cp.calculate_capacity(str(_config_dir(case["model"], root)), case["prompt_tokens"] + case["output_tokens"],
                                1, memory_gb, case["tp"], case.get("pp", 1), 1, GPU_MEMORY_UTILIZATION, BLOCK_SIZE)
    gpus = case["tp"] * case.get("pp", 1)
    return {"max_concurrent_requests": out["max_concurrent_requests"],
            "kv_per_token_bytes": out["kv_cache_detail"]["per_token_memory_bytes"],
            "kv_capacity_gib_per_gpu": out["allocatable_kv_cache_memory_gb"] / gpus,
            "weights_gib_per_gpu": out["per_gpu_model_memory_gb"]}


def _project(case: dict[str, Any], batch: int) -> dict[str, Any]:
    return {"model": {"preset": case["model"]},
            "workload": {"task": "inference", "context_length": case["prompt_tokens"],
                         "output_tokens": case["output_tokens"], "batch_size": batch,
                         "weights_dtype": case["weights_dtype"], "kv_cache_dtype": KV16[case["weights_dtype"]],
                         "prefill_tokens": 8192, "gpu_memory_utilization": GPU_MEMORY_UTILIZATION},
            "hardware": {"gpu": case["gpu"], "gpus": case["tp"] * case.get("pp", 1),
                         "layout": {"tp": case["tp"], "pp": case.get("pp", 1)}}}


def gpuplan_capacity(case: dict[str, Any], cap: int = 65536) -> dict[str, Any]:
    def est(b: int) -> dict[str, Any]:
        return api.estimate(_project(case, b)).model_dump(mode="json")

    try:
        est(1)
    except Exception as exc:  # noqa: BLE001 - the API failing on this setup: say so, go on
        return {"max_batch": 0, "error": f"{type(exc).__name__}: {exc}"}
    # the requests the engine's KV cache holds at once at these lengths (a serving engine admits what its cache
    # holds and queues the rest, so memory "fits" at any batch once one request fits: docs/serving.md)
    inf = est(1).get("inference") or {}
    lo = min(int(float(inf.get("kv_cache_requests") or 0.0)), cap)
    out: dict[str, Any] = {"max_batch": lo}
    if lo:
        r = est(lo)
        out["kv_gib_per_gpu_at_max_batch"] = r["memory"]["kv_cache_bytes"] / GIB
        gpus = case["tp"] * case.get("pp", 1)
        # KV bytes over the tokens the batch can hold at max_model_len: block rounding shows as a few % above
        # the architecture's bytes per token, a KV pool larger than the batch needs as more
        tokens = case["prompt_tokens"] + case["output_tokens"]
        out["kv_per_token_bytes"] = r["memory"]["kv_cache_bytes"] * gpus / (lo * tokens)
        conc = (r.get("inference") or {}).get("concurrency")
        if isinstance(conc, (int, float)):
            out["inference_concurrency"] = conc
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    fmt = ap.add_mutually_exclusive_group()
    fmt.add_argument("--markdown", action="store_true")
    fmt.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    cp = _import_planner()
    from planner.data._resolver import data_path

    llmd_gpus = {g["gpu_type"]: g["memory_gb"]
                 for g in json.loads(Path(data_path("configuration/gpu_catalog.json")).read_text())["gpu_types"]}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in setups(load_cases()):
            mem = gpu_memory_gb(case["gpu"], llmd_gpus)
            row = {"id": case["id"], "model": case["model"], "gpu": case["gpu"], "tp": case["tp"],
                   "weights_dtype": case["weights_dtype"], "prompt_tokens": case["prompt_tokens"],
                   "output_tokens": case["output_tokens"],
                   "max_model_len": case["prompt_tokens"] + case["output_tokens"],
                   "gpu_memory_gb_given_to_llmd": mem}
            try:
                row["llmd"] = llmd_capacity(cp, case, Path(tmp), mem)
            except (ValueError, KeyError, TypeError, OSError) as exc:  # llm-d refuses a TP its rules reject
                row["llmd_error"] = f"{type(exc).__name__}: {exc}"
            row["gpuplan"] = gpuplan_capacity(case)
            a, b = row.get("llmd", {}).get("max_concurrent_requests"), row["gpuplan"]["max_batch"]
            row["ratio_gpuplan_to_llmd"] = b / a if a else None
            rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    head = ["setup", "max_model_len", "llm-d max conc.", "gpuplan max batch", "ratio", "llm-d KV GiB/GPU",
            "gpuplan KV GiB/GPU", "KV B/token llm-d", "gpuplan KV B / (batch x max_model_len)"]
    body = []
    for r in rows:
        d, g = r.get("llmd", {}), r["gpuplan"]
        body.append([f"{r['model']} {r['tp']}x {r['gpu']} {r['weights_dtype']}",
                     f"{r['max_model_len']} ({r['prompt_tokens']}+{r['output_tokens']})",
                     str(d.get("max_concurrent_requests", r.get("llmd_error", "-"))),
                     str(g["max_batch"]) if "error" not in g else f"failed: {g['error'][:60]}",
                     "-" if r["ratio_gpuplan_to_llmd"] is None else f"{r['ratio_gpuplan_to_llmd']:.2f}",
                     f"{d['kv_capacity_gib_per_gpu']:.1f}" if d else "-",
                     f"{g['kv_gib_per_gpu_at_max_batch']:.1f}" if g.get("max_batch") else "-",
                     str(d.get("kv_per_token_bytes", "-")),
                     f"{g['kv_per_token_bytes']:,.0f}" if g.get("max_batch") else "-"])
    ratios = sorted(r["ratio_gpuplan_to_llmd"] for r in rows if r["ratio_gpuplan_to_llmd"])
    med = ratios[len(ratios) // 2] if ratios else math.nan
    if args.markdown:
        print("## Serving capacity beside llm-d's capacity planner\n\n"
              "`benchmarks/llmd_compare.py` runs llm-d's `planner.capacity_planner.calculate_capacity` "
              "(`pip install llm-d-planner`, offline: local config.json, gpuplan's parameter counts in place of its "
              "Hub lookup) on each distinct setup of `benchmarks/serving_cases.yaml`, beside the largest batch "
              "gpuplan's KV cache holds (inference.kv_cache_requests), both at 90% memory utilisation and with a "
              "16-bit KV cache (llm-d sizes the KV cache at the model's dtype). max_model_len is the prompt plus the "
              "output.\n")
        print("| " + " | ".join(head) + " |\n|" + "|".join(["---"] * len(head)) + "|")
        for b in body:
            print("| " + " | ".join(b) + " |")
    else:
        widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
        for x in [head, *body]:
            print("  ".join(x[i].ljust(widths[i]) for i in range(len(head))))
    print(f"\nmedian ratio gpuplan max batch / llm-d max concurrent requests: {med:.2f} over {len(ratios)} setups "
          f"(16-bit KV cache on both sides, {GPU_MEMORY_UTILIZATION:.0%} memory utilisation)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
