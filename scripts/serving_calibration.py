"""Measure decode step time, prefill time and peak memory of a Llama-class decoder on one NVIDIA GPU, with plain
PyTorch and transformers (no serving engine), for calibrating gpuplan's serving estimate (issue 14, point 6).

The model is built from its config with random weights in bf16 on the GPU (no download): by default the Llama 3
8B config (../shared/hf-configs/llama-3-8b.json when present, else the same values written below), all 32 layers
(16 GB of weights; --layers N keeps the first N). The KV cache is transformers' StaticCache (one fixed tensor per
layer, so a decode step has fixed shapes), falling back to the dynamic cache where a transformers version lacks
a usable StaticCache; the JSON says which ran. Times are CUDA events after warm-up, eager mode (kernel launch
overhead included, no CUDA graphs: what a serving engine removes).

  1. prefill at batch 1 for prompts of 128, 512, 2048 and 8192 tokens (logits of the last token only);
  2. for batch 1, 8, 32, 64, 128 and context 512, 2048: prefill the batch, then decode: 3 warm-up steps and 16
     timed steps (median and mean per step), torch.cuda.max_memory_allocated over the prefill and decode, and
     the bytes the KV cache holds.
A configuration that runs out of memory is recorded as such and the run goes on. Under 5 minutes on one H100 or
H200 (about 1.5 minutes of it is building the model).

  python scripts/serving_calibration.py --out h200-serving.json        # on the GPU machine
  python scripts/serving_calibration.py --dry-run --out dry.json       # CPU, a tiny 2-layer config, seconds
"""

from __future__ import annotations

import argparse
import inspect
import json
import platform
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

SCHEMA_VERSION = 1
ROOT = Path(__file__).resolve().parents[1]
HF_CONFIG = ROOT.parent / "shared" / "hf-configs" / "llama-3-8b.json"
#: meta-llama/Meta-Llama-3-8B config.json (architecture fields), used when ../shared is not beside the repo
LLAMA3_8B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
             "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
             "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 8192,
             "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "hidden_act": "silu", "tie_word_embeddings": False,
             "bos_token_id": 128000, "eos_token_id": 128001, "torch_dtype": "bfloat16"}
TINY = {**LLAMA3_8B, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 256, "bos_token_id": None,
        "eos_token_id": None}
FULL = {"prefill_lengths": [128, 512, 2048, 8192], "batches": [1, 8, 32, 64, 128], "contexts": [512, 2048],
        "warmup": 3, "steps": 16}
DRY = {"prefill_lengths": [8, 16], "batches": [1, 2], "contexts": [16, 32], "warmup": 1, "steps": 2}


class Timer:
    """CUDA events on a GPU, perf_counter on the CPU (dry run)."""

    def __init__(self, torch, cuda: bool) -> None:
        self.torch, self.cuda = torch, cuda

    def time(self, fn) -> float:
        if self.cuda:
            start, end = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1000.0
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0


class Decoder:
    """The model plus the calls that differ between transformers versions (cache class and keyword names)."""

    def __init__(self, torch, transformers, config: dict, device: str, dtype) -> None:
        self.torch, self.device, self.dtype = torch, device, dtype
        self.config = transformers.LlamaConfig(**{k: v for k, v in config.items() if k != "architectures"})
        default = torch.get_default_dtype()
        torch.set_default_dtype(dtype)  # built in bf16 directly: no fp32 copy of the weights on the GPU
        try:
            with torch.device(device):
                self.model = transformers.LlamaForCausalLM(self.config).to(dtype)
        finally:
            torch.set_default_dtype(default)
        self.model.eval()
        params = inspect.signature(self.model.forward).parameters
        self.cache_kw = "cache" if "cache" in params else "past_key_values"
        self.has_cache_position = "cache_position" in inspect.signature(self.model.model.forward).parameters
        self.static_cache = getattr(transformers, "StaticCache", None)
        self.dynamic_cache = transformers.DynamicCache
        self.cache_kind = "static"

    def new_cache(self, batch: int, max_len: int):
        if self.static_cache is not None and self.cache_kind == "static":
            for kwargs in ({"config": self.config, "max_batch_size": batch, "max_cache_len": max_len,
                            "device": self.device, "dtype": self.dtype},
                           {"config": self.config, "max_cache_len": max_len}):
                try:
                    return self.static_cache(**kwargs)
                except TypeError:
                    continue
        self.cache_kind = "dynamic"
        try:
            return self.dynamic_cache(config=self.config)
        except TypeError:
            return self.dynamic_cache()

    def forward(self, ids, start: int, cache):
        n = ids.shape[1]
        pos = self.torch.arange(start, start + n, device=self.device)
        kwargs = {self.cache_kw: cache, "position_ids": pos.unsqueeze(0).expand(ids.shape[0], -1),
                  "use_cache": True, "logits_to_keep": 1}
        if self.has_cache_position:
            kwargs["cache_position"] = pos
        return self.model(input_ids=ids, **kwargs).logits

    def kv_bytes(self, batch: int, tokens: int) -> int:
        c = self.config
        head_dim = c.hidden_size // c.num_attention_heads
        return 2 * c.num_hidden_layers * batch * tokens * c.num_key_value_heads * head_dim * 2  # bf16


