"""Reference facts shipped with arcstudy as package data (see README.md here); no code."""
