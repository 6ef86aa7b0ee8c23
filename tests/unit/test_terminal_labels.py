"""Every memory part the terminal's bar can draw has its label in each report language: a part added for a new task
(GRPO's rollout engine) once stopped `gpuplan plan --lang fr` with a KeyError."""

from __future__ import annotations

from gpuplan.report.i18n import LANGS, t
from gpuplan.report.terminal import BAR_PARTS, LABEL_KEYS


def test_every_bar_part_has_a_label_in_every_language() -> None:
    for _, label, _, _ in BAR_PARTS:
        assert label in LABEL_KEYS, label
        for lang in LANGS:
            assert t(LABEL_KEYS[label], lang)
