"""Host-side notes that a problem carries past `jit` without entering its program."""


class Notes:
    """Facts about how a problem was built (e.g. the test functions chosen for each
    trajectory) that its solve never reads. Every `Notes` compares equal and hashes
    alike, so a static field holding one does not make `jit` compile again when the
    data, and with them the notes, change."""

    __slots__ = ("value",)

    def __init__(self, value=()):
        self.value = value

    def __eq__(self, other) -> bool:
        return isinstance(other, Notes)

    def __hash__(self) -> int:
        return hash(Notes)

    def __repr__(self) -> str:
        return f"Notes({self.value!r})"
