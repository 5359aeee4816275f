"""LangGraph's side of `make bench-peer`: the workload of the `peer` part of
crates/infinity-agent-core/benches/slice.rs, on LangGraph, printed as JSON lines.

The graph: a StateGraph whose state is a list of messages merged by the `add_messages` reducer,
START -> "chat" -> END, where "chat" hands the whole history to a fake chat model from
langchain_core (FakeListChatModel, always answering "Noted.") and returns its reply.

A turn is one `graph.invoke` with one user message ("hello again"): the checkpointer loads the
thread, the model replies, the checkpointer saves. Each timed turn has a conversation of its own
whose N messages are put in place first, untimed, with one `update_state` (as if the "chat" node
had written them), as the Rust part commits its N entries in one go: every turn starts from
exactly N messages.

Measured, for N in 10, 1,000 and 10,000:
- turn_us: median wall time of a turn, with InMemorySaver and with SqliteSaver on a file;
- bytes_payload (SQLite): growth per turn of the bytes stored in the checkpoint tables (the
  checkpoint and metadata columns of `checkpoints`, the value column of `writes`);
- bytes_written (SQLite): growth per turn of the process's `wchar` in /proc/self/io, the bytes
  handed to write(2) (database pages, WAL frames and headers);
- idle_rss_bytes / idle_heap_bytes (InMemorySaver): many conversations, each N messages and one
  turn, then the growth of the resident set (in a process of its own, without tracemalloc) and
  of the memory tracemalloc sees (in another), divided by the number of conversations.

Every line: {"system", "metric", "size", "value", "unit", ...}; `run.sh` joins them with the Rust
side's lines (report.py).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from importlib.metadata import version
from typing import Annotated, TypedDict

from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

SIZES = (10, 1_000, 10_000)
# Turns timed per size (after two untimed ones); fewer where a turn takes long.
TURNS = {10: 200, 1_000: 40, 10_000: 12}
# Conversations kept for the idle-memory measurement: many where each is small, so the growth
# is well above the noise, fewer where each holds megabytes. The Rust part uses the same.
IDLE_CONVERSATIONS = {10: 10_000, 1_000: 200, 10_000: 20}
HEAP_CONVERSATIONS = 2_000


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def build_graph(checkpointer):
    model = FakeListChatModel(responses=["Noted."])

    def chat(state: Chat) -> dict:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(Chat)
    graph.add_node("chat", chat)
    graph.add_edge(START, "chat")
    graph.add_edge("chat", END)
    return graph.compile(checkpointer=checkpointer)


def history(n: int) -> list[AnyMessage]:
    """N messages alternating user and assistant, worded as the Rust part's entries."""
    return [
        HumanMessage(f"message number {seq} with some ordinary text in it")
        if seq % 2 == 0
        else AIMessage(f"reply number {seq}, also of an ordinary length")
        for seq in range(n)
    ]


def preload(graph, config: dict, n: int) -> None:
    graph.update_state(config, {"messages": history(n)}, as_node="chat")


def turn(graph, config: dict) -> dict:
    return graph.invoke({"messages": [HumanMessage("hello again")]}, config)


def emit(system: str, metric: str, size, value, unit: str, **extra) -> None:
    line = {"system": system, "metric": metric, "size": size, "value": value, "unit": unit}
    line.update(extra)
    print(json.dumps(line), flush=True)


def written_bytes() -> int:
    """Bytes this process has handed to write(2) so far."""
    with open("/proc/self/io") as io:
        for line in io:
            if line.startswith("wchar:"):
                return int(line.split()[1])
    raise RuntimeError("/proc/self/io has no wchar line")


def stored_bytes(conn: sqlite3.Connection) -> int:
    """Bytes in the checkpoint tables' payload columns."""
    row = conn.execute(
        "SELECT (SELECT coalesce(sum(length(checkpoint) + length(metadata)), 0) FROM checkpoints)"
        " + (SELECT coalesce(sum(length(value)), 0) FROM writes)"
    ).fetchone()
    return int(row[0])


def timed_turns(graph, label: str, n: int, turns: int, counters=None) -> list[float]:
    """Microseconds per turn, each on a conversation of its own that has exactly `n` messages
    when the turn starts (a turn adds two: on one conversation, 200 turns would take a history
    of 10 to 410), all of them put in place before the first turn. The two first turns are not
    timed. `counters`, if given, is a pair of callables `(before, after)`, called around each
    timed turn but outside the timing."""
    times = []
    # Every conversation is put in place first, untimed (as the Rust side does): a bulk write
    # just before a timed turn would leave that turn the garbage of the write to deal with.
    configs = [{"configurable": {"thread_id": f"{label}-{n}-{i}"}} for i in range(turns + 2)]
    for config in configs:
        preload(graph, config, n)
    for i, config in enumerate(configs):
        if i >= 2 and counters is not None:
            counters[0]()
        start = time.perf_counter()
        state = turn(graph, config)
        took = (time.perf_counter() - start) * 1e6
        if len(state["messages"]) != n + 2:
            raise RuntimeError(f"{len(state['messages'])} messages after a turn, not {n + 2}")
        if i >= 2:
            times.append(took)
            if counters is not None:
                counters[1]()
    return times


