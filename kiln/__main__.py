"""``python -m kiln``: the main job (see kiln.main_job)."""

import sys

from kiln.main_job import main

sys.exit(main())
