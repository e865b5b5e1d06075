"""Who may call what. At the top, who an agent is (``agent``); in rooms of their own: the
``[[policy]]`` rules, their decision for each call, rate limits and what a stopped call
is told (``decision``), the approvals that wait for a person, what an agent's user is
asked and what is remembered (``waiting``), who may not decide whose call (``deciders``),
a call's arguments as a person is shown them (``shown``), and the masking of mcpd's
secrets in what servers send and people are shown (``redaction``)."""
