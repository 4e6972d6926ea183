"""Passes on the te level (tensor expressions) that stay within it."""
