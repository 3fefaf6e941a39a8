"""The AG-UI door (``POST /ag-ui``): agent front ends (CopilotKit, the ``@ag-ui/client``
``HttpAgent``...) stream a run's steps, tool calls and state, and answer its approvals as
interrupts (:mod:`~master.doors.agui.door`)."""

from master.doors.agui.door import AgUiDoor
from master.doors.agui.wire import InputError

__all__ = ["AgUiDoor", "InputError"]
