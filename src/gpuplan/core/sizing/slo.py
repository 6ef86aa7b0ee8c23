"""A service's objectives in force (issue #27: the user's assumptions win): each the project's own where it states
it (workload.slo; target_latency_s as an end-to-end objective), the use case's template (data/serving.toml) for
the rest, scaled to the project's lengths, each with where it comes from. Pure."""

from __future__ import annotations

from gpuplan.schema.project import Workload
from gpuplan.schema.serving import Objectives, ServingData, UseCaseTemplate


def objectives(w: Workload, serving: ServingData) -> Objectives:
    """The objectives in force: each the project's own where it states it (workload.slo; target_latency_s as an
    end-to-end objective), the use case's template for the rest (issue #27: a template never overrides the
    project). The template's end-to-end objective is written for its own lengths and objectives: for a project's,
    it is scaled by what they imply (TTFT + output tokens x ITL), and never asks for less time than the project's
    own TTFT and ITL objectives imply."""
    case = serving.use_cases.get(w.use_case) if w.use_case else None
    slo = w.slo
    own = {"ttft": slo.ttft_s if slo else None, "itl": slo.itl_s if slo else None,
           "e2e": (slo.e2e_s if slo and slo.e2e_s else None) or w.target_latency_s}
    origins = {k: ("slo" if k != "e2e" or (slo and slo.e2e_s) else "target_latency_s")
               for k, v in own.items() if v}
    ttft = own["ttft"] or (_template_ttft(case, w) if case else None)
    itl = own["itl"] or (case.itl_s if case else None)
    e2e = own["e2e"]
    if case is not None:
        origins.update({k: f"use_case {case.id}" for k in ("ttft", "itl") if not own[k]})
        if not own["ttft"] and ttft != case.ttft_s:
            origins["ttft"] = f"use_case {case.id}, scaled to {w.context_length:,} prompt tokens"
        if not e2e:
            e2e, origins["e2e"] = _template_e2e(case, w, ttft or 0.0, itl or 0.0, bool(own["ttft"] or own["itl"]))
    pct = slo.percentile if slo else (case.percentile if case else 90)
    origin = "slo" if slo else ("use_case" if case else ("target_latency_s" if w.target_latency_s else "none"))
    return Objectives(ttft_s=ttft, itl_s=itl, e2e_s=e2e, percentile=pct, origin=origin, origins=origins)


def _template_ttft(case: UseCaseTemplate, w: Workload) -> float:
    """A use case's TTFT objective for the project's prompts: the template's is written for its own prompt length,
    and a prompt's prefill takes time in proportion to its tokens, so a longer prompt gets the template's TTFT x
    the ratio (issue #27: a template's objectives scale with the project's lengths); a shorter one keeps it."""
    prompt = w.context_length or case.prompt_tokens
    return case.ttft_s * max(prompt / case.prompt_tokens, 1.0)


def _template_e2e(case: UseCaseTemplate, w: Workload, ttft: float, itl: float, own: bool) -> tuple[float, str]:
    """A use case's end-to-end objective for the project's output length and the TTFT and ITL objectives in force
    (`own`: the project states one of them), and where it comes from."""
    out = w.output_tokens or case.output_tokens
    implied = ttft + out * itl
    written = case.ttft_s + case.output_tokens * case.itl_s
    e2e = case.e2e_s if implied == written else case.e2e_s * implied / written
    if own:  # a template never makes the project's own objectives stricter than they are
        e2e = max(e2e, implied)
    if e2e == case.e2e_s:
        return e2e, f"use_case {case.id}"
    return e2e, (f"use_case {case.id}, scaled to {out:,} output tokens"
                 + (" and the project's own objectives" if own else ""))


__all__ = ["objectives"]
