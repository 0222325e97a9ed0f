"""Progress bars: tqdm's notebook bar where ipywidgets is installed, its text bar elsewhere
(`tqdm.auto` would fall back to the text bar with an "IProgress not found" warning)."""

import importlib.util


def progress_bar(**kwargs):
    """A tqdm bar with `kwargs` (total, desc, unit, disable, ...)."""
    if importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.auto import tqdm
    else:
        from tqdm.std import tqdm
    return tqdm(**kwargs)
