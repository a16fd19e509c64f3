"""Real signals to this process: the first stop signal interrupts, the ones
during clean-up wait until it is done."""

from __future__ import annotations

import os
import signal

import pytest

from pier.lifecycle.interrupts import (
    Interrupted,
    deferred_signals,
    interruption_reason,
    stop_signals_interrupt,
)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_interrupts_with_its_exit_code(sig):
    with pytest.raises(Interrupted) as raised, stop_signals_interrupt():
        os.kill(os.getpid(), sig)  # Python runs the handler right after this call
        pytest.fail("the signal did not interrupt")
    assert raised.value.signum == sig and raised.value.exit_code == 128 + sig


def test_a_signal_during_clean_up_is_held_until_it_is_done():
    done = []
    with pytest.raises(Interrupted) as raised, stop_signals_interrupt(), deferred_signals():
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)  # a second one is ignored
        done.append("clean-up")
    assert done == ["clean-up"] and raised.value.signum == signal.SIGTERM


def test_handlers_are_restored():
    before = signal.getsignal(signal.SIGTERM)
    with stop_signals_interrupt():
        assert signal.getsignal(signal.SIGTERM) != before
    assert signal.getsignal(signal.SIGTERM) == before


def test_reasons():
    assert interruption_reason(KeyboardInterrupt()) == "pier received SIGINT (Ctrl-C)"
    assert interruption_reason(Interrupted(signal.SIGHUP)) == "pier received SIGHUP (its terminal closed)"
