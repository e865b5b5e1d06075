"""Who may not decide whose call: an agent's kin as /proc tells it, agents gone whose
processes live on, a decider looked up among many agents, and the refusal's words."""
