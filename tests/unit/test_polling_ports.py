"""The suite's own port helper (tests/polling.py): servers that the reliability suite kills and restarts get ports
from a range no other test is handed, so the lane beside it cannot take them while they are down."""

from __future__ import annotations

from polling import RESTARTED_PORTS_TO, SERVER_PORTS_FROM, free_port, free_port_block


def test_restarted_servers_and_the_rest_get_ports_from_ranges_apart():
    ordinary = [free_port() for _ in range(200)] + [free_port_block(8) for _ in range(50)]
    restarted = [free_port_block(8, restarted=True) for _ in range(50)]
    assert all(port >= RESTARTED_PORTS_TO for port in ordinary)
    assert all(SERVER_PORTS_FROM <= base and base + 8 <= RESTARTED_PORTS_TO for base in restarted)