def in_memory(n: int, turns: int) -> None:
    graph = build_graph(InMemorySaver())
    times = timed_turns(graph, "memory", n, turns)
    emit("langgraph-memory", "turn_us", n, statistics.median(times), "us", turns=turns)


def on_sqlite(n: int, turns: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        conn = sqlite3.connect(os.path.join(folder, "checkpoints.sqlite"), check_same_thread=False)
        try:
            graph = build_graph(SqliteSaver(conn))
            payload: list[int] = []
            written: list[int] = []
            rows: list[int] = []
            marks = {}

            def count_rows() -> int:
                return sum(
                    conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                    for table in ("checkpoints", "writes")
                )

            def mark() -> None:
                marks["payload"] = stored_bytes(conn)
                marks["rows"] = count_rows()
                marks["written"] = written_bytes()

            def after_turn() -> None:
                now_written = written_bytes()
                now_payload = stored_bytes(conn)
                now_rows = count_rows()
                payload.append(now_payload - marks["payload"])
                written.append(now_written - marks["written"])
                rows.append(now_rows - marks["rows"])
                mark()

            times = timed_turns(graph, "sqlite", n, turns, (mark, after_turn))
            emit("langgraph-sqlite", "turn_us", n, statistics.median(times), "us", turns=turns)
            emit(
                "langgraph-sqlite",
                "bytes_payload",
                n,
                statistics.median(payload),
                "B",
                rows_per_turn=statistics.median(rows),
            )
            emit("langgraph-sqlite", "bytes_written", n, statistics.median(written), "B")
        finally:
            conn.close()


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def idle(n: int, count: int, measure: str) -> None:
    """`count` idle conversations of `n` messages and one turn, in one InMemorySaver."""
    graph = build_graph(InMemorySaver())
    # One conversation first, so that the first turn's imports and caches are not counted.
    warm = {"configurable": {"thread_id": "warm-up"}}
    preload(graph, warm, n)
    turn(graph, warm)
    if measure == "heap":
        tracemalloc.start()
    gc.collect()
    before = tracemalloc.get_traced_memory()[0] if measure == "heap" else resident_bytes()
    for i in range(count):
        config = {"configurable": {"thread_id": f"idle-{i}"}}
        if n:
            preload(graph, config, n)
        turn(graph, config)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0] if measure == "heap" else resident_bytes()
    metric = "idle_heap_bytes" if measure == "heap" else "idle_rss_bytes"
    emit(
        "langgraph-memory",
        metric,
        n,
        (after - before) / count,
        "B",
        conversations=count,
    )


def versions() -> None:
    emit(
        "langgraph",
        "versions",
        None,
        None,
        "",
        python=platform.python_version(),
        sqlite=sqlite3.sqlite_version,
        **{
            name: version(name)
            for name in (
                "langgraph",
                "langgraph-checkpoint",
                "langgraph-checkpoint-sqlite",
                "langchain-core",
            )
        },
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", default=",".join(map(str, SIZES)), help="history lengths, comma separated"
    )
    parser.add_argument("--turns", type=int, help="turns timed per size (default: by size)")
    parser.add_argument(
        "--conversations", type=int, help="idle conversations per size (default: by size)"
    )
    parser.add_argument(
        "--idle", nargs=3, metavar=("SIZE", "COUNT", "rss|heap"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.idle:
        size, count, measure = args.idle
        idle(int(size), int(count), measure)
        return
    versions()
    sizes = [int(s) for s in args.sizes.split(",")]
    for n in sizes:
        turns = args.turns or TURNS.get(n, 20)
        in_memory(n, turns)
        on_sqlite(n, turns)
    # Each measurement of memory in a fresh process: what one leaves behind must not count in
    # the next, and tracemalloc's own bookkeeping must not count in the resident set.
    for n in sizes:
        count = args.conversations or IDLE_CONVERSATIONS.get(n, 100)
        for measure in ("rss", "heap"):
            # Under tracemalloc a turn is several times slower; a per-conversation figure needs
            # no more than a couple of thousand conversations.
            used = count if measure == "rss" else min(count, HEAP_CONVERSATIONS)
            subprocess.run(
                [sys.executable, __file__, "--idle", str(n), str(used), measure], check=True
            )


if __name__ == "__main__":
    main()
