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
