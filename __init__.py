"""ziggurat: a deep-learning compiler on xDSL."""
