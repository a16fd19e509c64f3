"""The example's code check: run by pier in /app after the agent stopped."""

import json
import unittest
from pathlib import Path

RESULTS = Path("/app/results")


class StatsTest(unittest.TestCase):
    def setUp(self):
        self.stats = json.loads((RESULTS / "stats.json").read_text())

    def test_top_words_are_sorted_by_count(self):
        counts = [entry["count"] for entry in self.stats["top"]]
        self.assertEqual(counts, sorted(counts, reverse=True))

    def test_report_lists_the_top_words(self):
        report = (RESULTS / "report.md").read_text()
        for entry in self.stats["top"]:
            self.assertIn(f"| {entry['word']} | {entry['count']} |", report)

    def test_the_most_common_word_is_the(self):
        self.assertEqual(self.stats["top"][0]["word"], "the")


if __name__ == "__main__":
    unittest.main()
