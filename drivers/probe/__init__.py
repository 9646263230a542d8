"""What the device can really run: its profile (facts, calibration, every unit probed by a real
run), and the same in a spawned child for a light daemon.

Modules:
    profile detect_profile: the device facts and a truthful probe of every compute unit;
            probe_generation: which units generate (transformers, llama.cpp) here, with reasons
    apart   detect_profile_apart, probe_servers_apart: the device probe, calibration and
            declared-server probes in a spawned child; the parent reads the result as JSON
    cache   the probe's facts and units kept per machine (`probe_key`: every runtime's version,
            Python, CPU, RAM, GPU device files and driver, GPU variables), reused while that holds
"""

__all__: list[str] = []
