"""Collective algorithms as sequences of communication steps.

Neutral module shared by the Harvest scheduler (controller) and the hosts that run collectives for
real, so it imports no solver and no I/O. A collective on ``n`` ranks is a tuple of :class:`Step`;
in step ``i`` every rank ``u`` sends one chunk to ``sends[u]`` (or nothing when it is ``None``).
The chunk is the concatenation of the data blocks listed in ``blocks[u]``: the message is cut into
``n`` equal blocks, block ``b`` ends up reduced at rank ``b`` after a reduce-scatter.

The per-pair volume of step ``i`` is ``fraction * message_bytes`` with ``fraction =
len(blocks[u]) / n`` (the same for every sender: the model of the Harvest paper gives each step a
0/1 matrix and one volume).

All-to-all (``shift``, ``bruck``; phase ``all-to-all``): rank u's message is n blocks, the one
for rank d at position (d - u) mod n; afterwards position j of rank v holds the block that
rank (v - j) mod n had at position j, i.e. the one it had for v. In an ``all-to-all`` step the
receiver takes the sent positions into a staging buffer and copies them over its own once the
step is over (Bruck forwards blocks it received earlier, from the positions it overwrites).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

COLLECTIVES = ("rd", "swing", "ring", "shift", "bruck")
PHASES = ("allreduce", "reduce-scatter", "all-gather", "all-to-all")
ALL_TO_ALL = ("shift", "bruck")  # collectives whose only phase is all-to-all


class CollectiveError(ValueError):
    """Raised for parameters a collective algorithm cannot run with."""


@dataclass(frozen=True)
class Step:
    """One communication step: who sends to whom, and which blocks."""

    kind: str  # "reduce-scatter" (receiver adds), "all-gather" (receiver stores) or
    # "all-to-all" (receiver stores once the step is over: positions it may still be sending)
    sends: tuple[int | None, ...]  # sends[u] = destination rank of u, or None
    blocks: tuple[tuple[int, ...], ...]  # blocks[u] = block indices u sends (empty if idle)
    n_blocks: int

    @property
    def n(self) -> int:
        return len(self.sends)

    @property
    def fraction(self) -> float:
        """Per-pair volume as a fraction of the message size."""
        sizes = {len(b) for u, b in enumerate(self.blocks) if self.sends[u] is not None}
        return (max(sizes) if sizes else 0) / self.n_blocks

    @property
    def pairs(self) -> tuple[tuple[int, int], ...]:
        """Directed (source, destination) pairs of the communication matrix."""
        return tuple((u, v) for u, v in enumerate(self.sends) if v is not None)

    def receives_from(self, v: int) -> list[int]:
        return [u for u, w in enumerate(self.sends) if w == v]


@dataclass(frozen=True)
class Collective:
    name: str
    phase: str
    n: int
    steps: tuple[Step, ...]


def is_power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def _check_n(n: int, algorithm: str, power_of_two: bool) -> None:
    if not isinstance(n, int) or isinstance(n, bool):
        raise CollectiveError(f"{algorithm}: number of ranks must be an integer, got {n!r}")
    if n < 2:
        raise CollectiveError(f"{algorithm}: needs at least 2 ranks, got {n}")
    if power_of_two and not is_power_of_two(n):
        raise CollectiveError(f"{algorithm}: number of ranks must be a power of two, got {n}")


def _reach_sets(n: int, peers: Sequence[Sequence[int]]) -> list[list[frozenset[int]]]:
    """reach[t][u]: ranks whose block u must forward in reduce-scatter steps t.. (incl. u).

    A reduce-scatter in which rank u sends to peers[t][u] at step t delivers block b to rank b iff
    the sets reach[t+1][peers[t][u]] and reach[t+1][u] partition reach[t][u]; the receiver of a
    step is responsible for exactly the blocks it can still reach.
    """
    s = len(peers)
    reach: list[list[frozenset[int]]] = [[frozenset()] * n for _ in range(s + 1)]
    reach[s] = [frozenset({u}) for u in range(n)]
    for t in range(s - 1, -1, -1):
        reach[t] = [reach[t + 1][u] | reach[t + 1][peers[t][u]] for u in range(n)]
    return reach


def _butterfly(
    name: str, n: int, phase: str, peer: Callable[[int, int], int], q: int
) -> Collective:
    """Reduce-scatter with peer(t, u) at steps t = 0..q-1, all-gather with the reverse order."""
    peers = [[peer(t, u) % n for u in range(n)] for t in range(q)]
    reach = _reach_sets(n, peers)
    rs = tuple(
        Step(
            kind="reduce-scatter",
            sends=tuple(peers[t]),
            blocks=tuple(tuple(sorted(reach[t + 1][peers[t][u]])) for u in range(n)),
            n_blocks=n,
        )
        for t in range(q)
    )
    # All-gather mirrors the reduce-scatter in time: before the step that undoes RS step t, rank u
    # holds the blocks reach[t+1][u] and sends all of them to the same peer (same direction).
    ag = tuple(
        Step(
            kind="all-gather",
            sends=tuple(peers[t]),
            blocks=tuple(tuple(sorted(reach[t + 1][u])) for u in range(n)),
            n_blocks=n,
        )
        for t in range(q - 1, -1, -1)
    )
    steps = {"allreduce": rs + ag, "reduce-scatter": rs, "all-gather": ag}[phase]
    return Collective(name=name, phase=phase, n=n, steps=steps)


def _check_phase(phase: str) -> None:
    if phase not in PHASES:
        raise CollectiveError(f"unknown phase {phase!r}; choose one of {', '.join(PHASES)}")


def recursive_doubling(n: int, phase: str = "allreduce") -> Collective:
    """Cyclic recursive doubling: in reduce-scatter step i (1-based) rank u sends m/2^i to
    u + 2^(i-1); the all-gather repeats the offsets in reverse order, same direction."""
    _check_phase(phase)
    _check_n(n, "recursive doubling", power_of_two=True)
    q = n.bit_length() - 1
    return _butterfly("rd", n, phase, lambda t, u: u + (1 << t), q)


def swing_rho(step: int) -> int:
    """Swing distance rho(s) = (1 - (-2)^(s+1)) / 3 for 0-based s: 1, -1, 3, -5, 11, ..."""
    return (1 - (-2) ** (step + 1)) // 3


def swing_peer(step: int, rank: int, n: int) -> int:
    """Swing peer: r + rho(s) for even r, r - rho(s) for odd r (mod n)."""
    rho = swing_rho(step)
    return (rank + rho) % n if rank % 2 == 0 else (rank - rho) % n


def swing(n: int, phase: str = "allreduce") -> Collective:
    """Swing (bidirectional exchange with swinging distances), power-of-two rank counts."""
    _check_phase(phase)
    _check_n(n, "swing", power_of_two=True)
    q = n.bit_length() - 1
    return _butterfly("swing", n, phase, lambda t, u: swing_peer(t, u, n), q)


def ring(n: int, phase: str = "allreduce") -> Collective:
    """Ring: n-1 reduce-scatter and n-1 all-gather steps, u -> u+1, one block of m/n each."""
    _check_phase(phase)
    _check_n(n, "ring", power_of_two=False)
    nxt = tuple((u + 1) % n for u in range(n))
    rs = tuple(
        Step("reduce-scatter", nxt, tuple(((u - s - 1) % n,) for u in range(n)), n)
        for s in range(n - 1)
    )
    ag = tuple(
        Step("all-gather", nxt, tuple(((u - s) % n,) for u in range(n)), n) for s in range(n - 1)
    )
    steps = {"allreduce": rs + ag, "reduce-scatter": rs, "all-gather": ag}[phase]
    return Collective(name="ring", phase=phase, n=n, steps=steps)


def _check_all_to_all(name: str, phase: str) -> None:
    if phase != "all-to-all":
        raise CollectiveError(f"{name} is an all-to-all: its phase is all-to-all, not {phase!r}")


def linear_shift(n: int, phase: str = "all-to-all") -> Collective:
    """All-to-all in n - 1 steps: in step s rank u writes its block for u + s (position s)."""
    _check_all_to_all("shift", phase)
    _check_n(n, "linear shift", power_of_two=False)
    steps = tuple(
        Step("all-to-all", tuple((u + s) % n for u in range(n)), tuple((s,) for _ in range(n)), n)
        for s in range(1, n)
    )
    return Collective(name="shift", phase=phase, n=n, steps=steps)


def bruck(n: int, phase: str = "all-to-all") -> Collective:
    """Bruck's all-to-all in log2 n steps: in step k rank u writes the positions whose bit k
    is set (n/2 blocks, some received in earlier steps) to u + 2^k."""
    _check_all_to_all("bruck", phase)
    _check_n(n, "bruck", power_of_two=True)
    q = n.bit_length() - 1
    steps = tuple(
        Step("all-to-all", tuple((u + (1 << k)) % n for u in range(n)),
             tuple(tuple(j for j in range(n) if j >> k & 1) for _ in range(n)), n)
        for k in range(q)
    )
    return Collective(name="bruck", phase=phase, n=n, steps=steps)


def build(name: str, n: int, phase: str | None = None) -> Collective:
    """Collective by short name (rd, swing, ring; shift, bruck). ``phase`` defaults to
    allreduce, and to all-to-all for the all-to-all algorithms."""
    builders: dict[str, Callable[[int, str], Collective]] = {
        "rd": recursive_doubling, "swing": swing, "ring": ring, "shift": linear_shift,
        "bruck": bruck}
    if name not in builders:
        raise CollectiveError(
            f"unknown collective {name!r}; choose one of {', '.join(COLLECTIVES)}"
        )
    if phase is None:
        phase = "all-to-all" if name in ALL_TO_ALL else "allreduce"
    elif phase == "all-to-all" and name not in ALL_TO_ALL:
        raise CollectiveError(f"{name} is a reduction; all-to-all runs as "
                              f"{' or '.join(ALL_TO_ALL)}")
    return builders[name](n, phase)


def simulate(coll: Collective) -> list[dict[int, frozenset[int]]]:
    """Run the collective symbolically; returns per rank {block: set of contributing ranks}.

    Reduce-scatter steps add the received contributions, all-gather steps copy the reduced block.
    Used by tests and by hosts to check a plan before running it.
    """
    n = coll.n
    if coll.phase == "all-to-all":
        return _simulate_all_to_all(coll)
    if coll.phase == "all-gather":
        state = [{u: frozenset(range(n))} for u in range(n)]
    else:
        state = [{b: frozenset({u}) for b in range(n)} for u in range(n)]
    for step in coll.steps:
        outgoing = []
        for u, v in enumerate(step.sends):
            if v is None:
                continue
            missing = [b for b in step.blocks[u] if b not in state[u]]
            if missing:
                raise CollectiveError(f"rank {u} sends blocks {missing} it does not hold")
            outgoing.append((v, {b: state[u][b] for b in step.blocks[u]}))
            if step.kind == "reduce-scatter":
                for b in step.blocks[u]:
                    del state[u][b]
        for v, payload in outgoing:
            for b, contrib in payload.items():
                if step.kind == "reduce-scatter":
                    state[v][b] = state[v].get(b, frozenset()) | contrib
                else:
                    state[v][b] = contrib
    return state


def _simulate_all_to_all(coll: Collective) -> list[dict[int, frozenset[int]]]:
    """Per rank {position: {the rank whose block it holds}}; raises CollectiveError unless
    every position j of rank v ends with rank (v - j) mod n's block."""
    n = coll.n
    state = [{j: u for j in range(n)} for u in range(n)]
    for step in coll.steps:
        if step.kind != "all-to-all":
            raise CollectiveError(f"an all-to-all has only all-to-all steps, not {step.kind}")
        arrivals = [(v, {j: state[u][j] for j in step.blocks[u]})
                    for u, v in enumerate(step.sends) if v is not None]
        for v, payload in arrivals:  # applied after every send: staging, then copy
            state[v].update(payload)
    for v in range(n):
        wrong = [j for j in range(n) if state[v][j] != (v - j) % n]
        if wrong:
            raise CollectiveError(f"{coll.name}: rank {v} ends with the wrong blocks at "
                                  f"positions {wrong}")
    return [{j: frozenset({origin}) for j, origin in st.items()} for st in state]
