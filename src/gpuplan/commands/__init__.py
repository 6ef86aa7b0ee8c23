"""Commands that live in their own modules; each has `register(app)`, called by gpuplan.cli. Option types
shared by several commands are here."""

from enum import Enum


class Objective(str, Enum):
    """`--objective` of plan and export (the values of the project's goals.objective)."""

    cost = "cost"
    time = "time"
    balanced = "balanced"
