"""Reading a config file into the model: where it and the socket are, how deeply it may
nest, and the ``${...}`` references expanded in its strings."""
