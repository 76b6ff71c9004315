"""`python -m fairlab ARGS` is `fairlab ARGS`."""

from fairlab.cli import main

main()
