"""The orchestrator: runs, token streaming, auto-send from the queue, tools with approvals, abort.

``Orchestrator`` (process-wide: run loops, providers, sweeper), ``RunLoop`` (one run), ``Turn`` (one model
call), ``StreamBuffer`` (partial text of live streams), and ``state`` (the transitions, one transaction each).
"""

from .buffer import MemoryStreamBuffer, StreamBuffer
from .orchestrator import Orchestrator
from .run import RunLoop
from .turn import Turn

__all__ = ["MemoryStreamBuffer", "Orchestrator", "RunLoop", "StreamBuffer", "Turn"]
