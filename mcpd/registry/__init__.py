"""The aggregated table of what servers offer, under collision-free local names: naming,
curation and budgets. Pure bookkeeping: no I/O.

In rooms: the tables themselves (``tables``) and how their names are spelled
(``naming``); what one profile's agents see and search (``profiles``); resources and
the URIs they are routed by (``uris``); the gate every list passes (``gating``), the
rules' findings on what a model reads (``findings``), the pins a person approved
(``pinning``); and a server's text made fit to pass on (``text``)."""
