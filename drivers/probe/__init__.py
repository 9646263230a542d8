"""What the device can really run: its profile (facts, calibration, every unit probed by a real
run), and the same in a spawned child for a light daemon.

Modules:
    profile detect_profile: the device facts and a truthful probe of every compute unit;
            probe_generation: which units generate (transformers, llama.cpp) here, with reasons
    apart   detect_profile_apart, probe_servers_apart: the device probe, calibration and
            declared-server probes in a spawned child; the parent reads the result as JSON
"""

__all__: list[str] = []
