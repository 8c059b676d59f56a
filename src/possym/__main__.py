import sys

from possym.cli import main

sys.exit(main())
