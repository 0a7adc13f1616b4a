"""The auditor's TypedDicts and the passport's pydantic models describe the same shapes: each
pair has the same fields, so a figure added on one side cannot be forgotten on the other."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from passport import model
from passport.audit import _files, _types

PAIRS = [
    (_types.StatFigures, model.Stat), (_types.WindowFigures, model.WindowInfo),
    (_types.PeakMemoryFigures, model.PeakMemory), (_types.ClientFigures, model.ClientInfo),
    (_types.ServerFigures, model.ServerStats), (_types.SloTargetFigures, model.SloTargetResult),
    (_types.SloFigures, model.SloResult), (_types.DiscardedFigures, model.Discarded),
    (_types.DiscardFigures, model.DiscardResult), (_types.ResultsFigures, model.Results),
    (_types.RuleFigures, model.RuleResult), (_types.CanaryFailureFigures, model.CanaryFailure),
    (_types.CanaryUnderLoadFigures, model.CanaryUnderLoad), (_types.CanaryFigures, model.CanaryInfo),
    (_types.ValidityLimits, model.ValiditySpec), (_files.FileFacts, model.FileEntry),
]


@pytest.mark.parametrize("figures, pydantic_model", PAIRS, ids=[m.__name__ for _, m in PAIRS])
def test_each_typed_dict_has_its_models_fields(figures: Any, pydantic_model: type[BaseModel]) -> None:
    assert set(figures.__required_keys__ | figures.__optional_keys__) == set(pydantic_model.model_fields)
