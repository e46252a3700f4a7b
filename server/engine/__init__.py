"""The orchestrator: runs, token streaming, auto-send from the queue, tools with approvals, abort.

``Orchestrator`` (process-wide: run loops, providers, sweeper), ``RunLoop`` (one run), ``Turn`` (one model
call), ``PartialTexts`` (partial text of the streams it runs), ``RunContext``
(what a run loop is handed), and ``state`` (the transitions, one transaction each).
"""

from .buffer import MemoryPartialTexts, PartialTexts
from .orchestrator import Orchestrator
from .run import RunLoop
from .run_context import RunContext
from .turn import Turn

__all__ = ["MemoryPartialTexts", "Orchestrator", "PartialTexts", "RunContext", "RunLoop", "Turn"]
