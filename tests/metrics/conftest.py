"""The real HotpotQA sample, for the adapters' end-to-end runs."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def distractor_file(shared_data) -> str:
    """The 103 official dev-distractor records."""
    return str(shared_data / "hotpotqa_dev_sample" / "hotpot_dev_distractor_v1_100.json")
