"""The stage timings a study or a bootstrap shows in its summary."""


def timings_text(timings: dict) -> str:
    """One line: the seconds of each stage and their share of the total."""
    total = timings.get("total_s") or sum(v for k, v in timings.items() if k != "total_s")
    stages = ", ".join(
        f"{k[:-2].replace('_', ' ')} {v:.3g} s ({100 * v / total:.0f} %)"
        for k, v in timings.items()
        if k != "total_s" and total > 0
    )
    return f"time: {stages}; total {total:.3g} s (compilation included)"
