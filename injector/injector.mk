# injector/ — build/vcattach, the CLI.
# (Filled in by the injector and codec work.)
