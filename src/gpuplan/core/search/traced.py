"""The search for a traced model (`model.trace`): each GPU type x 1-8 data-parallel GPUs in one server, from the
trace's measured memory and FLOPs (core/sizing/traced.py). Pure."""

from __future__ import annotations

from gpuplan.core.search.explore import SearchInputs, SearchOutput, memory_headroom
from gpuplan.core.search.ranking import over_budget, rank, same_cost
from gpuplan.core.search.shapes import PER_SERVER, allowed_gpus, max_gpus_per_server
from gpuplan.core.sizing.traced import (
    traced_device_bytes,
    traced_memory_out,
    traced_step_seconds,
)
from gpuplan.schema.plan import (
    Candidate,
    CandidateLayout,
    PlanStats,
    Rejected,
    ServerNeeds,
)
from gpuplan.schema.trace import CustomTraceResult
from gpuplan.units import GIB, HOURS_PER_MONTH


def search_traced(inp: SearchInputs, tr: CustomTraceResult, objective: str) -> SearchOutput[Candidate]:
    """The search for a traced model (`model.trace`): each GPU type x 1-8 data-parallel GPUs in one server, from
    the trace's measured memory and FLOPs (core/sizing/traced.py). Time is for 1,000 batches of the factory's inputs,
    spread over the GPUs."""
    t0 = inp.clock()
    proj = inp.project
    cons = proj.constraints
    headroom = memory_headroom(proj)
    rejected: list[Rejected] = []
    gpus = allowed_gpus(proj, inp.catalog, rejected)
    budget = proj.goals.budget
    horizon = proj.growth.horizon_months
    deadline_h = proj.goals.deadline_days * 24 if proj.goals.deadline_days else None
    modality = proj.data.modality
    dataset_bytes = proj.data.size_gb * 1e9 if proj.data.size_gb else 0.0
    cands: list[Candidate] = []
    evaluated = 0
    for gpu in gpus:
        max_ps = max_gpus_per_server(gpu, inp.catalog)
        if cons.max_gpus_per_server:
            max_ps = min(max_ps, cons.max_gpus_per_server)
        cap = int(gpu.memory_gib * GIB)
        usable = int(cap * (1 - headroom))
        for ps in (p for p in PER_SERVER if p <= max_ps and (tr.training or p == 1)):
            evaluated += 1
            reserved, device = traced_device_bytes(tr, ps, inp.overheads)
            if device > usable:
                rejected.append(Rejected(gpu_id=gpu.id, gpus_per_server=ps, servers=1, code="no-fit",
                                         reason=f"does not fit: the traced step needs {device / GIB:,.1f} GiB per GPU, "
                                                f"{usable / GIB:,.1f} GiB usable"))
                break  # more data-parallel GPUs only add to each GPU's memory
            step, parts = traced_step_seconds(tr, gpu, ps, inp.speed, ps)
            needs = ServerNeeds(gpu_id=gpu.id, gpus_per_server=ps, servers=1, modality=modality,
                                purpose=proj.goals.purpose,
                                dataset_bytes=dataset_bytes, weights_bytes=tr.parameters_bytes,
                                checkpoint_bytes=tr.parameters_bytes + tr.optimizer_bytes)
            spec, why = inp.build_server(needs)
            if spec is None:
                rejected.append(Rejected(gpu_id=gpu.id, gpus_per_server=ps, servers=1, code="no-server",
                                         reason=why or "no server"))
                continue
            hours = 1000 * step / ps / 3600
            rate = inp.rent_per_gpu_hour.get(gpu.id)
            rent = None if rate is None else (rate * ps * hours if tr.training
                                              else rate * ps * HOURS_PER_MONTH * horizon)
            options = [(v, k) for v, k in ((spec.price, "buy"), (rent, "rent")) if v is not None]
            cost, basis = min(options) if options else (None, None)
            why = over_budget(cost, basis, budget, horizon, tr.training, len(options) == 2)
            if why is not None:
                rejected.append(Rejected(gpu_id=gpu.id, gpus_per_server=ps, servers=1,
                                         code="no-price" if cost is None else "over-budget", reason=why,
                                         cost=cost))
                continue
            memory = traced_memory_out(tr, reserved, device, cap)
            reasons = [f"traced step: {tr.peak_bytes / GIB:,.2f} GiB tensor peak, {device / GIB:,.2f} GiB on the "
                       f"device of {cap / GIB:,.1f}; {step * 1e3:,.1f} ms per step ("
                       + ", ".join(f"{k} {v * 1e3:,.1f}" for k, v in parts.items() if v > 0) + " ms)",
                       f"{ps} data-parallel GPU(s), each running the factory's batch; time is for 1,000 batches",
                       "planned growth is not applied to a traced model: trace the grown model to check it"]
            if deadline_h is not None and tr.training and hours > deadline_h:
                reasons.append(f"1,000 batches take {hours:,.1f} h; the deadline applies to the whole run")
            cands.append(Candidate(
                gpu_id=gpu.id, gpu_name=gpu.name, gpus_per_server=ps, servers=1,
                layout=CandidateLayout(dp=ps), memory=memory, server=spec,
                fits=True, fits_with_growth=True, grown_device_bytes=device,
                storage_need_bytes=dataset_bytes + inp.checkpoints_kept * (tr.parameters_bytes + tr.optimizer_bytes),
                price=spec.price, rent=rent, cost=cost, cost_basis=basis, currency=inp.currency,
                time_hours=hours if tr.training else None, request_latency_s=None if tr.training else step,
                score=0.0, reasons=reasons))
    same = same_cost(budget, horizon)
    stats = PlanStats(candidates_evaluated=evaluated, search_seconds=inp.clock() - t0, gpu_types=len(gpus),
                      same_cost=same)
    # no growth view: the planned growth is not applied to a traced model either (trace the grown model)
    ranked = [c.model_copy(update={"score": score, "pareto": front}) for c, score, front in
              rank(cands, objective, same)]
    return SearchOutput(ranked, rejected, stats, [], ranked, lambda c: c)


__all__ = ["search_traced"]
