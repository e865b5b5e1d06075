"""What agents are listed of the tools: the listing, its pages, search mode and the instructions."""
