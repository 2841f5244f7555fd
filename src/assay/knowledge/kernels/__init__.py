"""The starter kernel templates, one module per op family."""

from __future__ import annotations

from assay.knowledge.kernels import elementwise, matmul, norm, reduce, softmax

TEMPLATES = [*softmax.TEMPLATES, *norm.TEMPLATES, *reduce.TEMPLATES, *elementwise.TEMPLATES, *matmul.TEMPLATES]
BY_NAME = {t.name: t for t in TEMPLATES}

__all__ = ["TEMPLATES", "BY_NAME"]
