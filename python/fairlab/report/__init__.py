"""Tables and figures in the style of the seed papers."""
