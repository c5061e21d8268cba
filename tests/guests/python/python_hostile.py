"""A hostile scenario in Python, for tests/e2e/languages.rs: its first request never
comes back. `-p attack=loop` spins forever; `-p attack=memory` allocates until the
sandbox's memory cap stops it. The runner must stop either with the same error as for a
Rust guest (tests/guests/sandbox_probe) and stay unharmed.

Build: sdk/python/build.sh tests/guests/python/python_hostile.py python_hostile.wasm
"""

from bench_scenario import Description, Phase, Scenario, export, log, param_str


class Hostile(Scenario):
    @staticmethod
    def describe():
        return Description("python_hostile", "Never returns a request.").param(
            "attack", "loop", "loop: spin forever; memory: allocate without end"
        )

    def __init__(self):
        self.attack = param_str("attack")

    def phases(self):
        return [Phase("main").max_requests(1)]

    def next_request(self, phase, index):
        if self.attack == "memory":
            # Steps of 1.5 GiB: the first one passes the 1 GiB cap, so the cap stops the
            # guest at once. Small steps would have to fill a gigabyte first, which on a
            # busy machine takes longer than the 1 s call limit, and the error would
            # then name the time limit instead.
            hoard = []
            while True:
                hoard.append(bytearray(1536 << 20))
                log(f"holding {1536 * len(hoard)} MiB")
        while True:
            pass


Workload = export(Hostile)
