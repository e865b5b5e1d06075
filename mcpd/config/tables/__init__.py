"""The config's tables as frozen structs: the whole config and ``[daemon]`` (``model``),
a server's, a profile's, the policy's rules and the glob patterns they hold, and the
hosts whose profiles every daemon has."""
