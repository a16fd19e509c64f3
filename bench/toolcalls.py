"""What reading tool calls off an agent's output costs, per line, on the path
every output line takes (pier.lifecycle.stages.run_agent's on_line): the
agent's `readable` alone (the baseline), against `readable` plus the tool-call
reader that feeds the trace's execute_tool spans, in the same run, on a
claude-code stream-json transcript made of the real events in
tests/unit/agents/streams/claude-code.jsonl repeated. Rounds alternate so the
machine's drift hits both alike; medians are compared.

    uv run python bench/toolcalls.py [--lines 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from pier.agents import get_agent
from pier.agents.toolcalls import ToolCalls

STREAM = Path(__file__).resolve().parents[1] / "tests" / "unit" / "agents" / "streams" / "claude-code.jsonl"


def lines(count: int) -> list[str]:
    events = [line for line in STREAM.read_text().splitlines() if line.strip()]
    return [events[i % len(events)] for i in range(count)]


def timed(work: list[str], with_tools: bool) -> float:
    agent = get_agent("claude-code")
    tools = ToolCalls("claude-code")
    began = time.perf_counter()
    for line in work:
        if with_tools:
            tools.line(line)
        agent.readable(line)
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    work = lines(args.lines)
    size = sum(len(line) for line in work) / len(work)
    base, both = [], []
    for _ in range(args.rounds):
        base.append(timed(work, with_tools=False))
        both.append(timed(work, with_tools=True))
    b, t = statistics.median(base), statistics.median(both)
    print(f"{args.lines} lines (mean {size:.0f} bytes), median of {args.rounds} rounds:")
    print(f"  readable only (baseline):     {b * 1e6 / args.lines:8.1f} us/line")
    print(
        f"  readable + tool-call reader:  {t * 1e6 / args.lines:8.1f} us/line  ({(t / b - 1) * 100:+.0f} %)"
    )


if __name__ == "__main__":
    main()
