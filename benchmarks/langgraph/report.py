"""Joins the JSON lines of the two sides of `make bench-peer` into one Markdown table.

Usage: report.py FILE... (lines that are not JSON objects are skipped). Standard library only.
"""

from __future__ import annotations

import json
import sys

COLUMNS = [
    ("langgraph-memory", "LangGraph in-memory"),
    ("langgraph-sqlite", "LangGraph SQLite"),
    ("infinity-engine", "Infinity engine only"),
    ("infinity-memory", "Infinity in-memory"),
    ("infinity-file", "Infinity file store"),
]
RATIOS = [
    ("langgraph-memory", "infinity-memory", "LG in-memory ÷ Inf in-memory"),
    ("langgraph-sqlite", "infinity-file", "LG SQLite ÷ Inf file store"),
    ("langgraph-memory", "infinity-engine", "LG in-memory ÷ Inf engine"),
]
METRICS = [
    ("turn_us", "time per turn (median)"),
    ("bytes_payload", "bytes stored per turn"),
    ("bytes_written", "bytes handed to write(2) per turn"),
    ("idle_rss_bytes", "resident memory per idle conversation"),
    ("idle_heap_bytes", "Python heap per idle conversation (tracemalloc)"),
]


def read(paths: list[str]) -> tuple[dict, list[dict]]:
    values: dict[tuple[str, str, int], float] = {}
    versions: list[dict] = []
    for path in paths:
        with open(path) as lines:
            for line in lines:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                record = json.loads(line)
                if record["metric"] == "versions":
                    versions.append(record)
                else:
                    values[(record["metric"], record["system"], record["size"])] = record["value"]
    return values, versions


def amount(metric: str, value: float | None) -> str:
    if value is None:
        return ""
    if metric == "turn_us":
        if value < 1_000:
            return f"{value:.1f} µs"
        if value < 100_000:
            return f"{value / 1_000:.2f} ms"
        return f"{value / 1_000:,.0f} ms"
    if value < 1_000:
        return f"{value:,.0f} B"
    if value < 1_000_000:
        return f"{value / 1_000:.1f} KB"
    return f"{value / 1_000_000:.1f} MB"


def ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b <= 0:
        return ""
    r = a / b
    if r >= 100:
        return f"{r:,.0f}×"
    if r >= 10:
        return f"{r:.1f}×"
    return f"{r:.2f}×"


def main() -> None:
    values, versions = read(sys.argv[1:])
    sizes = sorted({size for (_, _, size) in values})
    header = ["metric", "messages"] + [name for _, name in COLUMNS] + [n for _, _, n in RATIOS]
    print("| " + " | ".join(header) + " |")
    print("|---|---:|" + "---:|" * (len(header) - 2))
    for metric, label in METRICS:
        for size in sizes:
            row = [values.get((metric, system, size)) for system, _ in COLUMNS]
            if all(v is None for v in row):
                continue
            cells = [label, f"{size:,}"] + [amount(metric, v) for v in row]
            cells += [
                ratio(values.get((metric, a, size)), values.get((metric, b, size)))
                for a, b, _ in RATIOS
            ]
            print("| " + " | ".join(cells) + " |")
    for record in versions:
        details = {
            k: v for k, v in record.items() if k not in ("system", "metric", "size", "value", "unit")
        }
        print(f"\n{record['system']}: " + ", ".join(f"{k} {v}" for k, v in details.items()))


if __name__ == "__main__":
    main()
