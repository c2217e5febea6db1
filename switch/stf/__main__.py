"""python -m switch.stf: see switch.stf.cli."""

from switch.stf.cli import main

raise SystemExit(main())
