"""Which provisioned Nsight Systems releases the recording tests use.

By default the oldest and the newest (2022.4: the old report names and export layout; 2024.2:
the current ones). 2023.4 shares 2024.2's generation; it joins with ``GPUSCOPE_TEST_ALL_NSYS=1``
(the suite then takes about a third longer in its nsys part, which the CI time cannot afford on
the shared 2-core runner).
"""

from __future__ import annotations

import os

ALL = ("2022.4", "2023.4", "2024.2")
VERSIONS = ALL if os.environ.get("GPUSCOPE_TEST_ALL_NSYS") == "1" else ("2022.4", "2024.2")
