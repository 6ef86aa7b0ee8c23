"""Typed data of gpuplan: pydantic v2 models, frozen, no logic beyond validation.

These modules do not use `from __future__ import annotations`: pydantic would compile and evaluate every field's
annotation from its string when it builds the model's schema (about 2 % of a `gpuplan plan` run), where plain
annotations are already types. A method's return annotation that names its own class is written in quotes."""
