"""What a model reads of each listed item, and the rules that find in it text that speaks
to the model instead of describing a tool."""
