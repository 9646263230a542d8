"""The measuring child and its parent: one spawn seam, one frame, meters stacked around the timed
phase, the device's facts, calibration and the challenge's kernels.

Modules:
    spawning       start_child, the one way drivers start a child: apart from Ctrl-C and the caller's
                   folder, capped (RLIMIT_AS set here only), a start that failed said so
    forkhost       what the fork server imports before it forks a child on Linux: Ctrl-C ignored, this
                   room's children's modules
    childio        a spawned child from trio: its next message awaited, the child stopped and reaped
    jobs           what a measuring child is given (no runtime imported)
    frame          the measuring children's frame: boundary, stages, timed loads, meters stacked
    child          the spawned child's side of a measurement: one process's Measurement
    genchild       the spawned child's side of a generate task (load timed, warm-up, one request per prompt)
    harness        measure: the parent side, spawned children, timeout, cancel, the processes pooled
    meters         the Meter shape; peak memory, CPU, NVML sampler, placement, thermal and power state
    counters       the energy counters (RAPL's powercap tree, NVML's counter or power samples), each
                   reading paired with the clock (timed_read)
    energy         EnergyMeter (and IdleEnergy): idle and measured-phase energy from NVML or RAPL (a
                   declared method, never an estimate), or the reason there is none
    telemetry      the sampler thread: CPU clock per core group, temperatures, CPU use and share, NVML GPU
    offers         unit_offers, machine_telemetry: per unit, the energy method and telemetry this
                   device offers, or why not
    sustain        marks on the timed phase's time axis, and a sustained run's timed loop
    stats          the median's confidence interval and the warm-up rule (summaries: protocol.stats)
    outputs        a fingerprint of a model's outputs (rounded, hashed) that replicas of one class compare
    calibrate      CPU matmul throughput and memory bandwidth, cached per device and runtime version
    peakkernels    the CPU's peak kernels per precision (numpy fp32, torch bf16/fp16, ORT int8) and memory
                   access (read, write, copy past the last-level cache), or why a precision is unavailable
    gpupeaks       a CUDA GPU's peak kernels through torch (fp32, tf32, fp16, bf16, int8, fp8 as the
                   compute capability allows; read, write, copy), the tensor-core generation
    peakchild      the peaks' size sweep to the plateau under the harness's rules, and its children (every
                   figure for `info --bench`; one figure with its raw timings for a campaign's peaks task)
    costchild      each model's FLOPs and bytes per inference (files.graphcost) counted in one capped child
    peaks          the parent side: one measuring child (`info --bench`), the figures cached by
                   calibration key; `measure_peak`, a campaign's peaks task as a Measurement
    challengechild the CPU challenge's kernel (matrices from a seed, product, row digests), its child
    chainchild     the GPU challenge's kernel (an exact integer chain of products through torch on the
                   claimed device, the CPU's in tests), its child, and the submitter's recomputation
    device         CPU, RAM, OS, GPUs (NVML, torch, nvidia-smi), runtime versions, fingerprint

The harness, the frame and the meters
-------------------------------------

`drivers/measuring/harness.py` runs in the worker but reads only the model's name and size: inspection,
loading and running happen in a spawned child (`child.py`, `genchild.py` for generation) that tells its
stage (inspect, load, run) as it goes, under memory and time limits. A failure is a value: `FailureReason` +
`Stage` + a detail that starts with the model's name. Both children run in one frame
(`drivers/measuring/frame.py`, as pyperf's worker and hooks): the process boundary, the timed loads, and one
measured phase that every meter enters the same way. A meter (`drivers.measuring.meters.Meter`: placement,
peak memory, idle energy, GPU, device state in the `runs` span from the first inference on; telemetry, CPU,
energy around the timed loop) is a context manager with `taken`, which sets its readings on the process's
`Measurement`; `Frame` stacks them with an `ExitStack`, so a new meter is one class. Every runtime is a
driver behind the one `Driver` shape (`drivers/runtimes/registry.py`), so a new runtime gets the same
warm-up, statistics, meters, recorded inputs and output fingerprints by being registered, not by a copy of
the loop. `CPU (ExecuTorch)` (`drivers/runtimes/executorch.py`) runs a .pte on the pybindings that
`executorch.runtime.Runtime` wraps (`_load_program` with internal-consistency verification, `load_method`,
the method's call), not on the wrapper: its module imports `executorch.exir` (5 to 12 s of export toolchain)
for one warning class, in every child and every device probe. Its probe runs `drivers/assets/probe.pte`
(lowered by `drivers/files/etmodels.py`, whose bytes a test pins); a task's `threads` resize ExecuTorch's
thread pool before the child's first program of the task (resizing it under a loaded XNNPACK program crashes
the process); its inputs are named `input_0`, `input_1`, ... (a .pte keeps no names). A driver may convert
(`driver.Converter`): ExecuTorch takes a `torch.export` program (.pt2, owner opt-in as for `CPU (PyTorch)`)
and lowers it in the child, after `prepare` and under the task's memory limit but before the timed loads,
into a folder that ends with the measurement (`child._converted`); the conversion (tool, version,
partitioner) is recorded as `runtime_versions["conversion"]`, so the row's `RuntimeVersions` says it.
OpenVINO converts the same .pt2 (`convert_model`, saved as fp32 IR: `save_model` halves weights by default),
so one program runs on both runtimes. Each process converts again (no cache yet). The placement meter
(`meters.Placed`) judges a fallback once for every runtime: the runtime put the model elsewhere, or the
asked provider or device holds less than the task's `placement_share` of the nodes (default 1.0, all); a
strict task fails there with reason `fallback` and the shares in its detail, a lenient one is marked: its
row's `Providers` reads `fallback: ...` with the shares, and `ReportEntry.complete` keeps it out of the
matrix, the heatmap and `report --diff` (the cell shows the shares instead of a figure). The child also
keeps its first outputs whole up to 65,536 values, else that many evenly spaced
(`Measurement.output_sample`, with `output_values` their count); the submitter
compares the rows of one model on them (`scheduler/results/outputdiff.py`, `OutputMaxDiff`: the largest
difference against the model's first row, among rows fed alike: the same dtypes, shapes and fills in order,
whatever each runtime names its inputs, `fed_alike`), so a runtime that computes something else is seen
beside its timings. The child returns that per-process `Measurement` (raw parts only), the value the store
keeps; the harness pools the processes' parts and calls `protocol.derive` (no other result shape on the
way). The generate child sends its own stdout and stderr to /dev/null and turns tqdm off (`TQDM_DISABLE`,
`HF_HUB_DISABLE_PROGRESS_BARS`): transformers' GGUF loader draws a tqdm bar that `disable_progress_bar()`
misses, and on the embedded swarm the child's stderr is `submit`'s terminal. Before the (timed) load it
refuses what it can without transformers: a folder without a tokenizer or safetensors weights (before torch
is imported), and a `max_new_tokens` at or beyond the model's context, a GGUF file's read from the bounded
header walk (`drivers.files.headers.check_gguf` returns `general.architecture` and `<arch>.context_length`),
since transformers' GGUF reader builds every metadata value (SmolLM2's ~100,000 tokenizer strings: about 15
s on two cores) and the load reads them three times (config, tokenizer, tensors; the config read once is
handed to the model). Tensor tasks: fresh loads timed, first inference apart, warm-up, timed runs, several
processes, the stability verdict, kernel high-water-mark memory, CPU and background load, providers that ran
with the share of the graph's nodes on each (`Placement`: ONNX Runtime's node assignment, OpenVINO's
executed graph, LiteRT's nodes delegated to XNNPACK, ExecuTorch's XNNPACK graph nodes against its portable
kernel calls, read from the .pte by `drivers/files/ptefile.py` in the child: a partition of another backend
counts one node, `executorch_prim::` scalar calls none; for a generate task on llama.cpp, its layers per
device as its load log assigned them, so a GPU row with fewer layers offloaded than asked is `fallback`),
and the inputs fed (`InputFed`: shape, dtype, fill, defaulted dimensions, and for a campaign's `input_data`
the file and its sha256). Input data files are read by the submitter (`campaign_files`), checked for magic
and size and digested by `scheduler/language/inputdata.py`, carried as bytes in the task spec of the signed
offer (at most `MAX_INPUT_DATA`, 1 MiB per job: an offer is one frame), and parsed only in the child
(`drivers/files/inputs.py`: `np.load(allow_pickle=False)`, an .npz's inflated size bounded, type and static
dimensions checked; a mismatch is reason `input` at stage `inspect`). Generate tasks: per request TTFT,
token times, counts, text; aggregates with their formulas (`protocol.generation.FORMULAS`), ROUGE. Every
record declares how it was counted (`token_source`: `server-usage`, `tokenizer:<name>@<12 hex of sha256>`,
or `chunks`), its chunks, the usage's count and a tokenizer's count apart, the first answer token
(`ttfo_ms`, after reasoning deltas; TTFT is the first delta of either kind: `drivers/endpoint/sse.py` splits
`content` from `reasoning_content`/`reasoning`, and `output_text` keeps the answer only) and its reasoning
tokens. White-box records count with the model's own tokenizer, revision = the model's digest
(`harness._revised`). White-box TTFT runs from the prompt's token ids handed to the runtime to the
first output token (the chat template and tokenizing before the clock, on transformers and llama.cpp
alike: `drivers/runtimes/llm.py`, `drivers/runtimes/gguflm.py`); an endpoint's from the request sent,
client-side (its server's tokenizing inside it).
A campaign's `generate.tokenizer` (`protocol/tokenizer.py`: pinned by sha256, carried
zlib-compressed in the spec when at most 1 MiB, else by digest only; at most 32 MiB and 1,048,576 tokens,
its own padding and truncation switched off, the library's failures and pyo3 `PanicException`s turned into
`TokenizerError` naming the file and the stage) is parsed only in a child on the submitter (`node.intake
--folder`) and in a spawned child on the worker (`drivers/endpoint/tokencount.py`, memory cap and deadline;
a failure leaves the per-chunk counts, so declared), which counts each answer and its reasoning after an
endpoint run. Datasets are built on the submitter while the campaign is parsed, in that child
(`scheduler/language/datablock.py`, `scheduler/language/dataset.py`; JSON nested past the reader's depth and
a tokenizer with no ordinary token are campaign problems; a file node/ left out says why,
`scheduler.CampaignFiles`): random prompts of exact token lengths from a seeded splitmix64 (no `random` in
the pure layer), and ShareGPT first human turns; the prompts travel in the spec, so every worker sends the
same bytes, and each record keeps the seed and the lengths asked.

Energy, telemetry, sustained runs, calibration
----------------------------------------------

Energy (`drivers/measuring/energy.py`): the measuring child picks a source by unit (`offer_for`: NVML's
total-energy counter, else NVML power sampled every 100 ms and integrated, for GPU units; RAPL `package-N`
zones plus their `dram` subzone under the powercap tree for CPU units on Linux, read every 0.5 s on a thread
so a wrap at `max_energy_range_uj` is never missed; macOS and others: none, with the reason; the counters,
each reading timed by the clock on both its sides, are `counters.py`), reads it for
`IDLE_S` (3 s) after the load and before the first inference, then around the timed loop (`child.py`) or the
timed requests (`genchild.py`), and sends an `EnergyReading` (joules and seconds of both windows, method,
note). The powercap root is `SARK_POWERCAP_ROOT` when set (tests point it at a tree a writer process
advances), else `/sys/class/powercap`. An endpoint task reads no energy (the server's, and its note says so)
unless the owner declared that server runs on this device (`join --endpoint-on-device NAME=UNIT`, config
`endpoints_on_device`): `Targets.energy_unit` then sets `EndpointOptions.energy_unit` and `endpointrun.py`
reads that unit's source around the run, the note naming the unit. `drivers/measuring/offers.py`
(`unit_offers`, shown by `info`) lists per unit the energy method and telemetry or why not: the telemetry
sampler's own account (`drivers.measuring.telemetry.offered`, one reading), the machine's part printed once
under the table and the GPU's (NVML) per GPU unit. Live telemetry: while a child times runs (tensor or
generate), `drivers/measuring/telemetry.py`'s `Sampler` thread reads the device every 250 ms (the period is
in the result): psutil `cpu_freq(percpu=True)` averaged per core group (CPUs sharing a maximum clock), the
hottest psutil temperature sensor (hwmon, else thermal zones) and whether one is at its "high" mark, machine
busy cores (`cpu_times`) and the process's own (`process_time`), the process's CPU share (its threads'
on-CPU time over on-CPU plus run-queue wait, `/proc/self/task/*/schedstat`: it falls under contention even
when the machine is already saturated), and through NVML the GPU temperature, SM clock, power and
clock-event reasons (`nvmlDeviceGetCurrentClocksEventReasons`, else `...ThrottleReasons`). The CPU counters
are read between two clock reads and stamped at their midpoint (`drivers.measuring.telemetry.counters`); a
reading whose bracket is over a quarter of its interval, or whose busy or own cores exceed 1.1x the
machine's (the kernel's ticks catching up under heavy load once read 5 cores on 2), is left out and the next
spans both, except a run's only reading, which is kept with its cores held to the machine's; the phase's
`CpuMeter` holds a phase of a few ms the same way (10 ms ticks over 1 ms read 33 cores on 2, which the
bounds then refused from an honest worker). Points past 2,000 are thinned 1 in 2; what could not be read is
in `Telemetry.sources`. The timed loop marks each progress chunk (`drivers/measuring/sustain.py` `Marks`:
the next run's index and the time, outside the inner loop), so runs and readings share one time axis; the
harness lays the processes' timed phases back to back. A sustained task (`TaskSpec.sustain`, one process)
times runs until its duration has passed, marking each window's edge, and keeps 1 run in 2, 4, ... past
`MAX_SAMPLES`. `protocol/windows.py` cuts the samples at the marks (`windows`) and, for a sustained task,
compares each window's median with the first's (`sustained`): beyond 10 % the window is throttled, its
causes from its telemetry against the faster window's (clock 10 % lower, NVML thermal or power reasons, a
sensor at "high", background: others' CPU use 0.5 core higher, or the CPU share 25 % lower or low enough
that `calm / share - 1` is at least half the drift; else `unexplained`). `derive` runs it, so the submitter
derives `Measurement.sustained` again from the marks, samples and points and refuses a result whose windows
or verdict differ (`scheduler/verification/figures.py` also checks that the marks fit). Calibration
(`drivers/measuring/calibrate.py`) is taken on a quiet machine, cached with its load and date, and marked
wherever it is shown when it was taken under load. The peaks (`sark-node info --bench`, issue 53) extend it
without a second calibration: one measuring child (`peaks.measure_apart`) sweeps each precision's matmul and
each memory access to its plateau (`peakchild`), each figure naming its method, library, kernel and sizes, a
precision the CPU or the libraries cannot do unavailable with why; `--bench` re-takes the calibration beside
them and keeps them by its key, so the profile (and a worker's advert) carries them as `Calibration.peaks`.
"""

__all__: list[str] = []
