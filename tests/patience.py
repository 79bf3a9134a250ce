"""How long a test waits for what must happen but may be slow on a shared machine.

These bound hangs, not speed: beside other test runs on two cores the suite ran eight times
slower than alone, a server took 40 s to answer its first request and 15 s to exit after
SIGINT. A figure a test proves (a latency, a stall guard) is asserted where it is measured,
never with these.
"""

STARTS = 120  # seconds a `stateloop serve` or `up` process may take to answer /v1/health
STOPS = 60  # seconds a process may take to exit once asked (SIGINT, SIGTERM)
ANSWERS = 60  # seconds one request that must not hang may take
