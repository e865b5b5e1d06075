"""The daemon. At the top, the wiring (``daemon``) and the parts of it that belong to no
one wing, so stay beside it: who may call what with the record of every call, the policy
and the audit log held and reconfigured together (``oversight``); the secrets mcpd comes
to hold while it runs, the servers' and the endpoint's (``runtime_secrets``); what the
daemon says of itself, read from every part the wiring holds (``status_report``); and the
signals, which ask for a stop as well as a reload (``signals``). In rooms of their own:
the start (``starting``) and a reload (``reloading``), beside the wings (``agents``,
``servers``, ``registry``, ``policy``, ``audit``, ``config``, ``local``, ``cli``,
``demo``)."""

__version__ = "0.1.0"
