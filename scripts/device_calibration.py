"""Measure real peak GPU memory and step time of the cases in benchmarks/device_cases.yaml.

Each case is a gpuplan project; this script runs what gpuplan assumes for it (the regime of gpuplan.trace,
docs/tracer.md) on the GPU and records what torch, the caching allocator and NVML report. It imports only the
standard library, torch, transformers, peft, accelerate (optional), yaml and pynvml (optional), so it runs
on a machine without gpuplan. benchmarks/device_accuracy.py compares the JSON it writes with the estimates.

  training:  model from config.json with random weights, built on the GPU in its training dtype (fp32 under
             *-mixed autocast, bf16 for `bf16` and for a LoRA base); LoRA through PEFT (adapters fp32);
             non-reentrant gradient checkpointing; SDPA. Step = forward with labels under autocast, outputs
             to fp32 (accelerate), loss.backward(), clip_grad_norm_(1.0), optimizer.step() (AdamW fused,
             foreach or for-loop as workload.optimizer_implementation says), zero_grad(set_to_none=True).
  inference: model in weights_dtype; prefill of batch x context with use_cache (DynamicCache) and
             logits_to_keep=1, then greedy decoding of output_tokens, one token per step, as generate() does.

  qlora (--qlora, needs bitsandbytes on the GPU machine): a checkpoint of random bf16 weights is written to disk,
             then loaded as transformers does it with BitsAndBytesConfig (NF4, double quantization, bf16 compute;
             the LM head stays 16-bit): the load peak (max_memory_allocated from an empty GPU to the loaded model);
             then PEFT LoRA and fused-AdamW steps on it, once dropping the step's graph as the HF Trainer does and
             once keeping the last step's loss alive as LitGPT's loop does (what bitsandbytes < 0.43.2 turned into
             2x the 4-bit layers' inputs). Each figure with the bitsandbytes version (core/sizing/stack.py).

  python3 scripts/device_calibration.py --out h200.json          # on the GPU machine
  python3 scripts/device_calibration.py --qlora --out h200-qlora.json  # QLoRA step and load peak (bitsandbytes)
  python3 scripts/device_calibration.py --smoke --out smoke.json # every code path on CPU, 2-layer models
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import platform
import statistics
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "benchmarks" / "device_cases.yaml"
SCHEMA_VERSION = 1
GIB = 2**30

# As gpuplan.trace.build (tests check they agree)
DECODERS = {
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3_text",
    "phi", "phi3", "gpt2", "gpt_neox", "falcon", "bloom", "stablelm",
}
SEQ2SEQ = {"t5", "mt5"}
ENCODERS = {"bert", "roberta"}

# gpuplan.schema.project.Workload defaults and the defaults gpuplan's core fills in (tests check they agree)
WORKLOAD_DEFAULTS = {"precision": "bf16-mixed", "optimizer": "adamw", "optimizer_implementation": "fused",
                     "micro_batch_size": 1, "gradient_checkpointing": False, "tf32": False, "attention": "sdpa",
                     "batch_size": 1}
LORA_DEFAULTS = {"rank": 16, "alpha": 32.0, "targets": ["all-linear"]}
TRAIN_SEQ_CAP, INFER_CTX_CAP, OUTPUT_TOKENS_DEFAULT = 2048, 4096, 256  # core/memory.resolve, core/speed
SUPPORTED = {"task": {"pretrain", "full-finetune", "lora", "inference"},
             "precision": {"fp32", "fp16-mixed", "bf16-mixed", "bf16"}, "optimizer": {"adamw", "sgd", "adafactor"},
             "attention": {"sdpa", "eager"}, "weights_dtype": {"fp32", "bf16", "fp16"},
             "kv_cache_dtype": {"bf16", "fp16"}, "stack": {"eager"}}
IGNORED = {"tokens", "epochs", "target_latency_s", "global_batch_size"}  # volume only; checked below
TRAINING_KEYS = {"precision", "optimizer", "optimizer_implementation", "micro_batch_size", "gradient_checkpointing",
                 "tf32", "lora", "sequence_length"}
SMOKE = {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "intermediate": 128, "vocab": 1000, "seq": 64,
         "batch": 2, "output_tokens": 4}


# --------------------------------------------------------------------------- cases
def load_cases(path: Path = CASES) -> tuple[dict, list[dict]]:
    data = yaml.safe_load(path.read_text())
    if data.get("schema_version") != SCHEMA_VERSION:
        raise SystemExit(f"{path}: schema_version {data.get('schema_version')!r}, this script reads {SCHEMA_VERSION}")
    run_defaults = (data.get("defaults") or {}).get("run", {})
    cases = []
    for c in data["cases"]:
        cases.append({**c, "run": {**run_defaults, **(c.get("run") or {})}})
    return data, cases


def resolve_workload(w: dict, config: dict) -> dict:
    """The workload with gpuplan's defaults filled in; refuses what this script cannot run as gpuplan means."""
    out = {**WORKLOAD_DEFAULTS, **w}
    for key, allowed in SUPPORTED.items():
        if key in out and out[key] is not None and out[key] not in allowed:
            raise ValueError(f"workload.{key}={out[key]!r} is not measurable here (allowed: {sorted(allowed)})")
    if out.get("global_batch_size") not in (None, out["micro_batch_size"]):
        raise ValueError("gradient accumulation (global_batch_size) is not measured here")
    for key in ("prefill_tokens", "image_size", "target_length"):
        if out.get(key) is not None:
            raise ValueError(f"workload.{key} is not measured here")
    max_pos = config.get("max_position_embeddings") or config.get("n_positions")
    if out["task"] == "inference":
        out.setdefault("context_length", out.get("sequence_length") or min(max_pos or INFER_CTX_CAP, INFER_CTX_CAP))
        out.setdefault("output_tokens", OUTPUT_TOKENS_DEFAULT)
        out.setdefault("weights_dtype", "bf16")
        out.setdefault("kv_cache_dtype", "fp16" if out["weights_dtype"] == "fp16" else "bf16")
    else:
        out.setdefault("sequence_length", min(max_pos or TRAIN_SEQ_CAP, TRAIN_SEQ_CAP))
        if out["task"] == "lora":
            out["lora"] = {**LORA_DEFAULTS, **(out.get("lora") or {})}
    drop = IGNORED | (TRAINING_KEYS if out["task"] == "inference" else {"batch_size"})
    return {k: v for k, v in out.items() if k not in drop and v is not None}


