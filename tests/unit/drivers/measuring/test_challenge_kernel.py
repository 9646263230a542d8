"""The CPU challenge's kernel on the thread count this machine runs it fastest on
(`drivers.measuring.challengechild.Kernel`): the choice changes the speed, never the rows."""

from __future__ import annotations

from threadpoolctl import threadpool_limits

from drivers.measuring.challengechild import Kernel, chain, digests, expand
from protocol import CPU_CHAIN_N


def test_the_chain_is_the_same_bits_on_one_blas_thread_and_on_all_of_them() -> None:
    x0, b = expand(7, CPU_CHAIN_N)
    with threadpool_limits(limits=1, user_api="blas"):
        one = chain(x0, b, 3)
    with threadpool_limits(limits=None, user_api="blas"):
        every = chain(x0, b, 3)
    assert digests(one) == digests(every)


def test_the_kernel_keeps_a_thread_count_and_answers_the_chain_asked_and_nothing_else() -> None:
    kernel = Kernel()
    kernel.warm()
    assert kernel.threads in (1, None)
    rows = kernel.chained(("chain", 64, 2, 11))
    assert rows is not None
    assert digests(rows) == digests(chain(*expand(11, 64), 2))
    assert kernel.chained(("chain", 0, 2, 11)) is None  # outside the protocol's bounds
    assert kernel.chained(("reveal", (1, 2))) is None
