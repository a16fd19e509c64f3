"""The one rule for names of files a run made (pier.names.file_name)."""

from __future__ import annotations

import urllib.parse

from hypothesis import given
from hypothesis import strategies as st

from pier.names import file_name

component = st.binary(min_size=1, max_size=300).filter(lambda b: b"/" not in b and b"\0" not in b)


@given(component)
def test_a_name_is_printable_utf8_within_255_bytes_and_decodes_back(raw: bytes):
    name = file_name(raw)
    assert name.isprintable() and len(name.encode()) <= 255
    cut = len(name.encode()) > 255 - 9 and name[-9] == "~"
    if not cut:
        assert urllib.parse.unquote_to_bytes(name) == raw


def test_examples():
    assert file_name(b"\xff\xfe") == "%FF%FE"
    assert file_name(b"two\nlines") == "two%0Alines"
    assert file_name(b"100%.txt") == "100%25.txt"
    assert file_name("café.txt".encode()) == "café.txt"
    assert file_name(b"\xe2\x80\xae") == "%E2%80%AE"
    assert file_name(b"a" * 255) == "a" * 255
    cut = file_name(b"\xff" * 200)
    assert len(cut.encode()) <= 255 and cut.startswith("%FF") and "~" in cut
