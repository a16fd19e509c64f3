from pier.redact import MASK, Redactor


def test_masks_every_secret_in_text_bytes_and_data():
    redactor = Redactor(["sk-live-abcdef", "abc", ""])  # too short values are not masked
    assert redactor.text("key=sk-live-abcdef; abc") == f"key={MASK}; abc"
    assert redactor.bytes(b"x sk-live-abcdef x") == f"x {MASK} x".encode()
    assert redactor.data({"a": ["sk-live-abcdef", 3], "b": {"c": "sk-live-abcdef!"}}) == {
        "a": [MASK, 3],
        "b": {"c": f"{MASK}!"},
    }


def test_longest_secret_is_masked_whole():
    redactor = Redactor(["secret", "secret-and-more"])
    assert redactor.text("secret-and-more") == MASK
    assert not Redactor([])


# --- encoded forms (an agent that prints a key base64'd or hex'd leaks it all the same)

import base64  # noqa: E402
import subprocess  # noqa: E402
from urllib.parse import quote, quote_plus  # noqa: E402

import pytest  # noqa: E402

from tests.support.services import require_service  # noqa: E402

KEY = "sk-live-4f/9+Zq=Tz?&x"  # has characters base64, base64url and URL-encoding treat apart


@pytest.mark.parametrize("before", [b"", b"a", b"ab", b"abc"], ids=["shift0", "shift1", "shift2", "shift3"])
@pytest.mark.parametrize("after", [b"", b"\n", b"yz"], ids=["end", "newline", "more"])
def test_base64_of_the_secret_inside_a_longer_stream_is_masked_at_every_alignment(before, after):
    redactor = Redactor([KEY])
    stream = before + KEY.encode() + after
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        encoded = encode(stream).decode()
        masked = redactor.text(f"data: {encoded} end")
        assert MASK in masked
        # what is left of the encoded stream: the neighbours' own characters plus at most one
        # shared character either side, never enough to rebuild the key
        left = masked.removeprefix("data: ").removesuffix(" end").replace(MASK, "").rstrip("=")
        assert len(left) <= len(encode(before).rstrip(b"=")) + len(encode(after)) + 2, masked
        assert redactor.bytes(encoded.encode()).count(MASK.encode()) == 1


def test_wrapped_base64_of_a_long_secret_is_masked_line_by_line():
    long_key = "sk-ant-api03-" + "Ab9_xY+z/Q0" * 10
    redactor = Redactor([long_key])
    for wrapped in (
        base64.encodebytes((long_key + "\n").encode()).decode(),  # 76 a line, like `base64`
        "\n".join(base64.b64encode(long_key.encode()).decode()[i : i + 64] for i in range(0, 160, 64)),
    ):
        lines = wrapped.splitlines()
        assert len(lines) >= 2
        for line in lines:
            assert len(redactor.text(line).replace(MASK, "")) <= 4, (line, redactor.text(line))


@pytest.mark.parametrize(
    "form",
    [
        KEY.encode().hex(),
        KEY.encode().hex().upper(),
        quote(KEY),
        quote(KEY, safe=""),
        quote_plus(KEY),
        KEY[::-1],
    ],
    ids=["hex", "HEX", "url", "url-all", "url-plus", "reversed"],
)
def test_hex_url_encoded_and_reversed_forms_are_masked(form):
    assert form != KEY
    redactor = Redactor([KEY])
    assert redactor.text(f"x={form}&y=1") == f"x={MASK}&y=1"
    assert redactor.bytes(f"[{form}]".encode()) == f"[{MASK}]".encode()
    assert redactor.data({"k": [form]}) == {"k": [MASK]}


def test_what_the_base64_tool_prints_is_masked():
    redactor = Redactor([KEY])
    for wrap in ("-w76", "-w0"):
        try:
            printed = subprocess.run(["base64", wrap], input=(KEY + "\n").encode(), capture_output=True)
        except FileNotFoundError:
            require_service("the base64 tool", "coreutils' base64 is not on PATH")
        masked = redactor.text(printed.stdout.decode())
        assert MASK in masked and len(masked.replace(MASK, "").strip().rstrip("=")) <= 2, masked


def test_short_secrets_are_masked_only_as_written():
    redactor = Redactor(["abcd1"])
    assert redactor.text("abcd1 " + b"abcd1".hex()) == f"{MASK} " + b"abcd1".hex()


def test_a_secret_of_the_minimum_length_is_masked_and_a_shorter_one_is_not():
    assert Redactor(["abcd"]).text("xabcdx") == f"x{MASK}x"
    assert Redactor(["abc"]).text("xabcx") == "xabcx"
    assert bool(Redactor(["abcd"])) and not Redactor(["abc", ""])


def test_longest_first_even_when_the_shorter_sorts_after_it():
    # "zzzz" sorts after "abzzzzcd" alphabetically: only length may decide the order.
    redactor = Redactor(["zzzz"])
    redactor.add(["abzzzzcd"])
    assert redactor.text("<abzzzzcd>") == f"<{MASK}>"
    assert redactor.bytes(b"<abzzzzcd> zzzz") == f"<{MASK}> {MASK}".encode()


SPLIT_KEY = "sk-ant-operator-0123456789abcdef"


@pytest.mark.parametrize("width", [8, 10, 13, 16, 20])
def test_a_secret_split_across_lines_is_masked_piece_by_piece(width):
    """`fold -w N`, or a terminal wrapping the line: no piece long enough to mean
    anything is left."""
    text = "key: " + SPLIT_KEY + " done\n"
    folded = "".join(text[i : i + width] + "\n" for i in range(0, len(text), width))
    redactor = Redactor([SPLIT_KEY])
    for masked in (redactor.text(folded), redactor.bytes(folded.encode()).decode()):
        joined = masked.replace("\n", "")
        for size in range(8, len(SPLIT_KEY) + 1):
            for start in range(len(SPLIT_KEY) - size + 1):
                assert SPLIT_KEY[start : start + size] not in joined.replace("***", "|"), (width, masked)


def test_a_secret_split_in_two_lines_leaves_the_rest_of_the_lines():
    redactor = Redactor([SPLIT_KEY])
    assert (
        redactor.text(f"export K={SPLIT_KEY[:12]}\n{SPLIT_KEY[12:]} # set\n") == "export K=***\n*** # set\n"
    )
    assert redactor.text("an ordinary line, nothing secret\n") == "an ordinary line, nothing secret\n"
