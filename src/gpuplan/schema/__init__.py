"""Typed data of gpuplan: pydantic v2 models, frozen, no logic beyond validation."""
