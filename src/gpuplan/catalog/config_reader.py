"""Reading one key of a Hugging Face config.json, checked: the type, the sign, the range of a probability.
Every error names the key and the file (catalog/hf_config.py builds the architecture from these reads)."""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any

from gpuplan.errors import InputError, clip

Config = Mapping[str, Any]


class Reader:
    """Reads keys from a config, naming the file and key in errors."""

    def __init__(self, config: Config, source: str) -> None:
        self.config, self.source = config, source

    def get(self, *names: str, default: Any = None, required: bool = False) -> Any:
        for name in names:
            if name in self.config and self.config[name] is not None:
                return self.config[name]
        if required:
            raise InputError(
                [names[0]], "missing from config.json, and the architecture needs it", source=self.source
            )
        return default

    def int(self, *names: str, default: int | None = None, positive: bool = False) -> int:
        """An integer key (the first of `names` present); `positive`: one the architecture divides by."""
        value = self.get(*names, default=default, required=default is None)
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError([self._name(names)], f"must be an integer, got {clip(value)}", source=self.source)
        if value < 0 or (positive and value == 0):
            raise InputError([self._name(names)], f"must be {'greater than 0' if positive else 'at least 0'}, got "
                             f"{value}", source=self.source)
        return value

    def ints(self, name: str, default: list[builtins.int]) -> list[builtins.int]:
        """A list of positive integers (ResNet depths and hidden_sizes, mlp_only_layers)."""
        value = self.get(name, default=default)
        if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                                  for v in value):
            raise InputError([name], f"must be a list of integers, got {clip(value)}", source=self.source)
        return value

    def _name(self, names: tuple[str, ...]) -> str:
        return next((n for n in names if self.config.get(n) is not None), names[0])


def dropout(r: Reader, *names: str) -> float:
    value = r.get(*names, default=0.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise InputError([names[0]], f"must be a probability from 0 to 1, got {clip(value)}", source=r.source)
    return float(value)


#: the suffix of a transformers class name in config.json's `architectures`, and the head it puts on the model
HEAD_SUFFIXES = (("ForCausalLM", "causal-lm"), ("LMHeadModel", "causal-lm"), ("ForMaskedLM", "masked-lm"),
                 ("ForPreTraining", "masked-lm"), ("ForSequenceClassification", "sequence-classification"),
                 ("ForConditionalGeneration", "seq2seq-lm"), ("ForSeq2SeqLM", "seq2seq-lm"),
                 ("ForImageClassification", "image-classification"))


def head_from_architectures(config: Config, source: str = "config.json") -> str | None:
    """The head the first entry of `architectures` names (BertForMaskedLM -> masked-lm), None when the key is absent
    or names a class without one of HEAD_SUFFIXES (a bare BertModel: the kind's default then)."""
    names = config.get("architectures")
    if names is None:
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise InputError(["architectures"], f"must be a list of class names, got {clip(names)}", source=source)
    for name in names[:1]:
        for suffix, head in HEAD_SUFFIXES:
            if name.endswith(suffix):
                return head
    return None


__all__ = ["HEAD_SUFFIXES", "Config", "Reader", "dropout", "head_from_architectures"]