def shrink_config(cfg: dict) -> dict:
    """A 2-layer, 64-wide version of a config (same model_type and options) for --smoke runs."""
    c = copy.deepcopy(cfg)
    s = SMOKE
    for keys, value in ((("num_hidden_layers", "n_layer", "num_layers"), s["layers"]),
                        (("hidden_size", "n_embd", "d_model"), s["hidden"]),
                        (("num_attention_heads", "n_head", "num_heads"), s["heads"]),
                        (("intermediate_size", "n_inner", "d_ff"), s["intermediate"]), (("vocab_size",), s["vocab"])):
        for k in keys:
            if k in c:
                c[k] = value
    if "num_key_value_heads" in c:
        c["num_key_value_heads"] = (s["kv_heads"] if c["num_key_value_heads"] != c.get("num_attention_heads")
                                    else s["heads"])
    if "head_dim" in c:
        c["head_dim"] = s["hidden"] // s["heads"]
    for k in ("bos_token_id", "eos_token_id", "pad_token_id"):
        c.pop(k, None)
    return c


def smoke_workload(w: dict) -> dict:
    w = dict(w)
    if w["task"] == "inference":
        w.update(batch_size=min(w["batch_size"], SMOKE["batch"]), context_length=SMOKE["seq"],
                 output_tokens=SMOKE["output_tokens"])
    else:
        w.update(micro_batch_size=min(w["micro_batch_size"], SMOKE["batch"]), sequence_length=SMOKE["seq"])
    return w


# --------------------------------------------------------------------------- NVML
class Nvml:
    """Device memory as NVML reports it; every method returns None when NVML is unavailable."""

    def __init__(self) -> None:
        self.nv = self.handle = None
        try:
            import pynvml as nv

            nv.nvmlInit()
            vis = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip()
            self.handle = (nv.nvmlDeviceGetHandleByUUID(vis) if vis.startswith(("GPU-", "MIG-"))
                           else nv.nvmlDeviceGetHandleByIndex(int(vis or 0)))
            self.nv = nv
        except Exception as exc:  # noqa: BLE001 - no driver, no pynvml, CPU machine: NVML left out
            self.error = f"{type(exc).__name__}: {exc}"

    def used(self) -> int | None:
        return int(self.nv.nvmlDeviceGetMemoryInfo(self.handle).used) if self.nv else None

    def info(self) -> dict:
        if not self.nv:
            return {"error": getattr(self, "error", "unavailable")}
        nv, h = self.nv, self.handle
        m = nv.nvmlDeviceGetMemoryInfo(h)
        out = {"driver": _s(nv.nvmlSystemGetDriverVersion()), "name": _s(nv.nvmlDeviceGetName(h)),
               "total_bytes": int(m.total), "used_bytes": int(m.used), "free_bytes": int(m.free)}
        try:
            m2 = nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2)
            out["v2_reserved_bytes"] = int(m2.reserved)
            out["v2_used_bytes"] = int(m2.used)
        except Exception:  # noqa: BLE001 - optional: older drivers and pynvml lack the v2 memory call
            pass
        for key, fn in (("power_limit_w", lambda: nv.nvmlDeviceGetPowerManagementLimit(h) / 1000),
                        ("max_sm_clock_mhz", lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM)),
                        ("cuda_driver_version", lambda: nv.nvmlSystemGetCudaDriverVersion())):
            try:
                out[key] = fn()
            except Exception:  # noqa: BLE001 - optional fields: whatever NVML cannot report is left out
                pass
        return out

    def process_bytes(self) -> int | None:
        """This process's device memory, when NVML can see our pid (not always inside containers)."""
        if not self.nv:
            return None
        try:
            procs = self.nv.nvmlDeviceGetComputeRunningProcesses(self.handle)
        except Exception:  # noqa: BLE001 - NVML cannot list processes here (containers): unknown
            return None
        mine = [p.usedGpuMemory for p in procs if p.pid == os.getpid() and p.usedGpuMemory is not None]
        return int(sum(mine)) if mine else None


