"""Shared settings: deterministic seeds; both of the machine's threads unless told otherwise
(Debian's torch starts with one thread)."""
import os

import pytest
import torch

import simdnorm_torch  # noqa: F401  (registers torch.ops.simdnorm)


@pytest.fixture(autouse=True)
def _seed_and_threads():
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(int(os.environ.get("SIMDNORM_TORCH_TEST_THREADS", "2")))
    yield
    torch.set_num_threads(threads)
