"""GAIA (Mialon et al., 2023, arXiv:2311.12983): the ``gaia`` benchmark and the leaderboard's official scorer.

Public face: :class:`GAIABenchmark`, :func:`question_scorer` (the leaderboard's ``scorer.py``, ported with per-item
parity), :class:`Attachment` (a task's attached file: its path and text), :func:`answer_text` (a solution's output
as a submission's ``model_answer``).

May import ``runner.core``; never the engine, storage or a face.
"""

from runner.benchmarks.gaia.attachments import Attachment, AttachmentText, read_text
from runner.benchmarks.gaia.benchmark import LEADERBOARD_URL, GAIABenchmark, parse_levels
from runner.benchmarks.gaia.data import HUB_REVISION, HUB_URL, GAIARecord
from runner.benchmarks.gaia.scorer import question_scorer
from runner.benchmarks.gaia.submission import SUBMISSION_FILE, answer_text

__all__ = ["HUB_REVISION", "HUB_URL", "LEADERBOARD_URL", "SUBMISSION_FILE", "Attachment", "AttachmentText",
           "GAIABenchmark", "GAIARecord", "answer_text", "parse_levels", "question_scorer", "read_text"]
