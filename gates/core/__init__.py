"""The pure core, a house of rooms:
gates.core.verdicts, gates.core.statistics, gates.core.quantities, gates.core.configuration,
gates.core.text (user text as the terminal may show it).

Code imports a room's face (gates.core.verdicts, ...); this package hands out no names.
No I/O beyond reading the two TOML files; imports nothing else of gates.
"""

__all__: list[str] = []
