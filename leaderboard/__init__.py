"""Arena's math room: aggregation, online raters, the Bradley-Terry family, intervals and ranks.

The public names are listed once, as plain re-exports in ``__init__.pyi`` (which type checkers read);
``lazy_loader`` loads each from its submodule on first use (PEP 562), so that ``import
leaderboard.online.elo`` in the web app's vote path does not pay for scikit-learn and scipy.optimize.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