def measure_prefill(torch, dec: Decoder, timer: Timer, length: int, reps: int = 2) -> dict:
    ids = torch.randint(0, dec.config.vocab_size, (1, length), device=dec.device)
    times = []
    for _ in range(reps + 1):  # the first is warm-up
        cache = dec.new_cache(1, length)
        times.append(timer.time(lambda cache=cache: dec.forward(ids, 0, cache)))
    return {"prompt_tokens": length, "batch": 1, "prefill_s": statistics.median(times[1:]), "runs_s": times[1:]}


def measure_decode(torch, dec: Decoder, timer: Timer, batch: int, context: int, warmup: int, steps: int,
                   cuda: bool) -> dict:
    row: dict = {"batch": batch, "context": context, "cache": dec.cache_kind}
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        row["allocated_before_bytes"] = torch.cuda.memory_allocated()
    max_len = context + warmup + steps
    cache = dec.new_cache(batch, max_len)
    ids = torch.randint(0, dec.config.vocab_size, (batch, context), device=dec.device)
    row["prefill_s"] = timer.time(lambda: dec.forward(ids, 0, cache))
    token = torch.randint(0, dec.config.vocab_size, (batch, 1), device=dec.device)
    step_times = []
    for i in range(warmup + steps):
        t = timer.time(lambda i=i: dec.forward(token, context + i, cache))
        if i >= warmup:
            step_times.append(t)
    row["cache"] = dec.cache_kind
    row["decode_step_s_median"] = statistics.median(step_times)
    row["decode_step_s_mean"] = statistics.fmean(step_times)
    row["decode_steps_timed"] = len(step_times)
    row["decode_tokens_per_s"] = batch / row["decode_step_s_median"]
    row["kv_cache_bytes_at_end"] = dec.kv_bytes(batch, max_len)
    if cuda:
        torch.cuda.synchronize()
        row["max_memory_allocated_bytes"] = torch.cuda.max_memory_allocated()
        row["max_memory_reserved_bytes"] = torch.cuda.max_memory_reserved()
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="where to write the JSON results")
    ap.add_argument("--dry-run", action="store_true", help="CPU, a tiny 2-layer config: checks every code path")
    ap.add_argument("--layers", type=int, default=None, help="keep only the first N layers of the config")
    ap.add_argument("--config", type=Path, default=None, help="a config.json to use instead of Llama 3 8B")
    args = ap.parse_args(argv)
    try:
        import torch
        import transformers
    except ImportError as exc:
        print(f"serving_calibration: needs torch and transformers ({exc}); pip install torch transformers",
              file=sys.stderr)
        return 2
    cuda = torch.cuda.is_available() and not args.dry_run
    if not cuda and not args.dry_run:
        print("serving_calibration: no CUDA GPU is visible (torch.cuda.is_available() is False). This script "
              "measures a real NVIDIA GPU; run it there, or use --dry-run to check it on the CPU.", file=sys.stderr)
        return 2
    if args.config:
        config = json.loads(args.config.read_text())
    elif args.dry_run:
        config = dict(TINY)
    else:
        config = json.loads(HF_CONFIG.read_text()) if HF_CONFIG.exists() else dict(LLAMA3_8B)
    if args.layers:
        config["num_hidden_layers"] = min(args.layers, config["num_hidden_layers"])
    plan = DRY if args.dry_run else FULL
    device, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    torch.manual_seed(0)
    t0 = time.perf_counter()
    with torch.inference_mode():
        dec = Decoder(torch, transformers, config, device, dtype)
        build_s = time.perf_counter() - t0
        timer = Timer(torch, cuda)
        weights = torch.cuda.memory_allocated() if cuda else sum(p.numel() * p.element_size()
                                                                   for p in dec.model.parameters())
        prefill, decode = [], []
        for length in plan["prefill_lengths"]:
            try:
                prefill.append(measure_prefill(torch, dec, timer, length))
            except torch.cuda.OutOfMemoryError:
                prefill.append({"prompt_tokens": length, "batch": 1, "error": "out of memory"})
        for context in plan["contexts"]:
            for batch in plan["batches"]:
                try:
                    decode.append(measure_decode(torch, dec, timer, batch, context, plan["warmup"], plan["steps"],
                                                 cuda))
                except torch.cuda.OutOfMemoryError:
                    decode.append({"batch": batch, "context": context, "error": "out of memory"})
                    torch.cuda.empty_cache()
                print(f"batch {batch:>4} context {context:>5}: " + (
                    f"{1000 * decode[-1]['decode_step_s_median']:.2f} ms/step" if "error" not in decode[-1]
                    else decode[-1]["error"]), file=sys.stderr)
    result = {
        "schema_version": SCHEMA_VERSION,
        "script": "scripts/serving_calibration.py",
        "dry_run": args.dry_run,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "environment": {"python": platform.python_version(), "torch": torch.__version__,
                        "transformers": transformers.__version__, "cuda": torch.version.cuda,
                        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
                        "device_memory_bytes": torch.cuda.get_device_properties(0).total_memory if cuda else None},
        "model": {"config": config, "dtype": str(dtype).replace("torch.", ""), "weights_bytes": weights,
                  "parameters": sum(p.numel() for p in dec.model.parameters()), "build_s": build_s},
        "method": {"cache": dec.cache_kind, "mode": "eager", "timing": "CUDA events" if cuda else "perf_counter",
                   "warmup_steps": plan["warmup"], "timed_steps": plan["steps"], "logits_to_keep": 1},
        "prefill": prefill,
        "decode": decode,
        "total_s": time.perf_counter() - t0,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print(f"wrote {args.out} ({result['total_s']:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
