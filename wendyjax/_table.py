"""Fixed-width text tables for results' `table()` and `summary()`."""


def fixed_width(header: list[str], rows: list[list[str]], *, label: bool = True) -> list[str]:
    """The header, a rule under it and the rows, columns two spaces apart and right-aligned;
    with `label`, the first column (a row's name) is left-aligned."""
    widths = [max([len(h), *(len(row[c]) for row in rows)]) for c, h in enumerate(header)]
    lines = [
        "  ".join(v.ljust(w) if label and c == 0 else v.rjust(w) for c, (v, w) in enumerate(zip(line, widths)))
        for line in [header, *rows]
    ]
    return [lines[0], "-" * len(lines[0]), *lines[1:]]
