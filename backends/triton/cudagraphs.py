"""CUDA-graphs mode: replay a program's whole launch sequence as one CUDA graph.

The first call with a given input signature (shapes, strides, dtypes, devices) runs the
program normally (compiling and autotuning), then records a second run into a CUDA graph
(an *instance*) that reads from static copies of the inputs; later calls copy the inputs
into those copies (skipping an input that is the very tensor seen last time, unmodified,
such as a parameter) and replay the graph: one launch instead of one per kernel, and no
Python per kernel.

**Safe by default.** A graph writes its outputs into the same memory at every replay.
Unlike Inductor's ``reduce-overhead`` (which overwrites outputs the caller still holds and
reports it when they are read), a replay here never overwrites a tensor the caller can
still see: before replaying an instance the runner checks, by the use counts of its
outputs' storages, that nothing outside the runner holds them any more (views and
``.grad`` fields count). An output alone in its storage is handed over as itself at
every replay (also checked by its reference counts, as Inductor's CUDA-graph trees keep
such outputs); the others as fresh aliases.
If every instance of the signature is still held, the runner records another one (up to
``max_instances`` per call site, each in its own memory pool, so that replaying one never
writes into another's live outputs), and past that it runs the program without a graph,
into fresh memory. So ``y1 = f(x1); y2 = f(x2)`` keeps ``y1``, and a loop that drops the previous
result before the next call (``y = f(x)`` keeps one previous result alive: two instances
alternate) replays graphs at every step.

**Inputs that keep their address are not copied.** A parameter or buffer (``nn.Parameter``,
or a tensor Dynamo marked a static address), and an output of any runner's graph (a
training step's saved activations, which the backward receives from the forward's
replay, at the same address every step), is *borrowed*: the graph reads it where it
lies, no static copy is made, and the runner keeps only its address, not the tensor (a
reference would keep the forward's instance from ever being idle). An instance is
replayed only when every borrowed argument is at the address it was recorded at (so
the graph reads exactly the caller's tensor); otherwise another instance is chosen or
recorded. Inductor's CUDA-graph trees skip the same copies; without this the backward
copied every saved activation at every step. A borrowable input that turns up at a new
address at ``MOVES_BEFORE_COPY`` recordings is copied after all (it keeps moving: an
upstream graph that re-records), so the signature stops re-recording. Moves are counted
per call site, the parameters a call reads: a block compiled once and called by every
layer with its own weights (a graph break inside a transformer layer) is not a moving
input but a site per layer, each with its own instances.

A weight a convolution reads through a cached channels-last copy
(:mod:`kiln.backends.triton.weight_layouts`) is read by the graph at the copy's address:
an instance pins the copies it read and replays only while each is still its site's
copy of the weight at the argument's address (refreshed in place after an in-place
update of the weight).

A call with a CPU tensor among its arguments runs without a graph (a graph would freeze
what the host read at recording), and so does one whose outputs include CPU tensors while
it is being recorded (what the host wrote). A call whose plain run returns CPU tensors
but whose recording returns device tensors only is replayed: SDPA's dropout seed and
offset are CPU tensors outside a capture and device tensors inside one, so a training
step's forward and (from the second step, fed by replays) its backward replay graphs. ``auto`` mode (the default of
``kiln.compile`` and ``torch.compile`` on CUDA) also leaves out calls with Python numbers
among the arguments (symbolic sizes arrive as numbers: a graph per size would pile up
pools), and falls back to the plain program for good when a recording fails (an
operation that synchronises with the host); ``cuda_graphs=True`` records a graph per
number and raises such failures. ``clone_outputs=True`` returns copies (the pre-safety
behaviour's remedy, kept for callers that want outputs detached from any pool).
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import le
from typing import Any, Protocol

import torch

from kiln.backends.host.input_writes import InputWrites, grouping, write_back, write_grouped
from kiln.backends.triton.graph_outputs import (
    View,
    kept_counts,
    kept_positions,
    lying_in_borrowed,
    mark_cached,
    positions_by_storage,
    rebuilt,
    storage_use_count,
)
from kiln.backends.triton.graph_recording import Recorder, Replay, record_cuda_graph
from kiln.dialects.aten.arg_layout import flat_storage


class WeightSite(Protocol):
    """A call site that keeps a derived copy of a weight (a channels-last convolution
    weight, :mod:`kiln.backends.triton.weight_layouts`) which a graph reads by address."""

    refreshable: bool

    def pin(self) -> torch.Tensor | None: ...

    def ready(self, pinned: torch.Tensor) -> bool: ...

    def refresh(self) -> None: ...

    def current(self, pinned: torch.Tensor) -> bool: ...

    def refreshed(self) -> None: ...


class Program(Protocol):
    source: str

    @property
    def weight_sites(self) -> Sequence[WeightSite]: ...

    def __call__(self, args: Sequence[Any]) -> tuple[Any, ...]: ...

    def boxed_call(self, args: list[Any]) -> tuple[Any, ...]: ...


_data_ptrs_equal: Callable[[Sequence[Any], list[int | None], list[int]], bool] | None = getattr(
    torch._C, "_tensors_data_ptrs_at_indices_equal", None
)
"""``(args, ptrs, indices)``: whether ``args[i].data_ptr() == ptrs[i]`` at every index, in
C++ (what Inductor's CUDA-graph trees check parameters with; CUDA builds only)."""


def _at_addresses(args: Sequence[Any], ptrs: list[int | None], indices: list[int]) -> bool:
    if _data_ptrs_equal is not None:
        return _data_ptrs_equal(args, ptrs, indices)
    return all(args[k].data_ptr() == ptrs[k] for k in indices)


def _partial_signature(args: Sequence[Any], positions: Sequence[int]) -> tuple[object, ...]:
    return _signature([args[k] for k in positions])


@dataclass(eq=False)
class _Instance:
    replay: Replay
    inputs: list[Any]
    """Static copies of the tensor inputs (other values as they were at recording), the
    list the recording ran on. A borrowed position holds the caller's tensor during a
    replay only, None otherwise (a recorder that reruns the program, as the tests'
    stand-in does, reads it there; a CUDA graph reads the address)."""
    outputs: tuple[Any, ...]
    last: list[tuple[weakref.ref[torch.Tensor], int] | None]
    """Per input: the tensor last copied in and its version counter then."""
    misses: int = 0
    """Calls in a row that found the instance idle but not fitting (see ``STALE_CALLS``)."""
    borrowed: dict[int, int] = field(default_factory=dict[int, int])
    """Borrowed inputs (see the module docstring): position -> the address the graph reads."""
    copied: frozenset[int] = frozenset()
    """Borrowable inputs copied all the same, having kept moving (``MOVES_BEFORE_COPY``)."""
    copied_at: dict[int, int] = field(default_factory=dict[int, int])
    """Where the ``copied`` inputs lay at the last replay, when all were borrowable."""
    steady: int = 0
    """Replays in a row that found every ``copied`` input borrowable where it lay at the
    previous one (see ``SETTLED_CALLS``)."""
    retired: bool = False
    """Replaced by a recording that borrows the inputs this one copies: dropped once idle."""
    spans: dict[int, torch.Tensor] = field(default_factory=dict[int, torch.Tensor])
    """Static inputs whose elements overlap (an expanded tensor, which cannot be copied
    into): position -> the 1-D memory span the input views, which arguments fill."""
    impls: list[int] = field(default_factory=list[int])
    counts: list[int] = field(default_factory=list[int])
    """The ``StorageImpl`` address of each distinct storage the outputs lie in (the
    outputs keep them alive), and its use count while only the runner holds them."""
    kept: list[torch.Tensor] = field(default_factory=list[torch.Tensor])
    """The outputs handed over as themselves at every replay (see ``settle``)."""
    kept_refs: list[int] = field(default_factory=list[int])
    kept_uses: list[int] = field(default_factory=list[int])
    """``kept``'s Python reference counts and ``TensorImpl`` use counts while only the
    runner holds them (``kept_counts``)."""
    fresh: tuple[int, ...] = ()
    """The output positions handed over as fresh aliases (``detach``) at every replay:
    outputs sharing their storage with another output, and views."""
    copies: tuple[int, ...] = ()
    """The tensor positions copied into static inputs (not borrowed), in order."""
    unborrowed: tuple[int, ...] = ()
    """Every position not borrowed (copied tensors, numbers, None)."""
    partial: tuple[object, ...] = ()
    """The signature of the arguments at ``unborrowed`` when recorded (a static copy of
    a tensor with gaps is contiguous: not the argument's signature)."""
    ptrs: list[int | None] = field(default_factory=list[int | None])
    """Per position: the address a borrowed argument must lie at (None elsewhere)."""
    borrowed_positions: list[int] = field(default_factory=list[int])
    returned: dict[int, tuple[int, View | None]] = field(
        default_factory=dict[int, tuple[int, View | None]]
    )
    """Outputs that lie in a borrowed input's memory: output position -> the input's
    position, and where the output lies relative to it (None: the input itself). A
    replay returns the caller's argument there, or a view of it, and the instance keeps
    no such output: a training forward returns its weights for the backward, which must
    receive the parameters themselves (a channels-last weight copy is kept per
    parameter, and a detached alias is a new tensor at every step); and an output kept
    in another graph's memory (a reshaped input saved for the backward) raised that
    memory's use count for good, so the graph that wrote it was never idle again
    (hf_opt's and hf_bart's layers ran without graphs for steps)."""
    pins: list[tuple[WeightSite, torch.Tensor]] = field(
        default_factory=list[tuple[WeightSite, torch.Tensor]]
    )
    """The weight copies the graph reads, per site (kept alive with the instance); a
    replay first asks each site whether its copy is still the one for the weight."""
    refreshed: list[tuple[WeightSite, torch.Tensor]] = field(
        default_factory=list[tuple[WeightSite, torch.Tensor]]
    )
    """The pins the graph refreshes itself at the start of each replay
    (``CudaGraphRunner.refresh_weights``): a replay asks whether each is still the
    weight's copy (``current``), not whether it is up to date, and marks it so after."""
    values: tuple[Any, ...] = ()
    """The values a replay writes into inputs (the program's trailing outputs, see
    ``CudaGraphRunner.writes``), never handed over."""
    graph_writes: list[int] = field(default_factory=list[int])
    """The borrowed inputs the graph itself writes (at the recorded addresses)."""
    host_writes: list[tuple[int, int]] = field(default_factory=list[tuple[int, int]])
    """(value index, input position): the other writes, done after each replay."""

    def __post_init__(self) -> None:
        n = len(self.inputs)
        self.ptrs = [self.borrowed.get(k) for k in range(n)]
        self.borrowed_positions = sorted(self.borrowed)
        self.unborrowed = tuple(k for k in range(n) if k not in self.borrowed)
        self.copies = tuple(k for k in self.unborrowed if isinstance(self.inputs[k], torch.Tensor))

    def matches(self, args: Sequence[Any]) -> bool:
        """Whether a call with ``args`` has this instance's signature, given that the
        caller guards the metadata of what lies at a borrowed address (Dynamo's guards):
        the unborrowed arguments' signature, and the borrowed ones' addresses."""
        return (
            len(args) == len(self.ptrs)
            and _partial_signature(args, self.unborrowed) == self.partial
            and _at_addresses(args, self.ptrs, self.borrowed_positions)
        )

    def idle(self) -> bool:
        """Whether nothing outside the runner holds an output (or a view of one): no
        storage used more than when only the runner held it, and no kept output
        referenced more (``settle``)."""
        # Called on every replay: the addresses are kept, not looked up per call.
        return all(map(le, map(storage_use_count, self.impls), self.counts)) and (
            not self.kept or kept_counts(self.kept) == (self.kept_refs, self.kept_uses)
        )

    def handed_over(self, args: Sequence[Any]) -> tuple[Any, ...]:
        """The outputs of a replay, for the caller: kept outputs as themselves, others as
        fresh aliases (whose references raise their storages' use counts), and those
        lying in a borrowed input rebuilt from the argument (see ``returned``)."""
        outputs = list(self.outputs)
        for i in self.fresh:
            outputs[i] = outputs[i].detach()
        for i, (k, view) in self.returned.items():
            outputs[i] = rebuilt(args, k, view)
        for t in self.kept:
            # Hooks live on the tensor, not in its autograd meta (which autograd.Function
            # resets): a hook registered on the last step's output is not this step's.
            if t._backward_hooks is not None:
                t._backward_hooks = None
        return tuple(outputs)

    def fits(self, args: Sequence[Any], in_place: bool = False) -> bool:
        """Whether every borrowed argument lies where the graph reads it (known when
        ``in_place``: it ``matches``), and no argument it copies could be borrowed now: a
        backward's first call receives the forward's first, ungraphed, outputs, so its
        first instance copies them; the next call, fed by the forward's replay, records
        one that borrows, and the first gives way. Last, every pinned weight copy must be
        ready (its site refreshes one whose weight changed in place)."""
        return (
            not self.retired
            and (in_place or _at_addresses(args, self.ptrs, self.borrowed_positions))
            and not any(k not in self.copied and _borrowable(args[k]) for k in self.copies)
            and all(site.ready(copy) for site, copy in self.pins)
            and all(site.current(copy) for site, copy in self.refreshed)
        )

    def moved_inputs_settled(self, args: Sequence[Any]) -> bool:
        """Whether every input copied for having moved (``copied``) has been borrowable,
        at one address, for ``SETTLED_CALLS`` replays in a row (its upstream graph
        stopped re-recording: a training step's warm-up is over)."""
        at = {k: args[k].data_ptr() for k in self.copied if _borrowable(args[k])}
        if len(at) < len(self.copied) or at != self.copied_at:
            self.copied_at, self.steady = at, 0
            return False
        self.steady += 1
        return self.steady >= SETTLED_CALLS

    def settle(self, lent: set[int]) -> None:
        """Record the idle use counts (call when only the runner holds the outputs).
        ``lent``: the storages of borrowed inputs that returned views lie in (see
        ``returned``), registered as borrowable: a parameter's transposed view, passed
        to the backward, is at the same address at every step."""
        by_storage = positions_by_storage(self.outputs)
        self.impls = [
            self.outputs[group[0]].untyped_storage()._cdata  # pyright: ignore[reportAttributeAccessIssue]
            for group in by_storage.values()
        ]
        self.counts = list(map(storage_use_count, self.impls))
        for address in by_storage:
            _GRAPH_OUTPUTS[address] = self
        for address in lent:
            _GRAPH_OUTPUTS.setdefault(address, self)
        kept, self.fresh = kept_positions(self.outputs, by_storage.values())
        self.kept = [self.outputs[i] for i in kept]
        if self.kept:
            mark_cached(self, self.kept)
        self.kept_refs, self.kept_uses = kept_counts(self.kept)


MOVES_BEFORE_COPY = 2
"""A borrowable argument found at a new address at this many recordings of a signature
at one call site (see :class:`_Moves`) is copied from then on: an input that moves at
every call (an upstream graph that keeps re-recording, or runs without a graph) would
otherwise cost a recording per call until the recording limit, and then every call
would run without a graph. One move is allowed (a forward alternating between two
instances records the backward twice and then fits either)."""

SETTLED_CALLS = 3
"""Replays after which inputs copied for having moved, found borrowable at one address
at each, are borrowed again: their moves are forgotten and the next call records an
instance that borrows them. Moves happen while upstream graphs record (a training
step's first calls: hf_opt's and hf_bart's backwards then copied 18 and 45 saved
activations at every step for good, though the forwards had settled by the fourth)."""

MAX_SITES = 16
"""Call sites recorded per signature (see :class:`_Moves`); calls at further sites run
without a graph (each site's instances have their own memory pools)."""


@dataclass
class _SiteMoves:
    """Where one call site's borrowable arguments lay at its recordings."""

    address: dict[int, int] = field(default_factory=dict[int, int])
    count: Counter[int] = field(default_factory=Counter[int])

    def note(self, args: Sequence[Any], fixed: frozenset[int]) -> frozenset[int]:
        """Counts the moves since the site's last recording of every argument but the
        site's own parameters (``fixed``); the positions to copy now."""
        for k, a in enumerate(args):
            if k in fixed:
                continue
            if not _borrowable(a):
                # Borrowable at the last recording, not now (its graph ran plain): a move.
                if self.address.pop(k, None) is not None:
                    self.count[k] += 1
                continue
            if self.address.get(k, a.data_ptr()) != a.data_ptr():
                self.count[k] += 1
            self.address[k] = a.data_ptr()
        return frozenset(k for k, n in self.count.items() if n >= MOVES_BEFORE_COPY)

    def forget(self, args: Sequence[Any], positions: frozenset[int]) -> None:
        """Forgets the moves of ``positions``, now settled where ``args`` has them."""
        for k in positions:
            self.count.pop(k, None)
            self.address[k] = args[k].data_ptr()


Site = tuple[int, ...]
"""The addresses of the parameters and buffers a call reads."""


def _site(args: Sequence[Any]) -> tuple[Site, frozenset[int]]:
    """The call's site, and the positions of the parameters and buffers that make it."""
    fixed = [k for k, a in enumerate(args) if isinstance(a, torch.Tensor) and stays_put(a)]
    return tuple(args[k].data_ptr() for k in fixed), frozenset(fixed)


@dataclass
class _Moves:
    """Where a signature's borrowable arguments lay at its recordings, per call site: the
    parameters and buffers a call reads. A block that Dynamo compiles once and every layer
    calls with its own weights (a graph break inside a transformer layer) is one
    signature with a site per layer, each with its own instances (``max_instances``) and
    recordings (``MAX_RECORDINGS``). Counted per signature, the layers' weights were
    moves of one input: hf_opt's training copied every weight and saved activation at
    every step (95 copies, a third of its kernel time on the H100).

    A signature's first site is recorded at once; a further one only when it recurs (a
    layer, at the next step): a call with fresh parameters every time (a model built
    anew per call) runs without a graph instead of recording one per call."""

    sites: dict[Site, _SiteMoves] = field(default_factory=dict[Site, _SiteMoves])
    seen_once: dict[Site, None] = field(default_factory=dict[Site, None])
    """Sites met once and not recorded, oldest first (at most ``MAX_SITES``)."""

    def admit(self, site: Site) -> bool:
        """Whether a call at ``site`` may be recorded (see the class docstring)."""
        if site in self.sites or not self.sites:
            return True
        if len(self.sites) >= MAX_SITES:
            return False
        if site in self.seen_once:
            del self.seen_once[site]
            return True
        self.seen_once[site] = None
        if len(self.seen_once) > MAX_SITES:
            del self.seen_once[next(iter(self.seen_once))]
        return False

    def note(self, args: Sequence[Any]) -> frozenset[int]:
        """Registers the call's site, counts its moves; the positions to copy now."""
        site, fixed = _site(args)
        return self.sites.setdefault(site, _SiteMoves()).note(args, fixed)

    @property
    def n_sites(self) -> int:
        return max(1, len(self.sites))


STALE_CALLS = 3
"""An idle instance that fits no call this many times in a row (times the signature's
call sites) is dropped."""
MAX_RECORDINGS = 8
"""Recordings per signature and call site (see :class:`_Moves`), over the runner's life."""

_GRAPH_OUTPUTS: weakref.WeakValueDictionary[int, _Instance] = weakref.WeakValueDictionary()
"""Storage address -> the live instance whose replays write that storage, over every
runner: the forward's and the backward's runners are built by separate compiles, and a
backward borrows what a forward's graph wrote (what Inductor's CUDA-graph tree knows by
keeping both in one tree). Entries leave with their instances."""


def stays_put(value: torch.Tensor) -> bool:
    """Whether ``value`` is a parameter or a buffer (Dynamo's static inputs): a graph
    reads it where it lies; any other argument is copied into a static input at each
    replay (a cache keyed on such an argument would see the static copy)."""
    return isinstance(value, torch.nn.Parameter) or bool(
        getattr(value, "_dynamo_static_input_type", None)
    )


def _borrowable(value: Any) -> bool:
    """Whether ``value`` is expected at the same address at the next call: a parameter or
    buffer, or an output of a graph (see the module docstring)."""
    if not isinstance(value, torch.Tensor):
        return False
    if stays_put(value):
        return True
    return value.untyped_storage().data_ptr() in _GRAPH_OUTPUTS


def _static_copy(value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A copy of ``value`` for a graph to read, and where its elements overlap (an
    expanded tensor, such as a backward's tangent of a sum) the memory span it views. A
    clone would lay such a tensor out contiguously, which a kernel compiled for its
    strides would copy back into an overlapping layout, and fail (BART's backward)."""
    if torch._debug_has_internal_overlap(value) == 0:  # pyright: ignore[reportPrivateImportUsage]
        return value.clone(), None
    span = flat_storage(value).clone()
    return span.as_strided(value.shape, value.stride()), span


def _signature(args: Sequence[Any]) -> tuple[object, ...]:
    return tuple(
        (a.shape, a.stride(), a.dtype, a.device) if isinstance(a, torch.Tensor) else a for a in args
    )


def _recordable(values: Sequence[Any], numbers: bool, device_type: str) -> bool:
    """Whether a graph can hold ``values`` (arguments or outputs): tensors on the graph's
    device, and Python numbers when ``numbers`` (each value is then part of the
    signature: a graph per value)."""
    return all(
        v.device.type == device_type if isinstance(v, torch.Tensor) else numbers or v is None
        for v in values
    )


@dataclass
class CudaGraphRunner:
    """Wraps a compiled program (see the module docstring)."""

    program: Program
    clone_outputs: bool = False
    auto: bool = False
    """Use graphs only where they are known safe (all-CUDA tensor arguments and outputs)."""
    max_instances: int = 2
    """Instances per signature and call site (see :class:`_Moves`)."""
    record: Recorder = record_cuda_graph
    refresh_weights: bool = False
    """A training graph: its graphs refresh the weight copies of its forward
    convolutions themselves (:mod:`kiln.backends.triton.weight_layouts`)."""
    writes: InputWrites | None = None
    """The inputs the program's trailing outputs are written into
    (:mod:`kiln.backends.host.input_writes`): inside the graph where the input is
    borrowed (a buffer: the graph writes the address it reads), after the replay
    otherwise; never handed over."""
    device_type: str = "cuda"
    """The device whose tensors a graph holds (tests record CPU stand-ins)."""
    graphs: dict[tuple[object, ...], list[_Instance]] = field(
        default_factory=dict[tuple[object, ...], list[_Instance]]
    )
    recordings: Counter[tuple[object, ...]] = field(default_factory=Counter[tuple[object, ...]])
    """Instances recorded per signature (see ``MAX_RECORDINGS``)."""
    plain: set[tuple[object, ...]] = field(default_factory=set[tuple[object, ...]])
    """Signatures that run without graphs (auto mode's exclusions, failed recordings)."""
    moved: dict[tuple[object, ...], _Moves] = field(
        default_factory=dict[tuple[object, ...], "_Moves"]
    )
    """Per signature: where each borrowable argument was last recorded, and how often it
    has moved between recordings (see ``MOVES_BEFORE_COPY``)."""
    plain_calls: int = 0
    """Calls that ran the program without a graph (first calls, exclusions, every
    instance held)."""
    guarded: bool = False
    """The caller guarantees that an argument's shape, strides, dtype and device are those
    of the compiled graph's input wherever the argument is a parameter, a static input or
    a graph's output (Dynamo's guards do, and the forward's graph fixes its outputs'):
    such arguments are then checked by address only (see ``_key``), as Inductor's
    CUDA-graph trees check them."""
    replay_reads_inputs: bool = False
    """The recorder's replay reruns the program on the instance's ``inputs`` (the tests'
    stand-in): borrowed arguments are put there during a replay. A CUDA graph reads the
    recorded addresses and needs nothing."""
    last: tuple[tuple[object, ...], list[_Instance]] | None = None
    """The signature of the last call that found instances, and its instance list: the
    guarded check (``_key``) starts there, and a repeated signature skips hashing (a
    tuple of 200 parameters' metadata costs more to hash than a replay)."""

    @property
    def source(self) -> str:
        return self.program.source

    def __getattr__(self, name: str) -> Any:
        # The wrapped program's attributes (``runners``, ``path``, ...), for tools and tests.
        if name == "program":
            raise AttributeError(name)
        return getattr(self.program, name)

    def __call__(self, args: Sequence[Any]) -> tuple[Any, ...]:
        return self._run(args, *self._key(args))

    def _key(self, args: Sequence[Any]) -> tuple[tuple[object, ...], _Instance | None]:
        """The call's signature. Computed in full, it reads the shape, strides, dtype and
        device of every argument, parameters included (0.3 ms a call at 200 parameters,
        more than the graph replay); when the caller guards argument metadata
        (``guarded``), a call that an instance of the last signature ``matches`` has that
        signature, checked on the unborrowed arguments and the borrowed addresses only.
        Returns the signature and the instance that matched, if any."""
        if self.guarded and self.last is not None:
            key, instances = self.last
            for instance in instances:
                if instance.matches(args):
                    return key, instance
        return _signature(args), None

    def _run(
        self, args: Sequence[Any], key: tuple[object, ...], matched: _Instance | None = None
    ) -> tuple[Any, ...]:
        if self.last is not None and key is self.last[0]:
            instances = self.last[1]
        elif key in self.plain:
            return self._plain(args)
        else:
            instances = self.graphs.get(key)
            if instances is not None:
                self.last = key, instances
        if instances is None:
            if not _recordable(args, not self.auto, self.device_type):
                self.plain.add(key)
                return self._plain(args)
            outputs = self._plain(args)  # compiles, autotunes, and warms up allocations
            # Host tensors among the outputs: recorded anyway, and kept only if the
            # recording's outputs are all on the device. SDPA's dropout seed and offset
            # are CPU tensors outside a capture and device tensors inside one (torch
            # reads them on the device at each replay), so a training step's forward
            # records, and so does its backward once it receives them from a replay.
            on_host = not _recordable(outputs, True, self.device_type)
            instance = self._record(key, args, may_fail=self.auto or on_host)
            if instance is None:
                return outputs
            if not _recordable(instance.outputs, True, self.device_type):
                self.plain.add(key)  # host outputs even in the graph: it would freeze them
                return outputs
            self.graphs[key] = [instance]
            return outputs
        entry = None
        moves = self.moved.get(key)
        stale = STALE_CALLS * (moves.n_sites if moves is not None else 1)
        for instance in [i for i in instances if i.idle()]:
            if instance.retired:
                instances.remove(instance)
                continue
            if entry is None and instance.fits(args, in_place=instance is matched):
                entry = instance
                continue
            # An idle instance that does not fit (a borrowed input moved: a parameter
            # replaced, a forward that ran without its graph; or one it copies could be
            # borrowed now) gives way after STALE_CALLS such calls in a row per call
            # site (the other layers' calls of a block fit it no more than a move does).
            instance.misses += 1
            if instance.misses >= stale:
                instances.remove(instance)  # frees its pool and static copies
        if entry is None:
            # A signature is recorded at most MAX_RECORDINGS times per call site: a
            # pattern that keeps moving runs without a graph rather than recording at
            # every call.
            moves = self.moved.setdefault(key, _Moves())
            site, _ = _site(args)
            if not moves.admit(site):
                return self._plain(args)
            sites = len(moves.sites) + (site not in moves.sites)
            if (
                len(instances) >= self.max_instances * sites
                or self.recordings[key] >= MAX_RECORDINGS * sites
            ):
                return self._plain(args)
            entry = self._record(key, args, may_fail=self.auto)
            if entry is None:
                return self._plain(args)
            instances.append(entry)
        entry.misses = 0
        if entry.copied and entry.moved_inputs_settled(args):
            self._borrow_again(key, entry, args)
        for k in entry.copies:
            value = args[k]
            seen = entry.last[k]
            # The very tensor seen last time, unmodified, is skipped; but one copied for
            # having moved is another graph's output, which that graph's replays rewrite
            # without moving its version (a kept output is the same tensor every time).
            if (
                seen is not None
                and seen[0]() is value
                and seen[1] == value._version
                and k not in entry.copied
            ):
                continue
            try:
                span = entry.spans.get(k)
                if span is None:
                    entry.inputs[k].copy_(value)
                else:  # same strides (the signature): the same span of memory
                    span.copy_(flat_storage(value))
            except RuntimeError as e:
                static = entry.inputs[k]
                raise RuntimeError(
                    f"kiln: CUDA graph: cannot copy argument {k} into the graph's static input "
                    f"(argument {tuple(value.shape)} strides {value.stride()}, static input "
                    f"{tuple(static.shape)} strides {static.stride()}): {e}"
                ) from e
            entry.last[k] = (weakref.ref(value), value._version)
        if not self.replay_reads_inputs:
            entry.replay()
        else:
            for k in entry.borrowed:
                entry.inputs[k] = args[k]
            try:
                entry.replay()
            finally:
                for k in entry.borrowed:
                    entry.inputs[k] = None
        for site, _ in entry.refreshed:
            site.refreshed()
        if entry.graph_writes:
            # Written in place, as eager's in-place update would be (autograd's checks).
            torch.autograd.graph.increment_version([args[k] for k in entry.graph_writes])
        if entry.host_writes:
            write_back(
                [args[k] for _, k in entry.host_writes],
                [entry.values[j] for j, _ in entry.host_writes],
            )
        outputs = entry.handed_over(args)
        if self.clone_outputs:
            return tuple(o.clone() if isinstance(o, torch.Tensor) else o for o in outputs)
        return outputs

    def boxed_call(self, args: list[Any]) -> tuple[Any, ...]:
        """AOTAutograd's boxed convention: the list is emptied (replays read the static
        copies, so nothing else is held). A signature that runs without graphs hands the
        list to the program, which frees each input after its last use (a backward's
        saved activations), as without this runner."""
        key, matched = self._key(args)
        if (self.last is None or key is not self.last[0]) and key in self.plain:
            self.plain_calls += 1
            if self.writes is None:
                return self.program.boxed_call(args)
            targets = self.writes.capture(args)
            return self.writes.apply(self.program.boxed_call(args), targets)
        outputs = self._run(args, key, matched)
        args.clear()
        return outputs

    def _borrow_again(self, key: tuple[object, ...], entry: _Instance, args: Sequence[Any]) -> None:
        """``entry`` copies inputs that have settled (``_Instance.moved_inputs_settled``):
        retires it (dropped once idle) and forgets their moves, so that the next call
        records an instance that borrows them; only while the call site has recordings
        left (``MAX_RECORDINGS``): else copying is the way to keep replaying."""
        moves = self.moved[key]
        if self.recordings[key] >= MAX_RECORDINGS * moves.n_sites:
            return
        site_moves = moves.sites.get(_site(args)[0])
        if site_moves is None:
            return
        site_moves.forget(args, entry.copied)
        entry.retired = True

    def _plain(self, args: Sequence[Any]) -> tuple[Any, ...]:
        self.plain_calls += 1
        outputs = self.program(list(args))
        if self.writes is None:
            return outputs
        return self.writes.apply(outputs, self.writes.capture(args))

    def _record(
        self, key: tuple[object, ...], args: Sequence[Any], may_fail: bool
    ) -> _Instance | None:
        self.recordings[key] += 1
        moves = self.moved.setdefault(key, _Moves())
        copied = moves.note(args)
        borrowed = {
            k: a.data_ptr() for k, a in enumerate(args) if _borrowable(a) and k not in copied
        }
        static = list(args)
        spans: dict[int, torch.Tensor] = {}
        for k, a in enumerate(args):
            if isinstance(a, torch.Tensor) and k not in borrowed:
                static[k], span = _static_copy(a)
                if span is not None:
                    spans[k] = span
        positions = self.writes.positions if self.writes is not None else ()
        graph_writes = [(j, k) for j, k in enumerate(positions) if k in borrowed]

        def write_borrowed(outputs: tuple[Any, ...]) -> None:
            # Read at the capture (a CUDA graph) or at each replay (a stand-in that reruns
            # the program: the runner puts borrowed arguments into ``static`` then).
            values = outputs[len(outputs) - len(positions) :]
            targets = [static[k] for _, k in graph_writes]
            chosen = [values[j] for j, _ in graph_writes]
            write_grouped(targets, chosen, grouping(targets, chosen))

        refreshing = [
            s for s in self.program.weight_sites if self.refresh_weights and s.refreshable
        ]

        program = self.program  # not ``self``: the instance holds ``run`` (no cycle)

        def run() -> tuple[Any, ...]:
            # The copies the last run read, refreshed first (a replay: every step).
            for site in refreshing:
                site.refresh()
            return program(list(static))

        try:
            replay, outputs = self.record(run, write_borrowed if graph_writes else None)
        except Exception:
            if not may_fail:
                raise
            # An operation that cannot be recorded (a host synchronisation): no graphs
            # for this signature; the program itself is unaffected.
            self.plain.add(key)
            self.graphs.pop(key, None)
            self.last = None
            return None
        last: list[tuple[weakref.ref[torch.Tensor], int] | None] = [
            (weakref.ref(a), a._version) if isinstance(a, torch.Tensor) else None for a in args
        ]
        count = len(outputs) - len(positions)
        outputs, values = outputs[:count], outputs[count:]
        returned = lying_in_borrowed(outputs, args, borrowed, static)
        outputs = tuple(None if i in returned else o for i, o in enumerate(outputs))
        for k in borrowed:  # keep addresses, not tensors
            static[k] = last[k] = None
        # The static copies already hold the recording-time arguments.
        instance = _Instance(
            replay,
            static,
            outputs,
            last,
            borrowed=borrowed,
            spans=spans,
            copied=copied,
            partial=_partial_signature(args, [k for k in range(len(args)) if k not in borrowed]),
            returned=returned,
            pins=[
                (site, copy)
                for site in self.program.weight_sites
                if site not in refreshing and (copy := site.pin()) is not None
            ],
            refreshed=[(site, copy) for site in refreshing if (copy := site.pin()) is not None],
            values=values,
            graph_writes=[k for _, k in graph_writes],
            host_writes=[(j, k) for j, k in enumerate(positions) if k not in borrowed],
        )
        instance.settle(
            {args[k].untyped_storage().data_ptr() for k, view in returned.values() if view}
        )
        return instance


__all__ = ["CudaGraphRunner", "stays_put"]
