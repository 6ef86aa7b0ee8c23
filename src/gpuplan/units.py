"""Byte, FLOP and time units. Constants only: no other logic lives here."""

KIB = 2**10
MIB = 2**20
GIB = 2**30
TIB = 2**40
KB = 10**3
MB = 10**6
GB = 10**9

#: Bytes per element of the dtypes gpuplan speaks of. NF4/int4 are half a byte.
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "tf32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    "nf4": 0.5,
}


def gib(n_bytes: float) -> float:
    """Bytes to GiB (2**30)."""
    return n_bytes / GIB
