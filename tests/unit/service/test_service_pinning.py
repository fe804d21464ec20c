"""RAGLOOM_SERVICE_PIN_CPUS: which CPU each `ragloom serve` process keeps to (the processes themselves are checked in
tests/integration/test_service_processes.py)."""

from __future__ import annotations

import pytest

from ragloom.errors import ConfigError
from ragloom.service import pin_plan
from ragloom.settings import Settings


def test_auto_pins_one_process_per_usable_cpu_and_nothing_otherwise():
    assert pin_plan(2, "auto", {0, 1}) == [0, 1]
    assert pin_plan(2, "auto", {3, 1}) == [1, 3]  # the CPUs this process may use, not 0..n-1
    assert pin_plan(2, "auto", {0, 1, 2, 3}) == [None, None]  # fewer processes than CPUs: the rest is others'
    assert pin_plan(4, "auto", {0, 1}) == [None] * 4  # more processes than CPUs: any pinning would stack them


def test_on_deals_the_cpus_out_in_turn_and_off_never_pins():
    assert pin_plan(3, "on", {0, 1}) == [0, 1, 0]
    assert pin_plan(2, "on", {0, 1, 2, 3}) == [0, 1]
    assert pin_plan(2, "off", {0, 1}) == [None, None]
    assert pin_plan(2, "on", set()) == [None, None]  # no affinity to read (not Linux): nothing to pin to


def test_an_unknown_pin_mode_is_refused_naming_the_choices(monkeypatch):
    monkeypatch.setenv("RAGLOOM_SERVICE_PIN_CPUS", "yes")
    with pytest.raises(ConfigError, match=r"RAGLOOM_SERVICE_PIN_CPUS='yes': choose auto, on, off"):
        Settings.from_env()
