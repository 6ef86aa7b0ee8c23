"""Byte, FLOP, time and money units, and the one formatter of each unit that reasons and reports use in
English (report/numbers.py formats numbers in the report's language). No other logic lives here."""

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


HOURS_PER_MONTH = 730.0
TB = 10**12  # drives are sold in decimal TB


def fmt_gib(n_bytes: float, decimals: int = 1) -> str:
    """GPU and host memory in binary units: "12.3 GiB"."""
    return f"{n_bytes / GIB:,.{decimals}f} GiB"


def fmt_ram_gb(n_bytes: float) -> str:
    """Host RAM as DIMMs are sold (binary gigabytes, written GB): "512 GB"."""
    return f"{n_bytes / GIB:,.0f} GB"


def fmt_disk(n_bytes: float, gb_decimals: int = 1) -> str:
    """Disk sizes in decimal units as drives are sold: "3.84 TB" from 1 TB up, "960.0 GB" below."""
    return f"{n_bytes / TB:,.2f} TB" if n_bytes >= TB else f"{n_bytes / 1e9:,.{gb_decimals}f} GB"


def fmt_rate(gb_s: float) -> str:
    """A data rate given in GB/s: "1.25 GB/s", "12.0 MB/s" or "3.1 kB/s"."""
    return (f"{gb_s:,.2f} GB/s" if gb_s >= 0.1 else f"{gb_s * 1e3:,.1f} MB/s" if gb_s >= 1e-4
            else f"{gb_s * 1e6:,.1f} kB/s")


def fmt_hours(hours: float, minutes: bool = True, day: str = "days") -> str:
    """A duration given in hours: minutes under an hour (when `minutes`), hours under two days, then days."""
    if minutes and hours < 1:
        return f"{hours * 60:,.0f} min"
    return f"{hours:,.1f} h" if hours < 48 else f"{hours / 24:,.1f} {day}"


def fmt_usd(amount: float) -> str:
    """US dollars, whole: "$12,345"."""
    return f"${amount:,.0f}"


def fmt_money(amount: float, currency: str) -> str:
    """An amount in its currency, whole: "$12,345" for USD, "12,345 EUR" otherwise."""
    return fmt_usd(amount) if currency == "USD" else f"{amount:,.0f} {currency}"
