"""`pier sweep --images --older-than`: which agent layers go (unused longer than
the age, by last use or else build time), which stay (recent, or in use), and a
bad age refused before anything is removed."""

from __future__ import annotations

import pytest

from pier.cli.layers import parse_age, prune_layers
from pier.errors import InputError
from pier.sandbox.base import LayerInfo
from pier.sandbox.fake import FakeBackend

NOW = 1_000_000_000.0
DAY = 86400.0


class LayeredBackend(FakeBackend):
    def __init__(self, layers: list[LayerInfo], in_use: set[str]):
        super().__init__()
        self.layers, self.in_use, self.removed = layers, in_use, []

    def list_layers(self) -> list[LayerInfo]:
        return list(self.layers)

    def remove_layer(self, image: str) -> bool:
        if image in self.in_use:
            return False
        self.removed.append(image)
        return True


def layer(image: str, created: float, last_used: float | None) -> LayerInfo:
    return LayerInfo(
        image=image, name="codex", version="1", base="b", size=1, created=created, last_used=last_used
    )


def test_only_layers_unused_for_the_age_are_removed_and_one_in_use_is_kept():
    backend = LayeredBackend(
        [
            layer("pier-agent/codex:old", NOW - 30 * DAY, NOW - 10 * DAY),
            layer("pier-agent/codex:used-lately", NOW - 30 * DAY, NOW - 1 * DAY),
            layer("pier-agent/codex:built-lately", NOW - 2 * DAY, None),
            layer("pier-agent/codex:never-used", NOW - 9 * DAY, None),
            layer("pier-agent/codex:in-use", NOW - 30 * DAY, NOW - 20 * DAY),
        ],
        in_use={"pier-agent/codex:in-use"},
    )
    assert prune_layers(backend, "7d", now=NOW) == 2
    assert backend.removed == ["pier-agent/codex:old", "pier-agent/codex:never-used"]


@pytest.mark.parametrize(
    ("text", "seconds"), [("30m", 1800), ("12h", 43200), ("7d", 7 * DAY), ("1d12h", 1.5 * DAY)]
)
def test_ages(text, seconds):
    assert parse_age(text) == seconds


@pytest.mark.parametrize("text", ["", "7", "1x", "d7", "7d and more"])
def test_a_bad_age_is_refused(text):
    with pytest.raises(InputError, match="--older-than"):
        parse_age(text)
