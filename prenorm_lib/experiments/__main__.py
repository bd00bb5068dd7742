"""``python -m prenorm_lib.experiments``: list, run and check the experiment records."""

import sys

from prenorm_lib.experiments import main

sys.exit(main())
