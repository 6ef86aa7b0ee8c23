"""Launch configurations that realise one candidate of a plan (`gpuplan export`), pure: the dispatcher
(targets.py), one module per launcher (accelerate.py, deepspeed.py, torchrun.py, skypilot.py) and what they share
(common.py)."""

from gpuplan.core.export.targets import (
                                         ACCELERATE_PRECISION,
                                         FILENAMES,
                                         ROCM_GPUS,
                                         SKYPILOT_ACCELERATORS,
                                         TARGETS,
                                         Target,
                                         export,
)

__all__ = ["ACCELERATE_PRECISION", "FILENAMES", "ROCM_GPUS", "SKYPILOT_ACCELERATORS", "TARGETS", "Target", "export"]
