"""The audit of a machine for one project (`gpuplan check`), pure: the machine and its matching to the catalog
(machine.py), the host checks (host.py) and the audit itself with its checklist and fixes (checks.py)."""

from gpuplan.core.audit.checks import (
           CHECKLIST,
           Alternative,
           AuditResult,
           audit,
           layout_text,
)
from gpuplan.core.audit.machine import (
           Disk,
           MachineGpu,
           MachineSpec,
           job_gpus,
           layout_for,
           match_gpu,
           on_machine,
)

__all__ = ["CHECKLIST", "Alternative", "AuditResult", "Disk", "MachineGpu", "MachineSpec", "audit", "job_gpus",
           "layout_for", "layout_text", "match_gpu", "on_machine"]
