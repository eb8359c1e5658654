"""Command-line entry points (the top layer): argument parsing, output, exit codes."""
