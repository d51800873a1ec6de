"""The pure scheduler core: snapshot and `now` in, decisions out. No I/O, no clock."""
