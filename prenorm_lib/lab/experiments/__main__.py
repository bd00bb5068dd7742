"""``python -m prenorm_lib.lab.experiments``: list, run and check the experiment records."""

import sys

from prenorm_lib.lab.experiments import main

sys.exit(main())