def _s(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


# --------------------------------------------------------------------------- torch helpers
class Device:
    """torch calls that only mean something on CUDA; on CPU they return None."""

    def __init__(self, torch, name: str) -> None:
        self.torch, self.name, self.cuda = torch, name, name.startswith("cuda")

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def allocated(self) -> int | None:
        return int(self.torch.cuda.memory_allocated()) if self.cuda else None

    def peak_allocated(self) -> int | None:
        return int(self.torch.cuda.max_memory_allocated()) if self.cuda else None

    def reserved(self) -> int | None:
        return int(self.torch.cuda.memory_reserved()) if self.cuda else None

    def peak_reserved(self) -> int | None:
        return int(self.torch.cuda.max_memory_reserved()) if self.cuda else None

    def reset_peak(self) -> None:
        if self.cuda:
            self.torch.cuda.reset_peak_memory_stats()

    def used(self) -> int | None:
        if not self.cuda:
            return None
        free, total = self.torch.cuda.mem_get_info()
        return int(total - free)

    def stats(self) -> dict:
        if not self.cuda:
            return {}
        s = self.torch.cuda.memory_stats()
        keys = ("num_alloc_retries", "num_ooms", "requested_bytes.all.peak", "active_bytes.all.peak",
                "inactive_split_bytes.all.peak", "segment.all.peak", "num_device_alloc")
        return {k.replace(".", "_"): int(s[k]) for k in keys if k in s}

    def free(self) -> None:
        gc.collect()
        if self.cuda:
            self.torch.cuda.empty_cache()
            self.torch.cuda.reset_peak_memory_stats()


def family(model_type: str) -> str:
    for name, types in (("decoder", DECODERS), ("seq2seq", SEQ2SEQ), ("encoder", ENCODERS)):
        if model_type in types:
            return name
    raise ValueError(f"model_type {model_type!r} is not supported by this script")


def build_model(config: dict, dtype, attention: str, device: str):
    """Random-init model built directly on `device` in `dtype` (as gpuplan.trace.build.make_config/build_model)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoModelForSequenceClassification

    cfg = dict(config)
    model_type = cfg.pop("model_type")
    for k in ("auto_map", "_name_or_path", "transformers_version", "architectures", "torch_dtype", "dtype"):
        cfg.pop(k, None)
    conf = AutoConfig.for_model(model_type, **cfg)
    fam = family(model_type)
    if fam == "seq2seq" and getattr(conf, "decoder_start_token_id", None) is None:
        conf.decoder_start_token_id = conf.pad_token_id or 0
    auto = {"decoder": AutoModelForCausalLM, "seq2seq": AutoModelForSeq2SeqLM,
            "encoder": AutoModelForSequenceClassification}[fam]
    with torch.device(device):
        try:
            model = auto.from_config(conf, dtype=dtype, attn_implementation=attention)
        except TypeError:  # transformers < 4.56 spells it torch_dtype
            model = auto.from_config(conf, torch_dtype=dtype, attn_implementation=attention)
    return model, fam


def apply_lora(model, lora: dict):
    from peft import LoraConfig, get_peft_model

    targets = lora["targets"]
    target_modules = "all-linear" if "all-linear" in targets else list(targets)
    cfg = LoraConfig(r=int(lora["rank"]), lora_alpha=float(lora["alpha"]), target_modules=target_modules,
                     lora_dropout=0.0, bias="none")
    return get_peft_model(model, cfg)


def make_optimizer(w: dict, params):
    import torch

    if w["optimizer"] == "adamw":
        impl = w["optimizer_implementation"]
        return torch.optim.AdamW(params, lr=1e-4, fused=impl == "fused" or None,
                                 foreach={"foreach": True, "for-loop": False}.get(impl))
    if w["optimizer"] == "sgd":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=w["optimizer_implementation"] != "for-loop")
    from transformers.optimization import Adafactor

    return Adafactor(params, lr=1e-3, scale_parameter=False, relative_step=False, warmup_init=False)


def _to_fp32(out):
    try:
        from accelerate.utils import convert_to_fp32
    except ImportError:  # what accelerate does: every 16-bit floating tensor of the outputs to fp32
        import torch

        return {k: (v.float() if isinstance(v, torch.Tensor) and v.dtype in (torch.float16, torch.bfloat16) else v)
                for k, v in out.items()}
    return convert_to_fp32(out)


def count(model) -> tuple[int, int]:
    params = list(model.parameters())
    return sum(p.numel() for p in params), sum(p.numel() for p in params if p.requires_grad)


# --------------------------------------------------------------------------- cases
def run_training(model, fam: str, w: dict, run: dict, dev: Device, nvml: Nvml) -> dict:
    import torch

    amp = {"fp16-mixed": torch.float16, "bf16-mixed": torch.bfloat16}.get(w["precision"])
    b, s = w["micro_batch_size"], w["sequence_length"]
    vocab = model.config.vocab_size
    num_labels = int(getattr(model.config, "num_labels", 2) or 2)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = make_optimizer(w, trainable)
    dev.sync()
    mem = {"after_setup_allocated_bytes": dev.allocated(), "after_setup_reserved_bytes": dev.reserved()}
    last_loss = []

    def step() -> None:
        ids = torch.randint(0, vocab, (b, s), device=dev.name)
        batch = {"input_ids": ids}
        if fam == "decoder":
            batch["labels"] = ids.clone()
        elif fam == "encoder":
            batch["labels"] = torch.randint(0, num_labels, (b,), device=dev.name)
        else:
            batch["labels"] = torch.randint(0, vocab, (b, s), device=dev.name)
        if amp is None:
            loss = model(**batch)["loss"]
        else:
            with torch.autocast(dev.name.split(":")[0], dtype=amp):
                out = model(**batch)
            loss = _to_fp32(out)["loss"]
            del out
        del batch, ids
        loss.backward()
        last_loss[:] = [loss.detach()]
        del loss
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    model.train()
    for _ in range(run["warmup_steps"]):
        step()
    dev.sync()
    mem["first_steps_peak_allocated_bytes"] = dev.peak_allocated()
    mem["after_step_allocated_bytes"] = dev.allocated()  # weights + optimizer states (+ adapters)
    dev.reset_peak()
    times, nvml_peak, torch_used_peak = [], 0, 0
    for _ in range(run["timed_steps"]):
        dev.sync()
        t0 = time.perf_counter()
        step()
        dev.sync()
        times.append(time.perf_counter() - t0)
        nvml_peak = max(nvml_peak, nvml.used() or 0)
        torch_used_peak = max(torch_used_peak, dev.used() or 0)
    mem.update(peak_allocated_bytes=dev.peak_allocated(), peak_reserved_bytes=dev.peak_reserved(),
               nvml_used_peak_bytes=nvml_peak or None, device_used_peak_bytes=torch_used_peak or None,
               nvml_process_bytes=nvml.process_bytes(), allocator=dev.stats())
    med = statistics.median(times)
    timing = {"step_seconds": times, "step_seconds_median": med, "step_seconds_min": min(times),
              "tokens_per_step": b * s, "tokens_per_s": b * s / med,
              "loss": float(last_loss[0]) if last_loss else None}
    return {"memory": mem, "timing": timing}


def _cache_kwarg(model) -> str:
    import inspect

    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"  # transformers >= 5.2x renamed it


def _cache_of(out):
    cache = out.get("cache", None)
    return cache if cache is not None else out.get("past_key_values", None)


def _tensor_bytes(obj, depth: int = 4, seen: set | None = None) -> int:
    """Distinct storage bytes of the tensors inside a cache object."""
    import torch

    seen = set() if seen is None else seen
    if depth < 0 or id(obj) in seen:
        return 0
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        key = ("storage", obj.untyped_storage().data_ptr())
        if key in seen:
            return 0
        seen.add(key)
        return obj.untyped_storage().nbytes()
    items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else (
        vars(obj).values() if hasattr(obj, "__dict__") and not isinstance(obj, torch.nn.Module) else ())
    return sum(_tensor_bytes(o, depth - 1, seen) for o in items)


def run_compiled_decode(model, w: dict, run: dict, dev: Device, nvml: Nvml) -> dict:
    """Decoding as a serving engine runs it: one static KV cache, generate()'s step compiled with
    mode='reduce-overhead' (CUDA graphs). A decoding step = (generate(k) - generate(1)) / (k - 1), both over
    the same cache, so the prefill cancels out."""
    import inspect

    import torch
    from transformers import StaticCache

    b, ctx, n_out = w["batch_size"], w["context_length"], w["output_tokens"]
    ids = torch.randint(0, model.config.vocab_size, (b, ctx), device=dev.name)
    want = {"config": model.config, "max_batch_size": b, "max_cache_len": ctx + n_out + 8, "device": dev.name,
            "dtype": model.dtype}
    accepted = inspect.signature(StaticCache.__init__).parameters
    cache = StaticCache(**{k: v for k, v in want.items() if k in accepted})
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0

    def generate(k: int) -> float:
        cache.reset()
        dev.sync()
        t0 = time.perf_counter()
        model.generate(ids, attention_mask=torch.ones_like(ids), past_key_values=cache, max_new_tokens=k,
                       min_new_tokens=k, do_sample=False)
        dev.sync()
        return time.perf_counter() - t0

    warm = [generate(n_out) for _ in range(run["warmup_steps"])]  # the first compiles
    dev.reset_peak()
    full = [generate(n_out) for _ in range(run["timed_steps"])]
    one = [generate(1) for _ in range(run["timed_steps"])]
    step = (statistics.median(full) - statistics.median(one)) / (n_out - 1)
    mem = {"peak_allocated_bytes": dev.peak_allocated(), "peak_reserved_bytes": dev.peak_reserved(),
           "nvml_used_peak_bytes": nvml.used(), "kv_cache_final_bytes": _tensor_bytes(cache)}
    compiled = any("compile" in k for k in vars(model)) or hasattr(model, "_compiled_call")
    timing = {"decode": "static-compiled", "compiled": compiled, "warmup_seconds": warm, "generate_full_seconds": full,
              "generate_one_seconds": one, "decode_step_seconds_median": step, "decode_steps": n_out,
              "batch_prefill_seconds_median": statistics.median(one),
              "decode_tokens_per_s_per_request": 1.0 / step, "aggregate_tokens_per_s": b / step}
    return {"memory": mem, "timing": timing}


def run_inference(model, fam: str, w: dict, run: dict, dev: Device, nvml: Nvml) -> dict:
    import inspect

    import torch

    if fam != "decoder":
        raise ValueError("inference is measured for decoders only")
    if run.get("decode") == "static-compiled":
        with torch.no_grad():
            return run_compiled_decode(model, w, run, dev, nvml)
    b, ctx, n_out = w["batch_size"], w["context_length"], w["output_tokens"]
    vocab = model.config.vocab_size
    cache_kw = _cache_kwarg(model)
    keep = {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}
    model.eval()

    def prefill(n: int):
        ids = torch.randint(0, vocab, (n, ctx), device=dev.name)
        out = model(input_ids=ids, use_cache=True, **keep)
        return out.logits[:, -1:], _cache_of(out)

    def decode_step(logits, cache):
        nxt = logits[:, -1:].argmax(-1)
        out = model(input_ids=nxt, use_cache=True, **{cache_kw: cache})
        return out.logits[:, -1:], _cache_of(out)

    def timed(fn, *args):
        dev.sync()
        t0 = time.perf_counter()
        r = fn(*args)
        dev.sync()
        return time.perf_counter() - t0, r

    mem: dict = {}
    with torch.no_grad():
        dev.sync()
        mem["after_setup_allocated_bytes"] = dev.allocated()
        for _ in range(run["warmup_steps"]):
            lg, cache = prefill(b)
            for _ in range(min(2, n_out)):
                lg, cache = decode_step(lg, cache)
            del lg, cache
            lg, cache = prefill(1)
            del lg, cache
        dev.sync()
        dev.reset_peak()
        prefill_s, lg, cache = [], None, None
        for i in range(run["timed_steps"]):
            lg = cache = None  # the previous batch's cache goes before the next prefill
            t, (lg, cache) = timed(prefill, b)
            prefill_s.append(t)
            if i == 0:
                mem.update(prefill_peak_allocated_bytes=dev.peak_allocated(),
                           prefill_peak_reserved_bytes=dev.peak_reserved(), prefill_nvml_used_bytes=nvml.used(),
                           prefill_device_used_bytes=dev.used(), kv_cache_prefill_bytes=_tensor_bytes(cache))
        step_s = []
        for _ in range(n_out):
            t, (lg, cache) = timed(decode_step, lg, cache)
            step_s.append(t)
        mem.update(kv_cache_final_bytes=_tensor_bytes(cache), peak_allocated_bytes=dev.peak_allocated(),
                   peak_reserved_bytes=dev.peak_reserved(), nvml_used_peak_bytes=nvml.used(),
                   device_used_peak_bytes=dev.used(), nvml_process_bytes=nvml.process_bytes(), allocator=dev.stats())
        lg = cache = None
        one_s = []
        for _ in range(run["timed_steps"]):
            t, (lg1, cache1) = timed(prefill, 1)
            one_s.append(t)
            del lg1, cache1
    step_med = statistics.median(step_s)
    timing = {"batch_prefill_seconds": prefill_s, "batch_prefill_seconds_median": statistics.median(prefill_s),
              "prefill_one_seconds": one_s, "prefill_one_seconds_median": statistics.median(one_s),
              "decode_step_seconds_mean": statistics.fmean(step_s), "decode_step_seconds_median": step_med,
              "decode_step_seconds_first": step_s[0], "decode_step_seconds_last": step_s[-1],
              "decode_steps": n_out,
              # as gpuplan reports them: a request's own prefill + one decoding step of the batch; decoding
              # tokens/s of one request and of the batch over all output tokens (context grows as they go)
              "time_to_first_token_s": statistics.median(one_s) + step_med,
              "decode_tokens_per_s_per_request": n_out / sum(step_s),
              "aggregate_tokens_per_s": b * n_out / sum(step_s)}
    return {"memory": mem, "timing": timing}


def run_case(case: dict, case_dir: Path, dev: Device, nvml: Nvml, smoke: bool) -> dict:
    import torch

    project = case["project"]
    config = json.loads((case_dir / project["model"]["hf_config"]).read_text())
    w = resolve_workload(project["workload"], config)
    entry: dict = {}
    if smoke:
        config = shrink_config(config)
        w = smoke_workload(w)
        entry["config_run"] = config
    entry["workload_run"] = w
    torch.manual_seed(0)
    if w.get("tf32"):
        torch.backends.cuda.matmul.allow_tf32 = True
    training = w["task"] != "inference"
    if training:
        lora = w["task"] == "lora"
        # as gpuplan.trace: a LoRA base is bf16 unless fp32; full training keeps fp32 weights under autocast
        dtype = torch.bfloat16 if (w["precision"] == "bf16" or (lora and w["precision"] != "fp32")) else torch.float32
    else:
        dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[w["weights_dtype"]]
    t0 = time.perf_counter()
    model, fam = build_model(config, dtype, w["attention"], dev.name)
    if training and w["task"] == "lora":
        model = apply_lora(model, w["lora"])
    if training and w["gradient_checkpointing"]:
        enable = getattr(model, "activation_checkpointing_enable", None)  # transformers >= 5.2x name
        if enable is not None:
            enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if w["task"] == "lora":
            model.enable_input_require_grads()
    if not training:
        model.requires_grad_(False)
    dev.sync()
    total, trainable = count(model)
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    entry["model"] = {"class": type(base).__name__, "attention": getattr(base.config, "_attn_implementation", None),
                      "dtype": str(dtype).replace("torch.", ""), "parameters": total,
                      "trainable_parameters": trainable,
                      "trainable_dtypes": sorted({str(p.dtype).replace("torch.", "")
                                                  for p in model.parameters() if p.requires_grad}),
                      "weights_allocated_bytes": dev.allocated()}
    entry["build_seconds"] = time.perf_counter() - t0
    result = (run_training if training else run_inference)(model, fam, w, case["run"], dev, nvml)
    entry.update(result)
    return entry


# --------------------------------------------------------------------------- QLoRA and the load peak
#: (id, config in tests/fixtures/hf-configs, layers (None: all), micro-batch, sequence, LoRA rank, targets): the
#: LitGPT config-hub shapes (benchmarks/memory_cases.yaml) and the built-in example's
QLORA_CASES = [
    ("qlora-llama3-8b-qv-b2-s512", "llama-3-8b", None, 2, 512, 32, ["q_proj", "v_proj"]),
    ("qlora-llama3-8b-all-b1-s2048", "llama-3-8b", None, 1, 2048, 16, "all-linear"),
    ("qlora-mistral-7b-qv-b2-s512", "mistral-7b", None, 2, 512, 32, ["q_proj", "v_proj"]),
]


def run_qlora_case(case: tuple, dev: Device, tmp: Path) -> dict:
    """Load peak and step peaks of one QLoRA case (bitsandbytes NF4 + PEFT), on an empty GPU."""
    import bitsandbytes
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    cid, name, layers, b, s, rank, targets = case
    config = json.loads((ROOT / "tests" / "fixtures" / "hf-configs" / f"{name}.json").read_text())
    if layers:
        config["num_hidden_layers"] = layers
    ckpt = tmp / cid
    if not (ckpt / "config.json").exists():  # random bf16 weights, written once, on the CPU
        model, _ = build_model(config, torch.bfloat16, "sdpa", "cpu")
        model.save_pretrained(ckpt, safe_serialization=True)
        del model
        gc.collect()
    dev.free()
    dev.reset_peak()
    base = dev.allocated()
    quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                               bnb_4bit_compute_dtype=torch.bfloat16)
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(ckpt, quantization_config=quant, dtype=torch.bfloat16,
                                                 device_map={"": dev.name}, attn_implementation="sdpa")
    dev.sync()
    entry = {"id": cid, "bitsandbytes": bitsandbytes.__version__, "load_seconds": time.perf_counter() - t0,
             "load_peak_allocated_bytes": dev.peak_allocated() - base,
             "loaded_allocated_bytes": dev.allocated() - base, "micro_batch_size": b, "sequence_length": s,
             "lora": {"rank": rank, "targets": targets}}
    model = get_peft_model(model, LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=targets, lora_dropout=0.0,
                                             bias="none"))
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=1e-4, fused=True)
    vocab = model.config.vocab_size
    for keep in (False, True):  # HF Trainer frees the step's graph; LitGPT keeps `loss` until the next forward
        kept = None
        dev.reset_peak()
        for _ in range(3):
            ids = torch.randint(0, vocab, (b, s), device=dev.name)
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            kept = loss if keep else None
            del loss
        dev.sync()
        entry["step_peak_allocated_bytes_keep_graph" if keep else "step_peak_allocated_bytes"] = \
            dev.peak_allocated() - base
        del kept
    del model, opt, trainable
    dev.free()
    return entry


def run_qlora(out: Path, dev: Device, budget_s: float) -> int:
    """--qlora: the QLORA_CASES on the GPU, into `out` (JSON)."""
    try:
        import bitsandbytes  # noqa: F401
    except ImportError:
        print("--qlora needs bitsandbytes (pip install bitsandbytes) on the GPU machine", file=sys.stderr)
        return 2
    import tempfile

    t_start = time.perf_counter()
    doc = {"schema_version": SCHEMA_VERSION, "kind": "gpuplan-qlora-calibration",
           "started_at": datetime.now(UTC).isoformat(timespec="seconds"), "cases": []}
    with tempfile.TemporaryDirectory() as tmp:
        for case in QLORA_CASES:
            if time.perf_counter() - t_start > budget_s:
                doc["cases"].append({"id": case[0], "status": "skipped"})
                continue
            try:
                doc["cases"].append({**run_qlora_case(case, dev, Path(tmp)), "status": "ok"})
            except Exception as exc:  # noqa: BLE001 - OOM, API drift: record and go on
                doc["cases"].append({"id": case[0], "status": "error", "error": f"{type(exc).__name__}: {exc}"[:2000]})
                dev.free()
            write(out, doc)
            print(f"[{time.perf_counter() - t_start:6.1f}s] {doc['cases'][-1]}", flush=True)
    doc["seconds"] = time.perf_counter() - t_start
    write(out, doc)
    return 0


# --------------------------------------------------------------------------- run
def environment(torch, dev: Device, nvml: Nvml) -> dict:
    import transformers

    env = {"python": platform.python_version(), "platform": platform.platform(), "torch": torch.__version__,
           "torch_cuda": torch.version.cuda, "transformers": transformers.__version__, "device": dev.name,
           "env": {k: os.environ.get(k) for k in ("CUDA_MODULE_LOADING", "PYTORCH_CUDA_ALLOC_CONF",
                                                  "CUDA_VISIBLE_DEVICES", "CUBLAS_WORKSPACE_CONFIG")}}
    for mod in ("peft", "accelerate"):
        try:
            env[mod] = __import__(mod).__version__
        except ImportError:
            env[mod] = None
    if dev.cuda:
        p = torch.cuda.get_device_properties(0)
        env.update(gpu_name=p.name, gpu_total_memory_bytes=int(p.total_memory),
                   capability=f"{p.major}.{p.minor}", multiprocessors=p.multi_processor_count,
                   cudnn=torch.backends.cudnn.version())
    env["nvml"] = nvml.info()
    return env


def cuda_context(torch, dev: Device, nvml: Nvml, before: int | None) -> dict:
    """NVML used before CUDA is touched, after context creation, after a bf16 matmul (cuBLAS loaded)."""
    if not dev.cuda:
        return {"nvml_used_before_init_bytes": before}
    torch.cuda.init()
    x = torch.empty(1, device=dev.name)
    torch.cuda.synchronize()
    after_init, reserved_init = nvml.used(), dev.reserved()
    a = torch.randn(4096, 4096, device=dev.name, dtype=torch.bfloat16)
    c = a @ a
    torch.cuda.synchronize()
    after_mm, reserved_mm, live_mm = nvml.used(), dev.reserved(), dev.allocated()
    del x, a, c
    out = {"nvml_used_before_init_bytes": before, "nvml_used_after_init_bytes": after_init,
           "torch_reserved_after_init_bytes": reserved_init, "nvml_used_after_matmul_bytes": after_mm,
           "torch_reserved_after_matmul_bytes": reserved_mm, "torch_allocated_after_matmul_bytes": live_mm}
    if before is not None and after_init is not None:
        out["context_bytes"] = after_init - before - reserved_init
        out["context_with_cublas_bytes"] = after_mm - before - reserved_mm
    # cuBLAS workspaces are live allocations of the caching allocator: allocated beyond x, a and c
    out["cublas_workspace_in_reserved_bytes"] = live_mm - 512 - 2 * 4096 * 4096 * 2
    return out


def write(path: Path, doc: dict) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    os.replace(tmp, path)


def gib(v) -> str:
    return "n/a" if v is None else f"{v / GIB:.2f}"


def summary_line(entry: dict) -> str:
    m, t = entry.get("memory", {}), entry.get("timing", {})
    if "step_seconds_median" in t:
        return (f"peak {gib(m.get('peak_allocated_bytes'))} GiB, reserved {gib(m.get('peak_reserved_bytes'))} GiB, "
                f"nvml {gib(m.get('nvml_used_peak_bytes'))} GiB, step {t['step_seconds_median']:.3f} s, "
                f"{t['tokens_per_s']:,.0f} tok/s")
    if "decode_step_seconds_median" in t:
        return (f"prefill peak {gib(m.get('prefill_peak_allocated_bytes'))} GiB, "
                f"peak {gib(m.get('peak_allocated_bytes'))}"
                f" GiB, prefill {t['batch_prefill_seconds_median']:.3f} s, "
                f"decode {t['decode_tokens_per_s_per_request']:.1f} tok/s/request")
    return ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("device_calibration.json"))
    ap.add_argument("--cases", type=Path, default=CASES)
    ap.add_argument("--only", action="append", default=[], help="run only this case id (repeatable)")
    ap.add_argument("--smoke", action="store_true", help="2-layer models, tiny shapes, 1 step, on --device (cpu)")
    ap.add_argument("--device", default=None, help="cuda (default) or cpu (default with --smoke)")
    ap.add_argument("--time-budget-s", type=float, default=330.0, help="skip remaining cases after this long")
    ap.add_argument("--qlora", action="store_true", help="QLoRA step and load peak with bitsandbytes (GPU only)")
    a = ap.parse_args(argv)
    t_start = time.perf_counter()
    nvml = Nvml()
    before = nvml.used()  # before torch touches CUDA
    import torch

    device = a.device or ("cpu" if a.smoke else "cuda")
    if device.startswith("cuda") and not torch.cuda.is_available():
        print("CUDA is not available: run with --smoke (CPU) or on the GPU machine", file=sys.stderr)
        return 2
    dev = Device(torch, device)
    if a.qlora:
        if not dev.cuda:
            print("--qlora runs bitsandbytes' CUDA kernels: run it on the GPU machine", file=sys.stderr)
            return 2
        return run_qlora(a.out, dev, a.time_budget_s)
    meta, cases = load_cases(a.cases)
    if a.only:
        unknown = sorted(set(a.only) - {c["id"] for c in cases})
        if unknown:
            print(f"--only: no case {', '.join(unknown)} in {a.cases}", file=sys.stderr)
            return 2
        cases = [c for c in cases if c["id"] in a.only]
    if a.smoke:
        for c in cases:
            c["run"] = {**c["run"], "warmup_steps": 1, "timed_steps": 1}
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
    except ImportError:
        pass
    doc = {"schema_version": SCHEMA_VERSION, "kind": "gpuplan-device-calibration",
           "mode": "smoke" if a.smoke else "device",
           "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
           "cases_file": (str(a.cases.resolve().relative_to(ROOT)) if a.cases.resolve().is_relative_to(ROOT)
                          else str(a.cases)),
           "gpu_catalog_id": meta.get("gpu")}
    doc["cuda_context"] = cuda_context(torch, dev, nvml, before)
    dev.free()
    doc["environment"] = environment(torch, dev, nvml)
    doc["cases"] = []
    write(a.out, doc)
    env = doc["environment"]
    print(f"[{time.perf_counter() - t_start:6.1f}s] {env.get('gpu_name', device)} torch {env['torch']} "
          f"cuda {env['torch_cuda']} transformers {env['transformers']} peft {env['peft']}; "
          f"context {gib(doc['cuda_context'].get('context_with_cublas_bytes'))} GiB", flush=True)
    for i, case in enumerate(cases, 1):
        elapsed = time.perf_counter() - t_start
        entry: dict = {"id": case["id"], "project": case["project"], "run": case["run"],
                       "at_start": {"allocated_bytes": dev.allocated(), "reserved_bytes": dev.reserved(),
                                    "nvml_used_bytes": nvml.used()}}
        if elapsed > a.time_budget_s:
            entry.update(status="skipped", error=f"time budget {a.time_budget_s:.0f} s spent ({elapsed:.0f} s)")
        else:
            t0 = time.perf_counter()
            try:
                entry.update(run_case(case, a.cases.parent, dev, nvml, a.smoke))
                entry["status"], entry["error"] = "ok", None
            except Exception as exc:  # noqa: BLE001 - OOM, API drift: record and go on
                entry.update(status="error", error=f"{type(exc).__name__}: {str(exc)[:2000]}",
                             traceback=traceback.format_exc(limit=8)[-4000:])
                if dev.cuda:
                    entry.setdefault("memory", {})["at_error"] = {
                        "peak_allocated_bytes": dev.peak_allocated(), "peak_reserved_bytes": dev.peak_reserved(),
                        "nvml_used_bytes": nvml.used()}
            entry["seconds"] = time.perf_counter() - t0
        dev.free()  # the exception and the model are gone by now
        entry["after_free"] = {"allocated_bytes": dev.allocated(), "reserved_bytes": dev.reserved(),
                               "nvml_used_bytes": nvml.used()}
        doc["cases"].append(entry)
        write(a.out, doc)
        msg = summary_line(entry) if entry["status"] == "ok" else entry["error"]
        print(f"[{time.perf_counter() - t_start:6.1f}s] {i}/{len(cases)} {case['id']}: {entry['status']} {msg}",
              flush=True)
    doc["cuda_context"]["nvml_used_after_run_bytes"] = nvml.used()
    doc["cuda_context"]["torch_reserved_after_run_bytes"] = dev.reserved()
    doc["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    doc["seconds"] = time.perf_counter() - t_start
    write(a.out, doc)
    ok = sum(c["status"] == "ok" for c in doc["cases"])
    print(f"[{doc['seconds']:6.1f}s] done: {ok}/{len(doc['cases'])} ok -> {a.out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
