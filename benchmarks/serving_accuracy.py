"""Serving estimate vs published serving measurements (issue 14, point 6).

Each row of benchmarks/serving_cases.yaml (a published measurement with its source, date and setup) becomes a
gpuplan project (task inference, the model preset, prompt and output lengths, the load, the dtypes, the GPU,
its count and tensor-parallel degree) that goes through the public API, `gpuplan.api.estimate`. The prediction
is compared with the measurement for each metric the source gives: output tokens/s, inter-token latency (ITL),
time to first token (TTFT) and end-to-end time of a request (e2e). Prints one line per row and metric, then the
median and 90th-percentile absolute errors per metric (and per source).

Load: `concurrency: N` is given as `workload.batch_size: N` (N requests in flight); `request_rate` as
`workload.arrival_rate`; `max: true` (requests queued at an infinite rate) as the requests gpuplan's KV cache
holds at once (`inference.kv_cache_requests`), up to the engine's `max_concurrency`. Continuous-batching engines get
`prefill_tokens: 8192` (the engine's token budget per step, vLLM's and TensorRT-LLM's common default;
an assumption, printed under the table); static batches are prefilled whole, as the source's benchmark runs
them. A row's `engine_flags` are the engine settings its source ran with (cited in `engine_flags_source`):
`max_num_batched_tokens` (the workload's `prefill_tokens`), `max_num_seqs` and `kv_read_per_query_head` (the
engine's decode attention without a grouped-query kernel), given to the engine in place of its defaults.

Keys read: the issue-14 keys when the API has them (`inference.itl_s`, `inference.ttft_s`, `inference.e2e_s` as
{p50, p90, p99}, with `mean` preferred where the source reports means, and for e2e then
`inference.request_latency_s`, the mean end-to-end time; `inference.output_tokens_per_s`), else the older keys (ITL
= 1 / `inference.decode_tokens_per_s_per_request`, `inference.time_to_first_token_s`, `inference.request_latency_s`,
`inference.aggregate_tokens_per_s`). The output says which it used.

Two serving constants are calibrated on these rows (data/serving.toml `decode_kernel_s`,
`attention_bandwidth_ratio`; benchmarks/serving_loso.py): beside the in-sample figures (the constants as
data/serving.toml has them) the benchmark prints leave-one-source-out figures, each source's rows predicted with
the constants fitted on the other sources only, and the fits (`--no-loso` skips them).

Run: python benchmarks/serving_accuracy.py [--cases PATH] [--markdown | --json] [--only ID-PREFIX] [--no-loso]
Offline, about 10 seconds (the leave-one-source-out fit runs the rows at every grid point).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import yaml

from gpuplan import api

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serving_loso  # the sibling module, importable however this file is run
from speed_accuracy import pct  # the percentile every accuracy benchmark reports

HERE = Path(__file__).resolve().parent
CASES = HERE / "serving_cases.yaml"

#: the engine's token budget per step for continuous-batching rows (vLLM's max_num_batched_tokens,
#: TensorRT-LLM's max_num_tokens): 8192 is the default of both in the versions the sources ran
CONTINUOUS_TOKEN_BUDGET = 8192
#: upper bound of the batch search for `max: true` rows without an engine cap
MAX_SEARCH_BATCH = 16384
METRICS = ("output_tokens_per_s", "itl_s", "ttft_s", "e2e_s")
#: a second reading of throughput, Little-consistent: requests/s x output tokens (compared where the source
#: gives output tokens/s; it tells a throughput key that leaves prefill out from one that counts it)
VIA_RPS = "output_tokens_per_s_via_rps"
LABEL = {"output_tokens_per_s": "output tok/s", VIA_RPS: "req/s x output", "itl_s": "ITL", "ttft_s": "TTFT",
         "e2e_s": "e2e"}


def load_cases(path: Path = CASES) -> list[dict[str, Any]]:
    """The rows of the cases file, with anchors merged (every row carries its source's fields)."""
    data = yaml.safe_load(path.read_text())
    if data.get("schema_version") != 1:
        raise ValueError(f"{path}: schema_version {data.get('schema_version')!r}, this benchmark reads 1")
    return list(data["cases"])


def build_project(case: dict[str, Any], batch_size: int | None = None) -> dict[str, Any]:
    """The gpuplan project (a dict for `gpuplan.api.estimate`) for one row; `batch_size` overrides the load."""
    load = case["load"]
    workload: dict[str, Any] = {
        "task": "inference",
        "context_length": int(case["prompt_tokens"]),
        "output_tokens": int(case["output_tokens"]),
        "weights_dtype": case["weights_dtype"],
        "kv_cache_dtype": case["kv_cache_dtype"],
    }
    if batch_size is not None:
        workload["batch_size"] = int(batch_size)
    elif "concurrency" in load:
        workload["batch_size"] = int(load["concurrency"])
    elif "request_rate" in load:
        workload["arrival_rate"] = float(load["request_rate"])
    else:
        raise ValueError(f"{case['id']}: a max-load row needs a batch size (see max_batch)")
    engine = gpuplan_engine(case)
    if engine is not None:
        workload["engine"] = engine
    flags = case.get("engine_flags") or {}
    if flags.get("max_num_batched_tokens"):
        workload["prefill_tokens"] = int(flags["max_num_batched_tokens"])
    elif case.get("batching") == "continuous":
        workload["prefill_tokens"] = CONTINUOUS_TOKEN_BUDGET
    return {
        "name": case["id"],
        "model": {"preset": case["model"]},
        "workload": workload,
        "hardware": {"gpu": case["gpu"], "gpus": int(case["gpus"]),
                     "layout": {"tp": int(case.get("tp", 1)), "pp": int(case.get("pp", 1))}},
    }


#: the engine gpuplan models a row's with, by the start of the row's `engine` (none: vLLM, the default)
ENGINE_OF = {"TensorRT-LLM": "tensorrt-llm", "SGLang": "sglang"}
#: every row as vLLM (the figures before issue 29's engines; `--all-vllm`)
ALL_VLLM = False


def gpuplan_engine(case: dict[str, Any]) -> str | None:
    """`workload.engine` for a row: TensorRT-LLM's and SGLang's rows run as those engines (their memory pools and
    defaults, data/serving.toml [[engine]]), the rest as vLLM."""
    if ALL_VLLM:
        return None
    return next((e for prefix, e in ENGINE_OF.items() if str(case.get("engine", "")).startswith(prefix)), None)


def _estimate(project: dict[str, Any]) -> dict[str, Any]:
    return api.estimate(project).model_dump(mode="json")


def max_batch(case: dict[str, Any]) -> int:
    """For a `max: true` row, the requests the engine's KV cache holds at once (gpuplan's
    `inference.kv_cache_requests` per replica, every replica together), up to the engine's cap (0: none). The engine
    admits what its KV cache holds and queues the rest, so this is the batch it runs at an infinite arrival rate."""
    cap = case["load"].get("max_concurrency") or MAX_SEARCH_BATCH
    try:
        inf = _estimate(build_project(case, 1)).get("inference") or {}
    except Exception:  # noqa: BLE001 - the API under development: reported by evaluate() on the row
        return 0
    holds = float(inf.get("kv_cache_requests") or 0.0) * int(inf.get("replicas") or 1)
    return min(int(cap), int(holds))


def _pick(value: Any, statistic: str) -> tuple[float | None, str]:
    """A number from a new-style {p50, p90, p99[, mean]} dict (mean where the source reports means)."""
    if isinstance(value, dict):
        for key in (("mean", "p50") if statistic == "mean" else ("p50", "mean")):
            if isinstance(value.get(key), (int, float)):
                return float(value[key]), key
    return None, ""


def read_prediction(result: dict[str, Any], case: dict[str, Any]) -> tuple[dict[str, float], dict[str, str]]:
    """Predicted metrics and, for each, the key it was read from."""
    inf = result.get("inference") or {}
    stat = case.get("statistic", "mean")
    pred: dict[str, float] = {}
    keys: dict[str, str] = {}
    for metric, new_key in (("itl_s", "itl_s"), ("ttft_s", "ttft_s"), ("e2e_s", "e2e_s")):
        value, sub = _pick(inf.get(new_key), stat)
        if value is not None:
            pred[metric], keys[metric] = value, f"inference.{new_key}.{sub}"
    if (stat == "mean" and keys.get("e2e_s", "").endswith(".p50")
            and isinstance(inf.get("request_latency_s"), (int, float))):
        # the JSON contract (issue 14, point 7): request_latency_s is the mean end-to-end time
        pred["e2e_s"], keys["e2e_s"] = float(inf["request_latency_s"]), "inference.request_latency_s (mean)"
    if "itl_s" not in pred and inf.get("decode_tokens_per_s_per_request"):
        pred["itl_s"] = 1.0 / float(inf["decode_tokens_per_s_per_request"])
        keys["itl_s"] = "1/inference.decode_tokens_per_s_per_request"
    if "ttft_s" not in pred and isinstance(inf.get("time_to_first_token_s"), (int, float)):
        pred["ttft_s"], keys["ttft_s"] = float(inf["time_to_first_token_s"]), "inference.time_to_first_token_s"
    if "e2e_s" not in pred and isinstance(inf.get("request_latency_s"), (int, float)):
        pred["e2e_s"], keys["e2e_s"] = float(inf["request_latency_s"]), "inference.request_latency_s"
    for key in ("output_tokens_per_s", "aggregate_tokens_per_s"):
        if isinstance(inf.get(key), (int, float)):
            pred["output_tokens_per_s"], keys["output_tokens_per_s"] = float(inf[key]), f"inference.{key}"
            break
    rps = inf.get("requests_per_s")
    rps_value = rps if isinstance(rps, (int, float)) else _pick(rps, stat)[0]
    if rps_value is not None:
        pred[VIA_RPS] = float(rps_value) * int(case["output_tokens"])
        keys[VIA_RPS] = "inference.requests_per_s x output_tokens"
    return pred, keys


def measured(case: dict[str, Any]) -> dict[str, float]:
    """The row's measurements in the benchmark's metrics (per-GPU throughput times the instance's GPUs)."""
    m = dict(case["measured"])
    if "output_tokens_per_s_per_gpu" in m:
        m["output_tokens_per_s"] = m.pop("output_tokens_per_s_per_gpu") * int(case["gpus"])
    return {k: float(v) for k, v in m.items() if k in METRICS}


def evaluate(case: dict[str, Any]) -> dict[str, Any]:
    """One row: the batch it ran at, the keys read, and per metric the measurement, prediction and error; with the
    engine's `max_num_seqs` the source ran at (`engine_flags`), else the engine's default."""
    flags = case.get("engine_flags") or {}
    values: dict[str, Any] = {}
    if flags.get("max_num_seqs"):
        values.update(max_num_seqs_large=int(flags["max_num_seqs"]), max_num_seqs_small=int(flags["max_num_seqs"]))
    if flags.get("kv_read_per_query_head"):
        values["kv_read_per_query_head"] = True
    if not values:
        return _evaluate(case)
    with serving_loso.engine_values(values):
        return _evaluate(case)


def _evaluate(case: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"id": case["id"], "engine": case["engine"], "gpu": case["gpu"], "gpus": case["gpus"],
                           "model": case["model"], "source": case["source"], "as_of": case["as_of"]}
    if case["load"].get("max"):
        try:  # the API failing outright is reported as such, not as "nothing fits"
            _estimate(build_project(case, 1))
        except Exception as exc:  # noqa: BLE001 - a GpuplanError, or the API failing: the row says which
            row["error"] = f"{type(exc).__name__}: {exc}"
            return row
    batch = max_batch(case) if case["load"].get("max") else None
    row["batch_size"] = batch if batch is not None else case["load"].get("concurrency")
    if batch == 0:
        row["error"] = "gpuplan fits no batch at all on this hardware"
        return row
    try:
        result = _estimate(build_project(case, batch))
    except Exception as exc:  # noqa: BLE001 - a GpuplanError, or the API failing: the row says which, the run goes on
        row["error"] = f"{type(exc).__name__}: {exc}"
        return row
    pred, keys = read_prediction(result, case)
    row["keys"] = keys
    row["fits"] = bool(result["memory"]["fits"])
    row["metrics"] = {}
    meas_all = measured(case)
    same = (pred.get(VIA_RPS) is not None and pred.get("output_tokens_per_s") is not None
            and abs(pred[VIA_RPS] - pred["output_tokens_per_s"]) <= 0.005 * pred["output_tokens_per_s"])
    if "output_tokens_per_s" in meas_all and not same:  # a second reading only where the two keys disagree
        meas_all[VIA_RPS] = meas_all["output_tokens_per_s"]
    for metric, meas in meas_all.items():
        p = pred.get(metric)
        row["metrics"][metric] = {"measured": meas, "predicted": p,
                                  "error": None if p is None else (p - meas) / meas}
    return row


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per metric (all rows, then per engine): count, median and p90 absolute error, median signed error."""
    out = []
    for metric in (*METRICS, VIA_RPS):
        errs = [(r["engine"], r["metrics"][metric]["error"]) for r in rows
                if metric in r.get("metrics", {}) and r["metrics"][metric]["error"] is not None]
        if not errs:
            continue
        groups = {"all": [e for _, e in errs]}
        for engine, e in errs:
            groups.setdefault(engine, []).append(e)
        for group, es in groups.items():
            out.append({"metric": metric, "group": group, "n": len(es),
                        "median_abs_error": statistics.median(abs(e) for e in es),
                        "p90_abs_error": pct([abs(e) for e in es], 0.9),
                        "median_error": statistics.median(es)})
    return out


def fmt_metric(metric: str, v: float | None) -> str:
    if v is None:
        return "-"
    if metric in ("output_tokens_per_s", VIA_RPS):
        return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"
    return f"{v * 1000:,.1f} ms" if v < 1 else f"{v:.2f} s"


def key_summary(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    used: dict[str, set[str]] = {}
    for r in rows:
        for metric, key in r.get("keys", {}).items():
            used.setdefault(metric, set()).add(key)
    return {m: sorted(k) for m, k in used.items()}


def table_lines(rows: list[dict[str, Any]], markdown: bool) -> list[str]:
    head = ["case", "GPU", "batch", "metric", "measured", "gpuplan", "error"]
    body = []
    for r in rows:
        if "error" in r:
            body.append([r["id"], f"{r['gpus']}x {r['gpu']}", str(r.get("batch_size") or "-"), "-", "-", "-",
                         f"failed: {r['error']}"])
            continue
        for metric, m in r["metrics"].items():
            err = "-" if m["error"] is None else f"{100 * m['error']:+.0f}%"
            body.append([r["id"], f"{r['gpus']}x {r['gpu']}", str(r["batch_size"]), LABEL[metric],
                         fmt_metric(metric, m["measured"]), fmt_metric(metric, m["predicted"]), err])
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * len(head)) + "|"]
        return lines + ["| " + " | ".join(b) + " |" for b in body]
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    return ["  ".join(x[i].ljust(widths[i]) for i in range(len(head))) for x in [head, *body]]


def summary_lines(summary: list[dict[str, Any]], markdown: bool) -> list[str]:
    head = ["metric", "rows", "n", "median abs. error", "p90 abs. error", "median error (bias)"]
    body = [[LABEL[s["metric"]], s["group"], str(s["n"]), f"{100 * s['median_abs_error']:.0f}%",
             f"{100 * s['p90_abs_error']:.0f}%", f"{100 * s['median_error']:+.0f}%"] for s in summary]
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * len(head)) + "|"]
        return lines + ["| " + " | ".join(b) + " |" for b in body]
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    return ["  ".join(x[i].ljust(widths[i]) for i in range(len(head))) for x in [head, *body]]


def loso_lines(cal: dict[str, Any] | None, markdown: bool) -> list[str]:
    if cal is None:
        return []
    head = ["", "Leave one source out (each source's rows with the constants fitted without it):", ""]
    fits = serving_loso.fit_lines(cal)
    return [*head, *summary_lines(summarize(cal["loso_rows"]), markdown=markdown), "",
            *([f"- {x.strip()}" for x in fits] if markdown else fits)]


def markdown_section(rows: list[dict[str, Any]], summary: list[dict[str, Any]], cases: list[dict[str, Any]],
                     cal: dict[str, Any] | None = None) -> str:
    sources = sorted({(c["source"], c["as_of"]) for c in cases})
    keys = key_summary(rows)
    out = ["## Serving estimate vs published serving measurements", "",
           (f"`benchmarks/serving_accuracy.py` runs the {len(cases)} published serving measurements of "
           "`benchmarks/serving_cases.yaml` (each with its source, date, engine and version, GPU, tensor-parallel "
           "degree, dtypes, prompt and output lengths and load) through `gpuplan.api.estimate` and compares "
           "output tokens/s, inter-token latency, time to first token and end-to-end time. Rows at maximum load "
           "run at the requests gpuplan's KV cache holds at once (up to the engine's cap); continuous-batching "
           f"rows get a token budget of {CONTINUOUS_TOKEN_BUDGET} per step unless the source states its engine "
           "flags (`engine_flags`: token budget, max_num_seqs, decode attention without a grouped-query kernel). "
           "TensorRT-LLM's rows run as `workload.engine: tensorrt-llm` (its memory pool and defaults; `--all-vllm` "
           "runs them as vLLM, as before issue 29's engines). What each source leaves unstated is listed under "
           "`assumed:` in the cases file."), "",
           "Keys read: " + "; ".join(f"{LABEL[m]} from `{', '.join(k)}`" for m, k in keys.items()) + ".", "",
           *summary_lines(summary, markdown=True), *loso_lines(cal, markdown=True), "",
           "<details><summary>Every row</summary>", "",
           *table_lines(rows, markdown=True), "", "</details>", "", "Sources:", ""]
    out += [f"- {s} (as of {a})" for s, a in sources]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=Path, default=CASES)
    ap.add_argument("--only", default="", help="only the rows whose id starts with this")
    out = ap.add_mutually_exclusive_group()
    out.add_argument("--markdown", action="store_true", help="print a Markdown section for docs/accuracy.md")
    out.add_argument("--json", action="store_true", help="print rows and summary as JSON")
    ap.add_argument("--no-loso", action="store_true", help="skip the leave-one-source-out fit")
    ap.add_argument("--all-vllm", action="store_true", help="run every row as vLLM (before issue 29's engines)")
    args = ap.parse_args(argv)
    global ALL_VLLM
    ALL_VLLM = args.all_vllm
    cases = [c for c in load_cases(args.cases) if c["id"].startswith(args.only)]
    rows = [evaluate(c) for c in cases]
    summary = summarize(rows)
    cal = None if args.no_loso else serving_loso.calibrate(cases, evaluate)
    if args.json:
        print(json.dumps({"rows": rows, "summary": summary, "keys_used": key_summary(rows),
                          "continuous_token_budget": CONTINUOUS_TOKEN_BUDGET,
                          "loso": None if cal is None else {"summary": summarize(cal["loso_rows"]),
                                                            "fit": cal["fit"], "fits": cal["loso_fits"]}},
                         indent=1))
    elif args.markdown:
        print(markdown_section(rows, summary, cases, cal), end="")
    else:
        print("\n".join(table_lines(rows, markdown=False)))
        print()
        print("\n".join(summary_lines(summary, markdown=False)) if summary else "no row could be compared")
        print("\n".join(loso_lines(cal, markdown=False)))
        failed = [r for r in rows if "error" in r]
        if failed:
            print(f"{len(failed)} of {len(rows)} rows failed; the first: {failed[0]['id']}: {failed[0]['error']}")
        print()
        for metric, keys in key_summary(rows).items():
            print(f"{LABEL[metric]} read from: {', '.join(keys)}")
        print(f"assumed: continuous-batching rows prefill {CONTINUOUS_TOKEN_BUDGET} tokens per step; "
              "max-load rows run at the requests gpuplan's KV cache holds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
