"""Speculative decoding settings of a serving project (workload.speculative, issue #29): the method, the tokens drafted
per step and their acceptance. Kept apart from schema/project.py, which imports it into Workload."""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Section(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", allow_inf_nan=False)


class Speculative(_Section):
    """Speculative decoding (issue #29): each engine step drafts `draft_tokens` tokens per decoding request (an
    EAGLE-3 head, the model's own MTP modules, an n-gram lookup of the prompt, or a separate draft model of
    `draft_parameters`), and the target verifies them in one forward pass, keeping the accepted ones and one of its
    own. `acceptance_length`: mean tokens a verification step emits per request (1 + the accepted drafts; vLLM's and
    SGLang's "acceptance length"), or `acceptance_rate`: the chance each drafted token is accepted, given the ones
    before it were (the step then emits (1 - rate^(k+1)) / (1 - rate) tokens); defaults only where a published source
    gives one (docs/serving.md)."""

    method: Literal["eagle3", "mtp", "ngram", "draft"]
    draft_tokens: int | None = Field(None, ge=1, le=16)
    acceptance_length: float | None = Field(None, ge=1, le=17)
    acceptance_rate: float | None = Field(None, ge=0, lt=1)
    draft_parameters: int | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _consistent(self) -> "Speculative":
        if self.acceptance_length is not None and self.acceptance_rate is not None:
            raise ValueError("give acceptance_length or acceptance_rate, not both")
        if (self.acceptance_length is not None and self.draft_tokens is not None
                and self.acceptance_length > self.draft_tokens + 1):
            raise ValueError(f"acceptance_length {self.acceptance_length:g} is more than a step can emit with "
                             f"draft_tokens {self.draft_tokens} ({self.draft_tokens + 1})")
        if self.method == "draft" and self.draft_parameters is None:
            raise ValueError("method draft needs draft_parameters (the draft model's parameter count)")
        if self.method != "draft" and self.draft_parameters is not None:
            raise ValueError(f"draft_parameters applies to method draft, not {self.method}")
        return self


__all__ = ["Speculative"]
