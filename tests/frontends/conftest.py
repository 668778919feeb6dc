"""The FX importer tests' ``model_case`` fixture: each model of fx_model_cases.py."""

from __future__ import annotations

import pytest
import torch
from fx_model_cases import MODEL_CASES, ModelCase


@pytest.fixture(params=MODEL_CASES, ids=[c.name for c in MODEL_CASES])
def model_case(request: pytest.FixtureRequest) -> ModelCase:
    torch.manual_seed(0)
    return request.param
