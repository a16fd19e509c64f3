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
