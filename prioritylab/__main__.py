import sys

from prioritylab.cli import main

sys.exit(main())
