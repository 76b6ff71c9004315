"""The vm backend's one error type: every refusal or failure is one sentence."""


class VmError(RuntimeError):
    """A vm run, plan or image could not be done; the message says why and what to do."""
