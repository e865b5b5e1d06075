"""The policy's decision for each call: the ``[[policy]]`` rules, rate limits, the gate
the call path meets, and what a call the policy stopped is told."""
